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

    /// The same Postgres, with another server (scenario 10's) and no proxy.
    pub(crate) fn for_server(&self, pid: u32) -> Self {
        Self {
            postmaster: self.postmaster,
            server: Some(pid),
            proxy_thread: None,
        }
    }

    /// How many children the postmaster has now (backends, zombies not yet reaped, its own
    /// workers).
    pub(crate) fn postgres_children(&self) -> usize {
        children_of(self.postmaster)
    }

    /// Waits, up to `limit`, until the postmaster has no more than `before` children. A
    /// pgbench that exited leaves backends that end and are reaped afterwards: sampled before
    /// that, their CPU would land in the next run's figures (the postmaster's `cutime` grows
    /// when it reaps them) instead of this one's.
    pub(crate) fn settle(&self, before: usize, limit: Duration) {
        let deadline = std::time::Instant::now() + limit;
        while children_of(self.postmaster) > before && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
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

/// The processes whose parent is `root`.
fn children_of(root: u32) -> usize {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
                .filter(|&pid| process(pid).ppid == root)
                .count()
        })
        .unwrap_or(0)
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

/// Pieces of work in one round of [`speed_ms`]: about 5 ms on a quiet machine of this kind.
const SPEED_ITEMS: usize = 2_000;

/// How fast the machine runs a request's kind of work right now: the CPU time, in ms, that this
/// thread spends on a fixed piece of work (an order-sized JSON body serialised, parsed back and
/// hashed with SHA-256, [`SPEED_ITEMS`] times), the least of `rounds` rounds. It is the thread's
/// own CPU clock (`CLOCK_THREAD_CPUTIME_ID`), so waiting for a core does not count; what
/// moves it is how fast a core runs it: the host's load on the same physical cores, the clock,
/// the caches shared with the load. The same binary's CPU per request moves with it, so a figure
/// in ms is read against the speed of its run, and two windows of one run against each other.
/// `None` where the clock cannot be read.
pub(crate) fn speed_ms(rounds: usize) -> Option<f64> {
    (0..rounds.max(1))
        .map(|_| speed_round())
        .try_fold(f64::INFINITY, |least, round| Some(least.min(round?)))
}

fn speed_round() -> Option<f64> {
    use sha2::Digest;
    let before = thread_cpu_ns()?;
    let mut sink = 0usize;
    for i in 0..SPEED_ITEMS {
        let body = serde_json::json!({
            "symbol": "AAPL",
            "side": "buy",
            "type": "limit",
            "qty": i,
            "limit_price": "190.10",
            "time_in_force": "day",
        });
        let text = body.to_string();
        let back: serde_json::Value = serde_json::from_str(&text).ok()?;
        let digest = sha2::Sha256::digest(text.as_bytes());
        sink = sink
            .wrapping_add(back.as_object().map_or(0, serde_json::Map::len))
            .wrapping_add(usize::from(digest[0]));
    }
    std::hint::black_box(sink);
    let after = thread_cpu_ns()?;
    Some(after.saturating_sub(before) as f64 / 1e6)
}

/// This thread's time on a CPU since it started, in ns (`CLOCK_THREAD_CPUTIME_ID`, which counts
/// up to the call; `/proc/thread-self/schedstat` lags by up to a scheduler tick, 4 ms here).
fn thread_cpu_ns() -> Option<u64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    let secs = u64::try_from(t.tv_sec).ok()?;
    let nanos = u64::try_from(t.tv_nsec).ok()?;
    Some(secs * 1_000_000_000 + nanos)
}

/// [`speed_ms`] on a blocking thread, so that the load running on the runtime is not held up.
pub(crate) async fn speed_now(rounds: usize) -> Option<f64> {
    tokio::task::spawn_blocking(move || speed_ms(rounds))
        .await
        .ok()
        .flatten()
}

/// The machine's speed ([`speed_ms`], 5 rounds) at a run's start and at its end.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(crate) struct Speed {
    pub(crate) start_ms: Option<f64>,
    pub(crate) end_ms: Option<f64>,
}

impl Speed {
    /// `start_ms`, read at the start, with the speed now as the end.
    pub(crate) async fn ended(start_ms: Option<f64>) -> Self {
        Self {
            start_ms,
            end_ms: speed_now(5).await,
        }
    }

    /// One reading, for a line of output.
    pub(crate) fn describe(ms: Option<f64>) -> String {
        ms.map_or_else(
            || "unknown (no thread CPU clock)".to_owned(),
            |ms| format!("{ms:.2} ms of CPU for a fixed piece of work (lower is faster)"),
        )
    }
}

impl std::fmt::Display for Speed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "at the start {}; at the end {}",
            Self::describe(self.start_ms),
            Self::describe(self.end_ms)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speed_probe_reads_its_threads_cpu_time() {
        let wall = std::time::Instant::now();
        let ms = speed_ms(3).expect("the thread CPU clock");
        let wall_ms = wall.elapsed().as_secs_f64() * 1000.0;
        // One thread cannot run longer than the time that passed; three rounds of work take
        // some of it.
        assert!(ms > 0.0, "{ms}");
        assert!(
            ms * 3.0 <= wall_ms + 0.5,
            "3 rounds of {ms} ms in {wall_ms} ms"
        );
    }

    #[test]
    fn waiting_is_not_counted_as_the_threads_cpu_time() {
        let before = thread_cpu_ns().expect("the thread CPU clock");
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu_ns().expect("the thread CPU clock") - before;
        assert!(slept < 5_000_000, "{slept} ns counted across a 50 ms sleep");
    }
}
