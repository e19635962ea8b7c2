//! The report: the machine and Postgres it ran on, every figure, the targets' checks; printed as
//! a table and written to `target/bench/results.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use sqlx::PgPool;

use crate::ceiling::{Ceiling, Schema, Script};
use crate::checks::Check;
use crate::http::rss_mib;
use crate::runner::Run;
use crate::scenarios::duplicates::Duplicates;
use crate::scenarios::ratios::{AbRound, Pair};
use crate::scenarios::soak::Soak;
use crate::scenarios::streams::{IdleRound, Streams, CLIENTS};
use crate::scenarios::sweeps::Fill;
use crate::{cpu, Settings};

pub(crate) async fn postgres_info(pool: &PgPool) -> anyhow::Result<PostgresInfo> {
    let show = |setting: &'static str| async move {
        sqlx::query_scalar::<_, String>(&format!("show {setting}"))
            .fetch_one(pool)
            .await
            .with_context(|| format!("show {setting}"))
    };
    Ok(PostgresInfo {
        version: show("server_version").await?,
        fsync: show("fsync").await?,
        synchronous_commit: show("synchronous_commit").await?,
        autovacuum: show("autovacuum").await?,
        shared_buffers: show("shared_buffers").await?,
        max_wal_size: show("max_wal_size").await?,
        // Superusers only; where it is readable, the flush is measured on the WAL's disk.
        data_directory: show("data_directory").await.ok(),
    })
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct PostgresInfo {
    pub(crate) version: String,
    pub(crate) fsync: String,
    pub(crate) synchronous_commit: String,
    /// A server without autovacuum keeps every dead row version: the soak's tables only grow.
    pub(crate) autovacuum: String,
    pub(crate) shared_buffers: String,
    pub(crate) max_wal_size: String,
    pub(crate) data_directory: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Machine {
    cpus: usize,
    postgres: PostgresInfo,
}

#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) date: String,
    pub(crate) machine: Machine,
    pub(crate) seconds_per_run: u64,
    pub(crate) runs: Vec<Run>,
    pub(crate) duplicates: Vec<Duplicates>,
    pub(crate) fills: Vec<Fill>,
    pub(crate) ceiling: Vec<Ceiling>,
    /// The service beside its ceiling, round by round.
    pub(crate) pairs: Vec<Pair>,
    /// `RAPTOR_BENCH_ONLY=ratios`: server A, server B and the ceiling, round by round.
    pub(crate) ab: Option<Vec<AbRound>>,
    /// The disk's flush latency, measured in the run.
    pub(crate) flush: cpu::Flush,
    /// The machine's speed at the run's start and end.
    pub(crate) speed: cpu::Speed,
    pub(crate) soak: Option<Soak>,
    /// Scenario 10, the trade-updates stream.
    pub(crate) streams: Option<Streams>,
    /// Round trips per request, counted by the proxy (scenarios 1 and 2, one client).
    pub(crate) round_trips: BTreeMap<&'static str, f64>,
    pub(crate) server_peak_rss_mib: f64,
    pub(crate) server_rss_mib: f64,
    pub(crate) checks: Vec<Check>,
}

impl Report {
    /// A report of no scenario yet: the machine, the flush and the server's memory now.
    pub(crate) fn at_end(
        postgres: PostgresInfo,
        flush: cpu::Flush,
        speed: cpu::Speed,
        settings: &Settings,
        pid: u32,
    ) -> anyhow::Result<Self> {
        let rss = rss_mib(pid)?;
        Ok(Self {
            date: chrono::Utc::now().to_rfc3339(),
            machine: Machine {
                cpus: std::thread::available_parallelism().map_or(0, usize::from),
                postgres,
            },
            seconds_per_run: settings.secs.as_secs(),
            runs: Vec::new(),
            duplicates: Vec::new(),
            fills: Vec::new(),
            ceiling: Vec::new(),
            pairs: Vec::new(),
            ab: None,
            flush,
            speed,
            soak: None,
            streams: None,
            round_trips: BTreeMap::new(),
            server_peak_rss_mib: rss.0,
            server_rss_mib: rss.1,
            checks: Vec::new(),
        })
    }

    pub(crate) fn print(&self) {
        let m = &self.machine;
        println!(
            "\nraptor-bench {}: {} CPUs, Postgres {} (fsync {}, synchronous_commit {}, autovacuum {}, \
             shared_buffers {}, max_wal_size {}), {} s per run\n",
            self.date,
            m.cpus,
            m.postgres.version,
            m.postgres.fsync,
            m.postgres.synchronous_commit,
            m.postgres.autovacuum,
            m.postgres.shared_buffers,
            m.postgres.max_wal_size,
            self.seconds_per_run
        );
        println!(
            "{:<32} {:>7} {:>8} {:>9} {:>8} {:>8} {:>9} {:>8} {:>7}",
            "scenario", "clients", "n", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "errors"
        );
        // (The ceiling rows' n is pgbench's transactions, their latencies from its --log.)
        let row = |r: &Run| {
            println!(
                "{:<32} {:>7} {:>8} {:>9.1} {:>8.2} {:>8.2} {:>9.2} {:>8.2} {:>7}",
                r.name,
                if r.clients == 0 {
                    "open".to_owned()
                } else {
                    r.clients.to_string()
                },
                r.requests,
                r.rps,
                r.p50_ms,
                r.p99_ms,
                r.p999_ms,
                r.max_ms,
                r.errors()
            );
        };
        for r in &self.runs {
            row(r);
        }
        for d in &self.duplicates {
            row(&d.run);
        }
        for c in &self.ceiling {
            let name = match (c.schema, c.script) {
                (Schema::Real, Script::Keyed) => "ceiling (pgbench, prepared)",
                (Schema::Real, Script::Unkeyed) => "ceiling without the key",
                (Schema::Minimal, _) => "ceiling, minimal schema",
            };
            println!(
                "{:<32} {:>7} {:>8} {:>9.1} {:>8.2} {:>8.2}",
                name, c.clients, c.transactions, c.tps, c.p50_ms, c.p99_ms
            );
        }
        println!(
            "\nflush (8 KiB + fdatasync, {}): p50 {:.2} ms, p99 {:.2} ms",
            self.flush.dir, self.flush.p50_ms, self.flush.p99_ms
        );
        println!("machine speed: {}", self.speed);
        println!(
            "\nCPU ms per request: {:<30} {:>8} {:>8} {:>8} {:>9} {:>6}",
            "run", "machine", "postgres", "server", "generator", "proxy"
        );
        let cpu_row = |name: String, c: &cpu::PerRequest| {
            println!(
                "                    {:<30} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>6.3}",
                name, c.machine_ms, c.postgres_ms, c.server_ms, c.generator_ms, c.proxy_ms
            );
        };
        for r in self
            .runs
            .iter()
            .filter(|r| r.name.starts_with(['1', '2', '3']))
        {
            if let Some(c) = &r.cpu {
                cpu_row(format!("{} @{}", r.name, r.clients), c);
            }
        }
        for c in &self.ceiling {
            cpu_row(
                format!("ceiling {:?} {:?} @{}", c.schema, c.script, c.clients),
                &c.cpu,
            );
        }
        println!(
            "\nshared buffers per request: {:<34} {:>8} {:>8}",
            "run", "hit", "read"
        );
        for r in &self.runs {
            if let Some(b) = &r.buffers {
                println!(
                    "                            {:<34} {:>8.1} {:>8.2}",
                    format!("{} @{}", r.name, r.clients),
                    b.hit_per_request,
                    b.read_per_request
                );
            }
        }
        if let Some(soak) = &self.soak {
            println!(
                "\nsoak: {} clients, {} s, windows of {} s: {} orders/s; last/best {:.2}; Postgres' CPU per order over the server's, last/first window {:.2}; {} errors {:?}",
                soak.clients,
                soak.seconds,
                soak.window_seconds,
                soak.orders_per_second
                    .iter()
                    .map(|n| format!("{n:.0}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                soak.last_vs_best,
                soak.postgres_share_last_vs_first,
                soak.errors,
                soak.error_kinds
            );
            println!(
                "  window  steal %  CPU ms/order: Postgres  server  Postgres/server  WAL KiB/order  FPI/order  blocks read/order  hit ratio  checkpoints  backend writes/order  xmin age  hot KiB  autovacuum"
            );
            for (i, w) in soak.postgres.iter().enumerate() {
                println!(
                    "  {:>6}  {:>7.1}  {:>22.3}  {:>6.3}  {:>15.2}  {:>13.2}  {:>9.2}  {:>17.2}  {:>9.4}  {:>11}  {:>20.3}  {:>8}  {:>7}  {}",
                    i + 1,
                    w.steal_percent,
                    w.postgres_cpu_ms,
                    w.server_cpu_ms,
                    w.postgres_vs_server(),
                    w.wal_kib_per_order,
                    w.full_page_images_per_order,
                    w.blocks_read_per_order,
                    w.buffer_hit_ratio,
                    w.checkpoints,
                    w.buffers_written_by_backends_per_order,
                    w.oldest_xmin_age,
                    w.accounts_positions_quotes_kib,
                    w.autovacuum.join(" ")
                );
            }
            for (when, p) in [("start", &soak.start), ("end", &soak.end)] {
                println!(
                    "  {when}: RSS {:.1} MiB, {} files, {} connections, tables (MiB) {:?}",
                    p.rss_mib, p.files, p.connections, p.table_mib
                );
            }
        }
        for f in &self.fills {
            println!(
                "\n(8) quote sweep: {} resting orders on {} accounts, {} filled ({} by the request) in {:.0} ms: {:.0} orders/s",
                f.resting, f.accounts, f.filled, f.filled_by_request, f.ms, f.orders_per_second
            );
            for r in [&f.keyed_before, &f.keyed_during].into_iter().flatten() {
                row(r);
            }
        }
        if let Some(streams) = &self.streams {
            let (d, i, f) = (&streams.delay, &streams.idle, &streams.open_files);
            println!(
                "\n(10) trade-updates stream, on a server of its own (open files: bench {}, server {}; RAPTOR_MAX_CONNECTIONS {})",
                f.bench.0, f.server.0, f.server_max_connections
            );
            row(&d.orders);
            println!(
                "  {} streams; event after the 201 (the delay's lower bound): p50 {:.2}, p99 {:.2}, max {:.2} ms; after the request (its upper bound): p50 {:.2}, p99 {:.2}, max {:.2} ms",
                d.streams,
                d.after_response.p50_ms,
                d.after_response.p99_ms,
                d.after_response.max_ms,
                d.after_send.p50_ms,
                d.after_send.p99_ms,
                d.after_send.max_ms
            );
            println!(
                "  {} of {} orders' events matched ({} before their 201); missed {}, duplicates {}, ids not increasing {}, streams ended {}",
                d.matched,
                d.matched + d.missed,
                d.before_response,
                d.missed,
                d.duplicates,
                d.not_increasing,
                d.ended
            );
            println!(
                "  {} idle streams: {} open in {:.0} ms, refused {:?}; opened again in the rounds: {:?}",
                i.wanted, i.opened, i.open_ms, i.refused, i.reopened
            );
            println!(
                "  server RSS {:.1} MiB before, {:.1} open, {:.1} after {:.0} s idle: {:.1} KiB per stream, {:.0} KiB grown while idle",
                i.rss_before_mib,
                i.rss_open_mib,
                i.rss_end_mib,
                i.window_s,
                i.rss_per_stream_kib,
                i.rss_window_growth_kib
            );
            println!(
                "  server RSS every 2 s of the window (MiB): {}",
                i.rss_window_mib
                    .iter()
                    .map(|m| format!("{m:.1}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            println!(
                "  CPU while idle: server {:.2} ms/s ({:.2} without streams), Postgres {:.2} ms/s, machine {:.2} ms/s",
                i.server_cpu_ms_per_s,
                i.server_cpu_quiet_ms_per_s,
                i.postgres_cpu_ms_per_s,
                i.machine_cpu_ms_per_s
            );
            println!(
                "  {} streams got a heartbeat in the window; ended {} in it, {} before they were closed; {} events",
                i.heartbeat_streams, i.ended_in_window, i.ended_by_end, i.events
            );
            println!(
                "  the server's Postgres connections: {} before {:?}; at most {} while idle {:?}; {} listener(s); {} HTTP connections, {} descriptors",
                i.postgres_before_total,
                i.postgres_before,
                i.postgres_idle_max,
                i.postgres_idle,
                i.listeners,
                i.http_connections,
                i.server_files
            );
            let released =
                |s: &Option<f64>| s.map_or("more than 40 s".to_owned(), |s| format!("{s:.2} s"));
            println!(
                "  streams closed by the client, let go by the server after: the first part's {}, the idle ones {}; RSS then {:.1} MiB, with 1,000 open again {} MiB",
                released(&i.first_part_released_s),
                i.released_s
                    .iter()
                    .map(released)
                    .collect::<Vec<_>>()
                    .join(", "),
                i.rss_closed_mib,
                i.rss_reopened_mib
                    .iter()
                    .map(|m| format!("{m:.1}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            for (n, round) in i.rounds.iter().enumerate() {
                println!(
                    "  round {n}: with / without p50 {:.2} x, throughput {:.2} x",
                    round.p50_ratio(),
                    round.rps_ratio()
                );
                row(&round.with);
                row(&round.without);
            }
            println!(
                "  keyed @{CLIENTS} with the idle streams / without, median of {} rounds: p50 {:.2} x, throughput {:.2} x",
                i.rounds.len(),
                i.p50_ratio(),
                i.rps_ratio()
            );
            // The first part's orders against the runs without streams of the rounds: what 32
            // streams reading every order's events cost the orders (not side by side: read it
            // against the rounds' spread).
            let server_ms = |r: &Run| r.cpu.map_or(0.0, |c| c.server_ms);
            let mean = |f: &dyn Fn(&IdleRound) -> f64| {
                i.rounds.iter().map(f).sum::<f64>() / i.rounds.len().max(1) as f64
            };
            println!(
                "  server CPU per order: {:.3} ms with 32 streams reading, {:.3} without streams, {:.3} with 1,000 idle (means of the rounds); throughput with 32 reading / without {:.2} x",
                server_ms(&d.orders),
                mean(&|r| server_ms(&r.without)),
                mean(&|r| server_ms(&r.with)),
                d.orders.rps / mean(&|r| r.without.rps).max(1e-9)
            );
        }
        println!("round trips per request: {:?}", self.round_trips);
        println!(
            "server RSS: peak {:.1} MiB, now {:.1} MiB",
            self.server_peak_rss_mib, self.server_rss_mib
        );
        println!("\ntargets:");
        for c in &self.checks {
            println!(
                "  {}  {:<40} target {:<22} measured {}",
                if c.pass { "PASS" } else { "FAIL" },
                c.name,
                c.target,
                c.measured
            );
        }
        if self
            .checks
            .iter()
            .any(|c| !c.pass && c.name.starts_with("instrument:"))
        {
            println!(
                "\nthe ceiling is wrong: the service measured above the SQL it runs, so no ratio \
                 to the ceiling above means anything; fix tests/bench/ceiling.sql or the way \
                 pgbench runs it first"
            );
        }
    }

    /// Writes the report as JSON to `$CARGO_TARGET_DIR/bench/results.json`.
    pub(crate) fn write(&self) -> anyhow::Result<PathBuf> {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the tests package has no parent directory")?;
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| workspace.join("target"), PathBuf::from);
        let dir = target.join("bench");
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let path = dir.join("results.json");
        let json = serde_json::to_string_pretty(self).context("serialise the report")?;
        std::fs::write(&path, json + "\n").with_context(|| format!("write {}", path.display()))?;
        Ok(path)
    }
}
