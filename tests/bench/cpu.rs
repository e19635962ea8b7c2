//! CPU time from `/proc`, split by who spent it: the Postgres backends, the server, the load
//! generator (this process, or pgbench for the ceiling) and the whole machine.
//!
//! A sample is taken before and after a measured run; the difference divided by the run's
//! requests is the CPU a request costs, which does not depend on how fast the disk flushes.
//! - The machine: the non-idle time of `/proc/stat`'s `cpu` line (every process, the kernel,
//!   interrupts; exited processes included).
//! - Postgres: the postmaster's own time, the time of the children it has reaped (`cutime` and
//!   `cstime`: backends of connections that closed, pgbench's among them), and the time of every
//!   live child (the server's pooled backends).
//! - The server: its process (every thread).
//! - The load generator: this process, less the counting proxy's thread, plus the children it has
//!   reaped (pgbench); the proxy's thread on its own.

use std::time::Duration;

/// Clock ticks per second of the `/proc` counters (`getconf CLK_TCK`; 100 on Linux).
const TICKS_PER_SEC: f64 = 100.0;

/// Cumulative CPU seconds at one instant.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sample {
    machine: f64,
    postgres: f64,
    server: f64,
    generator: f64,
    proxy: f64,
}

/// CPU milliseconds per request between two samples.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct PerRequest {
    /// Every CPU of the machine (non-idle time).
    pub(crate) machine_ms: f64,
    /// Postgres: the backends and the postmaster.
    pub(crate) postgres_ms: f64,
    /// `raptor serve` (0 for the ceiling: there is none).
    pub(crate) server_ms: f64,
    /// The load generator: the bench's HTTP client, or pgbench for the ceiling.
    pub(crate) generator_ms: f64,
    /// The counting proxy (0 when the run does not go through it).
    pub(crate) proxy_ms: f64,
}

/// Who to sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Meter {
    postmaster: u32,
    server: Option<u32>,
    proxy_thread: Option<u32>,
}

impl Meter {
    /// `postmaster`: the pid of the Postgres server ([`postmaster_of`]).
    pub(crate) fn new(postmaster: u32, server: Option<u32>, proxy_thread: Option<u32>) -> Self {
        Self {
            postmaster,
            server,
            proxy_thread,
        }
    }

    /// The same, for a run without the server and the proxy (the ceiling: pgbench is the load
    /// generator, a child of this process).
    pub(crate) fn without_server(&self) -> Self {
        Self {
            postmaster: self.postmaster,
            server: None,
            proxy_thread: None,
        }
    }

    /// The counters now.
    pub(crate) fn sample(&self) -> Sample {
        let own = stat_times(&std::fs::read_to_string("/proc/self/stat").unwrap_or_default());
        let proxy = self
            .proxy_thread
            .map(|tid| {
                let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
                    .unwrap_or_default();
                let t = stat_times(&text);
                t.own
            })
            .unwrap_or(0.0);
        Sample {
            machine: machine_busy(),
            postgres: tree_of(self.postmaster),
            server: self.server.map_or(0.0, |pid| process(pid).own),
            generator: own.own - proxy + own.reaped,
            proxy,
        }
    }
}

impl Sample {
    /// What happened between `self` and `after`, per request.
    pub(crate) fn per_request(&self, after: &Sample, requests: usize) -> PerRequest {
        let per =
            |before: f64, after: f64| (after - before).max(0.0) * 1000.0 / requests.max(1) as f64;
        PerRequest {
            machine_ms: per(self.machine, after.machine),
            postgres_ms: per(self.postgres, after.postgres),
            server_ms: per(self.server, after.server),
            generator_ms: per(self.generator, after.generator),
            proxy_ms: per(self.proxy, after.proxy),
        }
    }
}

/// The pid of the postmaster whose backend `backend_pid` is (`select pg_backend_pid()`): the
/// backend's parent.
pub(crate) fn postmaster_of(backend_pid: u32) -> anyhow::Result<u32> {
    let text = std::fs::read_to_string(format!("/proc/{backend_pid}/stat")).map_err(|err| {
        anyhow::anyhow!(
            "cannot read /proc/{backend_pid}/stat ({err}): the CPU figures need Postgres on this machine"
        )
    })?;
    let fields = after_comm(&text);
    fields
        .get(1)
        .and_then(|ppid| ppid.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no parent in /proc/{backend_pid}/stat"))
}

/// The machine's CPU seconds since boot in the `/proc/stat` fields `fields` (0 user, 1 nice,
/// 2 system, 3 idle, 4 iowait, 5 irq, 6 softirq, 7 steal; guest time is already in user).
fn machine_seconds(fields: &[usize]) -> f64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|n| n.parse().ok())
        .collect();
    let sum: f64 = fields.iter().filter_map(|&i| ticks.get(i)).sum();
    sum / TICKS_PER_SEC
}

/// The non-idle CPU seconds of the machine since boot.
fn machine_busy() -> f64 {
    machine_seconds(&[0, 1, 2, 5, 6, 7])
}

/// The CPU seconds the hypervisor gave to others while this machine wanted to run (steal),
/// since boot: a noisy neighbour shows here.
pub(crate) fn machine_steal() -> f64 {
    machine_seconds(&[7])
}

#[derive(Debug, Clone, Copy, Default)]
struct Times {
    /// utime + stime.
    own: f64,
    /// cutime + cstime: reaped children.
    reaped: f64,
    ppid: u32,
}

/// The fields after the `(comm)` of a `/proc/<pid>/stat` line, from `state` on.
fn after_comm(text: &str) -> Vec<&str> {
    text.rfind(')')
        .map(|i| text[i + 1..].split_whitespace().collect())
        .unwrap_or_default()
}

fn stat_times(text: &str) -> Times {
    // After the comm: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    let f = after_comm(text);
    let tick = |i: usize| f.get(i).and_then(|n| n.parse::<f64>().ok()).unwrap_or(0.0);
    Times {
        own: (tick(11) + tick(12)) / TICKS_PER_SEC,
        reaped: (tick(13) + tick(14)) / TICKS_PER_SEC,
        ppid: f.get(1).and_then(|n| n.parse().ok()).unwrap_or(0),
    }
}

fn process(pid: u32) -> Times {
    stat_times(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default())
}

/// CPU seconds of `root` with every child it has reaped and every live child.
fn tree_of(root: u32) -> f64 {
    let top = process(root);
    let mut total = top.own + top.reaped;
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let t = process(pid);
            if t.ppid == root {
                total += t.own;
            }
        }
    }
    total
}

/// The latency of one 8 KiB write made durable with `fdatasync` (what a commit's WAL flush
/// costs), measured for `secs` in `dir`, which should be on Postgres' WAL disk.
pub(crate) fn flush_latency(dir: &std::path::Path, secs: Duration) -> anyhow::Result<Flush> {
    use std::io::{Seek, Write};
    let path = dir.join(format!("raptor-bench-flush-{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)
        .map_err(|err| anyhow::anyhow!("cannot write {}: {err}", path.display()))?;
    let block = vec![0x5au8; 8192];
    let mut latencies = Vec::new();
    let deadline = std::time::Instant::now() + secs;
    let outcome = (|| -> anyhow::Result<()> {
        while std::time::Instant::now() < deadline {
            let started = std::time::Instant::now();
            file.seek(std::io::SeekFrom::Start(0))?;
            file.write_all(&block)?;
            file.sync_data()?;
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        Ok(())
    })();
    let _ = std::fs::remove_file(&path);
    outcome?;
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        let rank = ((p * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len().max(1));
        latencies.get(rank - 1).copied().unwrap_or(0.0)
    };
    Ok(Flush {
        dir: dir.display().to_string(),
        flushes: latencies.len(),
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
    })
}

/// The disk's flush latency, measured in the run.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Flush {
    /// Where it was measured.
    pub(crate) dir: String,
    pub(crate) flushes: usize,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
}
