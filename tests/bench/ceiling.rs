//! The ceiling: `pgbench -M prepared` running `ceiling.sql` (the order's writes, with and
//! without the key's) on the bench's database, on Raptor's own tables and on the minimal schema
//! (`ceiling_min_schema.sql`); its throughput, latency percentiles and CPU per transaction.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;
use sqlx::PgPool;

use crate::{cpu, Bench, Settings, LEVELS, USERS};

/// The ceilings on the tables scenarios 1-3 ran on (run before scenario 9 grows them): the keyed
/// script at 1 and 32 clients, the unkeyed one at 32, the keyed one on the minimal schema at 1
/// and 32.
pub(crate) async fn ceilings(settings: &Settings, b: &Bench) -> anyhow::Result<Vec<Ceiling>> {
    let users = (b.users[0].id, b.users[USERS - 1].id);
    let db_meter = b.meter.without_server();
    println!("ceiling: pgbench -M prepared tests/bench/ceiling.sql ...");
    let mut ceiling = Vec::new();
    let real = (Schema::Real, Script::Keyed);
    for &clients in &LEVELS {
        ceiling.push(pgbench(settings, &db_meter, real, clients, users)?);
    }
    println!("ceiling without the key: ceiling.sql without its key blocks ...");
    let unkeyed = (Schema::Real, Script::Unkeyed);
    ceiling.push(pgbench(settings, &db_meter, unkeyed, 32, users)?);
    println!("ceiling on the minimal schema ...");
    minimal_schema(&b.pool).await?;
    for &clients in &LEVELS {
        let minimal = (Schema::Minimal, Script::Keyed);
        ceiling.push(pgbench(settings, &db_meter, minimal, clients, users)?);
    }
    Ok(ceiling)
}

/// Which schema the ceiling script runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Schema {
    /// Raptor's own tables (`public`): the trigger, constraints and indexes the service has.
    Real,
    /// `ceiling_min` (`ceiling_min_schema.sql`): only what the order path needs.
    Minimal,
}

/// Which writes the ceiling script makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) enum Script {
    /// `ceiling.sql`: a keyed order's (the claim, the order, its completion).
    Keyed,
    /// The same without the key's two writes (its blocks between `-- key {` and `-- key }`).
    Unkeyed,
}

impl Script {
    /// The script's text: `ceiling.sql`, without the key's blocks for [`Script::Unkeyed`].
    fn text(self) -> anyhow::Result<String> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/ceiling.sql");
        let text = std::fs::read_to_string(&path).context("read ceiling.sql")?;
        if self == Self::Keyed {
            return Ok(text);
        }
        let mut in_key = false;
        let kept: Vec<&str> = text
            .lines()
            .filter(|line| match line.trim() {
                "-- key {" => {
                    in_key = true;
                    false
                }
                "-- key }" => {
                    in_key = false;
                    false
                }
                _ => !in_key,
            })
            .collect();
        Ok(kept.join("\n") + "\n")
    }
}

/// Creates the minimal schema's tables, copying the quotes and accounts of the real one.
async fn minimal_schema(pool: &PgPool) -> anyhow::Result<()> {
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/ceiling_min_schema.sql"),
    )
    .context("read ceiling_min_schema.sql")?;
    let mut conn = pool.acquire().await?;
    sqlx::raw_sql(&script)
        .execute(&mut *conn)
        .await
        .context("create the minimal schema")?;
    // The connection's search_path was changed by the script: do not give it back.
    conn.detach();
    Ok(())
}

/// pgbench with a ceiling `script` on `schema`: its throughput, latency percentiles (from
/// `--log`, every transaction) and CPU per transaction.
pub(crate) fn pgbench(
    settings: &Settings,
    meter: &cpu::Meter,
    (schema, script): (Schema, Script),
    clients: usize,
    (umin, umax): (i32, i32),
) -> anyhow::Result<Ceiling> {
    let logs = std::env::temp_dir().join(format!("raptor-bench-pgbench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).context("pgbench log directory")?;
    // Written outside the log directory, whose every file is read as a transaction log.
    let file = std::env::temp_dir().join(format!(
        "raptor-bench-{:?}-{}.sql",
        script,
        std::process::id()
    ));
    std::fs::write(&file, script.text()?).context("write the ceiling script")?;
    let mut options = "-c synchronous_commit=off".to_owned();
    if schema == Schema::Minimal {
        options.push_str(" -c search_path=ceiling_min");
    }
    let children = meter.postgres_children();
    let before = meter.sample();
    let output = std::process::Command::new("pgbench")
        .env("PGOPTIONS", options)
        .args([
            "-n",
            // The extended protocol with prepared statements, as the service's sqlx connections
            // run every statement: in the simple protocol each statement would be parsed and
            // planned on every execution, a handicap the service does not carry.
            "-M",
            "prepared",
            "-f",
            &file.display().to_string(),
            "-c",
            &clients.to_string(),
            "-j",
            &clients.min(2).to_string(),
            "-T",
            &settings.secs.as_secs().to_string(),
            "--log",
            &format!("--log-prefix={}", logs.join("tx").display()),
            "-D",
            &format!("umin={umin}"),
            "-D",
            &format!("umax={umax}"),
            "-h",
            settings.options.get_host(),
            "-p",
            &settings.options.get_port().to_string(),
            "-U",
            settings.options.get_username(),
            &settings.database,
        ])
        .output()
        .context("could not run pgbench (Debian: postgresql-client)")?;
    // pgbench's backends end after it does: their CPU belongs to this run.
    meter.settle(children, Duration::from_secs(5));
    let after = meter.sample();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        bail!(
            "pgbench failed: {}{}",
            text,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let field = |prefix: &str| {
        text.lines()
            .find_map(|line| line.trim().strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<f64>().ok())
            .with_context(|| format!("pgbench printed no {prefix:?}: {text}"))
    };
    // Each log line: client, transaction number, latency in microseconds, script, epoch, us.
    let mut latencies = Vec::new();
    for entry in std::fs::read_dir(&logs).context("pgbench logs")? {
        let body = std::fs::read_to_string(entry?.path())?;
        latencies.extend(body.lines().filter_map(|line| {
            line.split_whitespace()
                .nth(2)
                .and_then(|us| us.parse::<f64>().ok())
                .map(|us| us / 1000.0)
        }));
    }
    let _ = std::fs::remove_dir_all(&logs);
    let _ = std::fs::remove_file(&file);
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        let rank = ((p * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len().max(1));
        latencies.get(rank - 1).copied().unwrap_or(0.0)
    };
    let transactions = field("number of transactions actually processed: ")? as usize;
    Ok(Ceiling {
        schema,
        script,
        clients,
        tps: field("tps = ")?,
        latency_ms: field("latency average = ")?,
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        transactions,
        cpu: before.per_request(&after, transactions),
    })
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Ceiling {
    pub(crate) schema: Schema,
    pub(crate) script: Script,
    pub(crate) clients: usize,
    pub(crate) tps: f64,
    pub(crate) latency_ms: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) transactions: usize,
    pub(crate) cpu: cpu::PerRequest,
}
