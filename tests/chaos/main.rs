//! `raptor-chaos` (`make chaos`): fault injection against real processes.
//!
//! It starts its own Postgres cluster (`initdb` into `target/chaos/pg`, a free port, as the
//! `postgres` user when run as root), applies the migrations with `raptor migrate`, and spawns
//! three `raptor serve` replicas (the release binary) on free ports, all on 127.0.0.1. Then it
//! runs the scenarios (docs/SCALING.md, "What the chaos suite measured"):
//!
//! 1. kill -9 mid-transaction (the driver holds the account row lock), retry after the stale
//!    threshold on a restarted replica: no rows from the killed attempt, one execution; then
//!    (1b) a replica still on longer timeouts (a rolling deploy) whose attempt is taken over
//!    while it waits on a lock: when it resumes it must be fenced off, one execution;
//! 2. `pg_ctl stop -m fast` and `-m immediate` (then start) under keyed load from 32 clients
//!    across 3 replicas: every 201 is a committed, audited order; no key twice; only 201, 503
//!    or 409 in flight; every replica ready and taking orders within 5 s, without a restart;
//! 3. 1,000 keys x 8 concurrent copies across the replicas: 1,000 executions; every copy the
//!    replay or 409;
//! 4. pool exhaustion (pool of 4, 40 clients, the quote row held): 503 with Retry-After, every
//!    answer within the request timeout, orders succeed once the load drops;
//! 5. scenarios 2 and 3 through PgBouncer (transaction pooling), with role settings and the
//!    statement cache off; the server log shows what session state reached Postgres;
//! 6. a slow database (pg_sleep in a trigger): no request past the request timeout, no key taken
//!    over while its first attempt runs, the configuration refuses stale < request timeout;
//! 7. the kill switch flipped off and on under load: every replica sees it within 1 s, orders
//!    per account equal the 201s.
//!
//! `--quick` shortens every scenario and skips 5 (what `.ci/run` runs); `--only 1,3` picks
//! scenarios. Exit status: 0 all held, 1 a violation, 2 the run itself failed. Every process it
//! started is killed on exit, also on error or Ctrl-C.

mod env;
mod scenarios;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use sqlx::Connection;

use crate::env::{Bouncer, Cluster, Http, Replica};
use crate::scenarios::{Outcome, World};

#[derive(Debug, Parser)]
#[command(
    name = "raptor-chaos",
    about = "Fault injection against raptor replicas and Postgres"
)]
struct Args {
    /// The CI subset: shorter scenarios, no PgBouncer (unless picked with --only).
    #[arg(long)]
    quick: bool,
    /// Scenarios to run (comma-separated numbers 1-7); all by default.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u8).range(1..=7))]
    only: Vec<u8>,
}

const RUN_TIMEOUT: Duration = Duration::from_secs(14 * 60);

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(RUN_TIMEOUT, run(&args)) => {
            outcome.unwrap_or_else(|_| Err(anyhow::anyhow!("the run exceeded {RUN_TIMEOUT:?}")))
        }
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("raptor-chaos: at least one invariant was violated");
            ExitCode::from(1)
        }
        Err(err) => {
            eprintln!("raptor-chaos: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: &Args) -> anyhow::Result<bool> {
    let started = Instant::now();
    let wanted = |n: u8| {
        if args.only.is_empty() {
            !(args.quick && n == 5)
        } else {
            args.only.contains(&n)
        }
    };
    let dir = raptor_integration_tests::target_dir()?.join("chaos");
    std::fs::create_dir_all(&dir)?;
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "log") {
            std::fs::remove_file(path)?;
        }
    }
    println!("raptor-chaos: cluster in {}", dir.join("pg").display());
    let cluster = Cluster::start(&dir)?;
    {
        let mut admin =
            sqlx::PgConnection::connect_with(&cluster.options("postgres", "postgres")).await?;
        sqlx::query(&format!("create database {}", env::DATABASE))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
    }
    let base_env = env::base_env(&cluster.url("postgres"), &[]);
    env::raptor_cli(&base_env, &["migrate"]).await?;
    env::raptor_cli(
        &base_env,
        &[
            "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
        ],
    )
    .await?;
    let operator = env::users(&base_env, "operator", 1, "operator")
        .await?
        .remove(0);
    let db = cluster.pool(8).await?;
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(Replica::spawn(&dir, &format!("replica-{i}"), base_env.clone()).await?);
    }
    println!(
        "raptor-chaos: Postgres on 127.0.0.1:{}, replicas on {:?} (set-up {:.1} s)",
        cluster.port,
        replicas.iter().map(|r| r.port).collect::<Vec<_>>(),
        started.elapsed().as_secs_f64()
    );
    let mut world = World {
        dir: dir.clone(),
        cluster,
        db,
        http: Http::new()?,
        replicas,
        operator,
        quick: args.quick,
    };
    let quick = world.quick;
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut figures = Vec::new();

    macro_rules! scenario {
        ($n:expr, $title:expr, $body:expr) => {
            if wanted($n) {
                println!("\n== {} ==", $title);
                let t = Instant::now();
                let mut outcome = match $body {
                    Ok(outcome) => outcome,
                    Err(err) => {
                        let mut o = Outcome::new($title);
                        o.check(false, format!("the scenario could not run: {err:#}"));
                        o
                    }
                };
                outcome.secs = t.elapsed().as_secs_f64();
                outcomes.push(outcome);
            }
        };
    }

    scenario!(
        1,
        "1 kill -9 mid-transaction",
        scenarios::kill9(&mut world).await
    );
    scenario!(
        1,
        "1b late attempt fenced off",
        scenarios::late_attempt(&world).await
    );
    let bases = world.bases();
    let load = if quick { 15 } else { 30 };
    scenario!(
        2,
        "2 Postgres restart under load",
        scenarios::pg_restart(&world, "2 Postgres restart under load", &bases, load).await
    );
    let keys = if quick { 300 } else { 1000 };
    scenario!(
        3,
        "3 duplicates across replicas",
        scenarios::duplicates(&world, "3 duplicates across replicas", &bases, keys).await
    );
    scenario!(
        4,
        "4 pool exhaustion",
        scenarios::pool_exhaustion(&world, if quick { 5 } else { 8 })
            .await
            .map(|(o, f)| {
                figures.push(f);
                o
            })
    );
    if wanted(5) {
        for outcome in bouncer(&world, quick).await {
            outcomes.push(outcome);
        }
    }
    scenario!(6, "6 slow database", scenarios::slow_database(&world).await);
    scenario!(
        7,
        "7 kill switch under load",
        scenarios::kill_switch(&world, if quick { 6 } else { 9 }).await
    );

    for replica in &mut world.replicas {
        replica.kill9().await?;
    }
    world.db.close().await;
    print_summary(&outcomes, &figures, started.elapsed());
    write_summary(&dir, &outcomes, &figures, started.elapsed())?;
    Ok(outcomes.iter().all(|o| o.violations.is_empty()))
}

/// Scenario 5: PgBouncer. Transaction pooling first (role settings reach every server
/// session; the replicas' sqlx statements do not survive it, and must refuse loudly), then
/// scenarios 2 and 3 through PgBouncer in session pooling with the same role settings.
async fn bouncer(world: &World, quick: bool) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let t = Instant::now();
    println!("\n== 5 PgBouncer, transaction pooling ==");
    let mut txn = Outcome::new("5 PgBouncer transaction pooling");
    if let Err(err) = bouncer_transaction(world, &mut txn).await {
        txn.check(false, format!("could not run: {err:#}"));
    }
    txn.secs = t.elapsed().as_secs_f64();
    outcomes.push(txn);

    println!("\n== 5 PgBouncer, session pooling: scenarios 2 and 3 through it ==");
    let t = Instant::now();
    let mut setup = Outcome::new("5 PgBouncer session pooling set-up");
    let from = scenarios::log_len(world);
    let started = async {
        let bouncer = Bouncer::start(&world.dir, &world.cluster, "session", false).await?;
        setup.fact(format!(
            "pgbouncer on 127.0.0.1:{} ({}): pool_mode=session, default_pool_size=80",
            bouncer.port,
            bouncer.ini.display()
        ));
        let replicas = scenarios::bouncer_replicas(world, &bouncer, "100").await?;
        setup.check(
            true,
            "3 replicas with RAPTOR_DB_SESSION_SETTINGS=role (no startup options), \
             IDEMPOTENCY_STORE_DATABASE_URL as role raptor_idem: the start-up check of the roles' settings passed",
        );
        Ok::<_, anyhow::Error>((bouncer, replicas))
    }
    .await;
    let (bouncer, mut replicas) = match started {
        Ok(pair) => pair,
        Err(err) => {
            setup.check(false, format!("set-up failed: {err:#}"));
            setup.secs = t.elapsed().as_secs_f64();
            outcomes.push(setup);
            return outcomes;
        }
    };
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let t2 = Instant::now();
    let name = "5a restart via PgBouncer (session)";
    let mut o2 = scenarios::pg_restart(world, name, &bases, if quick { 15 } else { 24 })
        .await
        .unwrap_or_else(|err| {
            let mut o = Outcome::new(name);
            o.check(false, format!("could not run: {err:#}"));
            o
        });
    o2.secs = t2.elapsed().as_secs_f64();
    let t3 = Instant::now();
    let name = "5b duplicates via PgBouncer (session)";
    let mut o3 = scenarios::duplicates(world, name, &bases, if quick { 300 } else { 1000 })
        .await
        .unwrap_or_else(|err| {
            let mut o = Outcome::new(name);
            o.check(false, format!("could not run: {err:#}"));
            o
        });
    o3.secs = t3.elapsed().as_secs_f64();
    session_state(world, from, &mut setup).await;
    for replica in &mut replicas {
        let _ = replica.kill9().await;
    }
    bouncer.stop().await;
    for sql in [
        "alter role raptor reset log_statement",
        "alter role raptor_idem reset log_statement",
    ] {
        if let Err(err) = sqlx::query(sql).execute(&world.db).await {
            setup.check(false, format!("{sql}: {err}"));
        }
    }
    setup.secs = t.elapsed().as_secs_f64() - o2.secs - o3.secs;
    outcomes.push(setup);
    outcomes.push(o2);
    outcomes.push(o3);
    outcomes
}

/// What reached Postgres from the replicas' roles since `from` (log_statement = all).
async fn session_state(world: &World, from: u64, out: &mut Outcome) {
    match scenarios::session_state_in_log(world, from).await {
        Ok((unnamed, named, session)) => {
            out.fact(format!(
                "server log of roles raptor/raptor_idem: {named} executions of named (sqlx_s_*) \
                 statements, {unnamed} of unnamed ones"
            ));
            out.check(
                session.is_empty(),
                format!(
                    "no session state sent (SET, PREPARE, LISTEN, session advisory locks, temp \
                     tables): {} found {:?}",
                    session.len(),
                    session.iter().take(3).collect::<Vec<_>>()
                ),
            );
        }
        Err(err) => out.check(false, format!("could not read the server log: {err:#}")),
    }
}

async fn bouncer_transaction(world: &World, out: &mut Outcome) -> anyhow::Result<()> {
    scenarios::prepare_roles(world).await?;
    for sql in [
        "alter role raptor set log_statement = 'all'",
        "alter role raptor_idem set log_statement = 'all'",
    ] {
        sqlx::query(sql).execute(&world.db).await?;
    }
    let from = scenarios::log_len(world);
    let bouncer = Bouncer::start(&world.dir, &world.cluster, "transaction", true).await?;
    out.fact(format!(
        "pgbouncer {} on 127.0.0.1:{} ({}): pool_mode=transaction, default_pool_size=20, \
         ignore_startup_parameters=extra_float_digits, server_reset_query=DEALLOCATE ALL, \
         server_reset_query_always=1",
        scenarios::pgbouncer_version(),
        bouncer.port,
        bouncer.ini.display()
    ));
    // The settings come from the roles on every server session PgBouncer hands out.
    let seen = scenarios::role_settings_via(&bouncer, 30).await?;
    out.check(
        seen.iter().all(|(_, ok)| *ok),
        format!(
            "30 transactions per role through PgBouncer all saw the role's settings: {:?}",
            seen.iter()
                .map(|(s, _)| s.as_str())
                .collect::<std::collections::BTreeSet<_>>()
        ),
    );
    // sqlx 0.8.6 sends Parse/Describe/Sync, then Bind/Execute/Sync: outside a transaction
    // block PgBouncer may hand the Bind to another server session (or reset this one in
    // between), and even with the statement cache off the statement is a named one.
    let refused = scenarios::bouncer_replicas(world, &bouncer, "0").await;
    let log = std::fs::read_to_string(world.dir.join("replica-bouncer-0.log")).unwrap_or_default();
    let reason = log
        .lines()
        .rev()
        .find(|l| l.contains("prepared statement"))
        .unwrap_or("")
        .chars()
        .take(200)
        .collect::<String>();
    match refused {
        Ok(mut replicas) => {
            for r in &mut replicas {
                let _ = r.kill9().await;
            }
            out.check(
                false,
                "expected the replicas to refuse to start through transaction pooling (sqlx 0.8.6), but they started: \
                 run scenarios 2 and 3 through it and update docs/SCALING.md",
            );
        }
        Err(_) => {
            out.check(
                reason.contains("prepared statement"),
                format!(
                    "replicas (RAPTOR_DB_SESSION_SETTINGS=role, RAPTOR_DB_STATEMENT_CACHE=0) refuse to start \
                     rather than run: {reason}"
                ),
            );
            out.fact(
                "UNSUPPORTED: sqlx 0.8.6 cannot run through PgBouncer 1.18 transaction pooling \
                 (named statements even with the cache off; Parse and Bind in separate Syncs); \
                 scenarios 2 and 3 run through session pooling below",
            );
        }
    }
    session_state(world, from, out).await;
    bouncer.stop().await;
    Ok(())
}

fn table(outcomes: &[Outcome], total: Duration) -> String {
    let mut text = String::new();
    text.push_str("| scenario | result | seconds | violations |\n|---|---|---|---|\n");
    for o in outcomes {
        text.push_str(&format!(
            "| {} | {} | {:.1} | {} |\n",
            o.name,
            if o.violations.is_empty() {
                "PASS"
            } else {
                "FAIL"
            },
            o.secs,
            if o.violations.is_empty() {
                "-".to_owned()
            } else {
                o.violations.join("; ")
            }
        ));
    }
    text.push_str(&format!("\ntotal {:.1} s\n", total.as_secs_f64()));
    text
}

fn print_summary(outcomes: &[Outcome], figures: &[String], total: Duration) {
    println!("\n== summary ==\n{}", table(outcomes, total));
    for f in figures {
        println!("scenario 4 figures: {f}");
    }
}

fn write_summary(
    dir: &std::path::Path,
    outcomes: &[Outcome],
    figures: &[String],
    total: Duration,
) -> anyhow::Result<()> {
    let mut text = table(outcomes, total);
    for o in outcomes {
        text.push_str(&format!("\n### {}\n", o.name));
        for f in &o.facts {
            text.push_str(&format!("- {f}\n"));
        }
        for v in &o.violations {
            text.push_str(&format!("- VIOLATION: {v}\n"));
        }
    }
    for f in figures {
        text.push_str(&format!("\nscenario 4 figures: {f}\n"));
    }
    let path = dir.join("summary.md");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    println!("written to {}", path.display());
    Ok(())
}
