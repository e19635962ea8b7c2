//! The soak: fresh keys at 16 clients for `RAPTOR_BENCH_SOAK_SECS`, window by window, with what
//! Postgres and the server did in each and the server's memory and the tables' sizes at the
//! start and the end.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use raptor_integration_tests::new_key;
use serde::Serialize;

use crate::http::{error_kind, rss_mib};
use crate::{cpu, Bench, SOAK_CLIENTS};

impl Bench {
    /// The soak: fresh keys at [`SOAK_CLIENTS`] clients for `secs`, counted in windows of 30 s
    /// (or a fifth of the soak when shorter), with the server's memory, connections and files
    /// and the tables' sizes at the start and the end.
    pub(crate) async fn soak(&self, secs: Duration, pid: u32) -> anyhow::Result<Soak> {
        let window = Duration::from_secs(30)
            .min(secs / 5)
            .max(Duration::from_secs(1));
        let windows = usize::try_from(secs.as_secs().div_ceil(window.as_secs().max(1)))?;
        let done: Vec<std::sync::atomic::AtomicU64> = (0..windows)
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect();
        let errors = std::sync::atomic::AtomicU64::new(0);
        let error_kinds = std::sync::Mutex::new(BTreeMap::<String, u64>::new());
        let start = self.probe(pid).await?;
        let started = Instant::now();
        let deadline = started + secs;
        let tasks = (0..SOAK_CLIENTS).map(|client| {
            let (done, errors, error_kinds) = (&done, &errors, &error_kinds);
            async move {
                while Instant::now() < deadline {
                    let answer = self.http.send(self.order(client, Some(new_key()))).await;
                    let ok = answer.as_ref().is_ok_and(|a| a.status == 201);
                    if !ok {
                        errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let kind = error_kind(&answer);
                        *error_kinds
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .entry(kind)
                            .or_default() += 1;
                    }
                    let at = started.elapsed().as_secs_f64() / window.as_secs_f64();
                    if let Some(slot) = done.get(at as usize) {
                        slot.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        });
        // What Postgres did in each window: read at each window's edge, and which tables an
        // autovacuum worker was on, looked at once a second.
        let sampler = async {
            let edge = || async {
                anyhow::Ok((
                    self.pg_counters().await?,
                    self.meter.sample(),
                    cpu::machine_steal(),
                ))
            };
            let mut edges = vec![edge().await?];
            let mut vacuumed: Vec<std::collections::BTreeSet<String>> =
                vec![Default::default(); windows];
            let mut tick = 1u32;
            while Instant::now() < deadline {
                tokio::time::sleep_until((started + Duration::from_secs(tick.into())).into()).await;
                tick += 1;
                let at = (started.elapsed().as_secs_f64() / window.as_secs_f64()) as usize;
                let tables: Vec<String> = sqlx::query_scalar(
                    "select p.relid::regclass::text from pg_stat_progress_vacuum p
                      join pg_database d on d.oid = p.datid where d.datname = current_database()",
                )
                .fetch_all(&self.pool)
                .await
                .context("autovacuum progress")?;
                if let Some(set) = vacuumed.get_mut(at.min(windows - 1)) {
                    set.extend(tables);
                }

                if started.elapsed() >= window.mul_f64(edges.len() as f64) {
                    edges.push(edge().await?);
                }
            }
            if edges.len() <= windows {
                edges.push(edge().await?);
            }
            anyhow::Ok((edges, vacuumed))
        };
        let ((), sampled) = tokio::join!(
            async {
                futures_util::future::join_all(tasks).await;
            },
            sampler
        );
        let (edges, vacuumed) = sampled?;
        let cpus = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        let postgres: Vec<SoakWindow> = edges
            .windows(2)
            .zip(vacuumed)
            .zip(&done)
            .map(|((pair, vacuumed), orders)| {
                let count = orders.load(std::sync::atomic::Ordering::Relaxed);
                let orders = count.max(1) as f64;
                let ((a, cpu_a, steal_a), (b, cpu_b, steal_b)) = (&pair[0], &pair[1]);
                let cpu = cpu_a.per_request(cpu_b, usize::try_from(count).unwrap_or(usize::MAX));
                let blocks = (b.blks_hit + b.blks_read - a.blks_hit - a.blks_read).max(1) as f64;
                SoakWindow {
                    steal_percent: (steal_b - steal_a) / (window.as_secs_f64() * cpus) * 100.0,
                    postgres_cpu_ms: cpu.postgres_ms,
                    server_cpu_ms: cpu.server_ms,
                    wal_kib_per_order: (b.wal_bytes - a.wal_bytes) as f64 / 1024.0 / orders,
                    full_page_images_per_order: (b.wal_fpi - a.wal_fpi) as f64 / orders,
                    blocks_read_per_order: (b.blks_read - a.blks_read) as f64 / orders,
                    buffer_hit_ratio: (b.blks_hit - a.blks_hit) as f64 / blocks,
                    checkpoints: b.checkpoints - a.checkpoints,
                    oldest_xmin_age: b.oldest_xmin_age,
                    accounts_positions_quotes_kib: b.hot_kib,
                    buffers_written_by_backends_per_order: (b.buffers_backend - a.buffers_backend)
                        as f64
                        / orders,
                    autovacuum: vacuumed.into_iter().collect(),
                }
            })
            .collect();
        let end = self.probe(pid).await?;
        let per_second: Vec<f64> = done
            .iter()
            .map(|n| n.load(std::sync::atomic::Ordering::Relaxed) as f64 / window.as_secs_f64())
            .collect();
        // The last window may be cut short by the deadline: judge the last full one.
        let full = if secs.as_secs().is_multiple_of(window.as_secs().max(1)) {
            per_second.len()
        } else {
            per_second.len() - 1
        };
        let best = per_second[..full].iter().copied().fold(0.0, f64::max);
        let last = per_second[..full].last().copied().unwrap_or(0.0);
        // Postgres' CPU per order over the server's, last full window over the first: a table
        // or index that grows into the order's cost raises Postgres' share (the server's work
        // per order does not depend on the tables' size), while a host that slows down for a
        // while slows both (measured: their ratio held within 3.26-3.42 through dips of 17 %).
        let last_full = full.checked_sub(1).and_then(|i| postgres.get(i));
        let postgres_share_last_vs_first = match (postgres.first(), last_full) {
            (Some(first), Some(last)) => last.postgres_vs_server() / first.postgres_vs_server(),
            _ => 0.0,
        };
        Ok(Soak {
            clients: SOAK_CLIENTS,
            seconds: secs.as_secs(),
            window_seconds: window.as_secs(),
            orders_per_second: per_second,
            errors: errors.load(std::sync::atomic::Ordering::Relaxed),
            error_kinds: error_kinds
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            last_vs_best: if best > 0.0 { last / best } else { 0.0 },
            postgres_share_last_vs_first,
            postgres,
            start,
            end,
        })
    }

    /// Postgres' cumulative counters the soak reads at each window's edge.
    pub(crate) async fn pg_counters(&self) -> anyhow::Result<PgCounters> {
        sqlx::query_as(
            "select w.wal_bytes::bigint as wal_bytes, w.wal_fpi,
                    b.checkpoints_timed + b.checkpoints_req as checkpoints, b.buffers_backend,
                    d.blks_read, d.blks_hit,
                    (select coalesce(max(age(backend_xmin)), 0) from pg_stat_activity)
                        as oldest_xmin_age,
                    (pg_relation_size('paper_accounts') + pg_relation_size('paper_positions')
                     + pg_relation_size('quotes')) / 1024 as hot_kib
               from pg_stat_wal w, pg_stat_bgwriter b, pg_stat_database d
              where d.datname = current_database()",
        )
        .fetch_one(&self.pool)
        .await
        .context("Postgres' counters")
    }

    /// The server's resident memory, open files and database connections, and the sizes of the
    /// tables an order writes.
    async fn probe(&self, pid: u32) -> anyhow::Result<Probe> {
        let files = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
        let connections: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity
              where datname = current_database() and pid <> pg_backend_pid()",
        )
        .fetch_one(&self.pool)
        .await
        .context("connections")?;
        let mut tables = BTreeMap::new();
        for table in [
            "paper_orders",
            "paper_order_legs",
            "paper_fills",
            "paper_positions",
            "idempotency_keys",
            "audit_log",
        ] {
            let bytes: i64 = sqlx::query_scalar("select pg_total_relation_size($1::regclass)")
                .bind(table)
                .fetch_one(&self.pool)
                .await
                .with_context(|| format!("size of {table}"))?;
            tables.insert(table, bytes as f64 / (1024.0 * 1024.0));
        }
        Ok(Probe {
            rss_mib: rss_mib(pid)?.1,
            files,
            connections,
            table_mib: tables,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Soak {
    pub(crate) clients: usize,
    pub(crate) seconds: u64,
    pub(crate) window_seconds: u64,
    /// Keyed orders answered 201 per second, window by window.
    pub(crate) orders_per_second: Vec<f64>,
    pub(crate) errors: u64,
    /// The errors by kind: status and error code, or the transport error.
    pub(crate) error_kinds: BTreeMap<String, u64>,
    /// The last full window's throughput over the best window's.
    pub(crate) last_vs_best: f64,
    /// Postgres' CPU per order over the server's, in the last full window over the first: above
    /// 1 when Postgres' work per order grew with the tables, about 1 when a slower window was
    /// the machine (both slow down together).
    pub(crate) postgres_share_last_vs_first: f64,
    /// What Postgres did in each window.
    pub(crate) postgres: Vec<SoakWindow>,
    pub(crate) start: Probe,
    pub(crate) end: Probe,
}

/// One soak window: the machine's steal, and the work of Postgres and the server per keyed
/// order answered in it (the counters are read at the first once-a-second look past the
/// window's edge).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SoakWindow {
    /// The share of the machine's CPU time the hypervisor gave to others (steal).
    pub(crate) steal_percent: f64,
    pub(crate) postgres_cpu_ms: f64,
    pub(crate) server_cpu_ms: f64,
    pub(crate) wal_kib_per_order: f64,
    pub(crate) full_page_images_per_order: f64,
    pub(crate) blocks_read_per_order: f64,
    pub(crate) buffer_hit_ratio: f64,
    pub(crate) checkpoints: i64,
    pub(crate) buffers_written_by_backends_per_order: f64,
    /// At the window's end: the oldest snapshot's age (transactions).
    pub(crate) oldest_xmin_age: i32,
    /// At the window's end: the size of `paper_accounts`, `paper_positions` and `quotes`.
    pub(crate) accounts_positions_quotes_kib: i64,
    /// The tables an autovacuum worker was seen on during the window.
    pub(crate) autovacuum: Vec<String>,
}

impl SoakWindow {
    /// Postgres' CPU per order over the server's.
    pub(crate) fn postgres_vs_server(&self) -> f64 {
        self.postgres_cpu_ms / self.server_cpu_ms.max(1e-9)
    }
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct PgCounters {
    pub(crate) wal_bytes: i64,
    pub(crate) wal_fpi: i64,
    pub(crate) checkpoints: i64,
    pub(crate) buffers_backend: i64,
    pub(crate) blks_read: i64,
    pub(crate) blks_hit: i64,
    /// The oldest snapshot's age in transactions (what keeps VACUUM and HOT pruning from
    /// removing dead row versions).
    pub(crate) oldest_xmin_age: i32,
    /// The rows every order updates or locks: the accounts, positions and quotes tables.
    pub(crate) hot_kib: i64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Probe {
    pub(crate) rss_mib: f64,
    pub(crate) files: usize,
    pub(crate) connections: i64,
    pub(crate) table_mib: BTreeMap<&'static str, f64>,
}
