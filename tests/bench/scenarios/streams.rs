//! Scenario 10: the trade-updates stream (`GET /api/trading/stream`, server-sent events), on a
//! server of its own started for it (the same settings as the measured one, the stream bounds
//! set here), so that its memory before and after the streams is the streams' alone and the
//! measured server's figures stay those of the order path.
//!
//! 1. **Commit-to-event delay at 32 clients.** Users 0-31 each hold one stream while 32
//!    closed-loop clients send them keyed market orders (scenario 2's orders, client i as user
//!    i). Each order's `fill` event is found on its user's stream by `data.order.id`. The commit
//!    happens after the request is sent and before the 201 is, so the true commit-to-event delay
//!    lies between "event after the 201" (a lower bound; negative when the event beat the
//!    answer) and "event after the request was sent" (an upper bound). An order whose event has
//!    not arrived 5 s after its 201 is missed; an event seen twice is a duplicate.
//! 2. **The cost of 1,000 idle streams.** 1,000 streams of 200 other users (5 each, the per-user
//!    bound), users without orders, so nothing wakes them but the heartbeat. Measured: the
//!    server's resident memory before they open and at the end of an idle window of 20 s
//!    (`RAPTOR_BENCH_STREAM_IDLE_SECS`; a heartbeat falls in it for every stream), the CPU over
//!    that window (and over 5 s without streams before), the Postgres connections the server
//!    holds in it (by its sockets' ports
//!    in `pg_stat_activity`: idle streams must hold none, only the one listener), keyed orders
//!    at 32 clients with the streams open and without in three rounds side by side (the streams
//!    closed and opened again between; the median round is judged), and how soon the server
//!    lets closed streams go (their connections, and with them their places in the per-user
//!    and per-process counts).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use futures_util::StreamExt;
use raptor_api::auth::Role;
use raptor_integration_tests::sse::{Item, Parser};
use raptor_integration_tests::{free_port, new_key};
use serde::Serialize;
use sqlx::PgPool;
use tokio::task::JoinHandle;

use crate::cpu::Meter;
use crate::http::{
    open_files_limit, rss_mib, sockets, start_server, Answer, Http, CLOSE_WAIT, ESTABLISHED,
};
use crate::runner::Run;
use crate::setup::user;
use crate::{Bench, Settings, POOL_SIZE};

/// Clients sending orders, and streams of scenario 10's first part.
pub(crate) const CLIENTS: usize = 32;
/// Streams of the second part.
pub(crate) const IDLE_STREAMS: usize = 1_000;
/// Streams per user in the second part (`RAPTOR_TRADE_STREAMS_PER_USER`' default).
const PER_USER: usize = 5;
/// An order whose event has not arrived this long after its 201 is missed.
pub(crate) const MISSED_AFTER: Duration = Duration::from_secs(5);
/// The idle window's least length (`RAPTOR_BENCH_STREAM_IDLE_SECS`, default 20): longer than
/// the 15 s heartbeat, so that every stream sends one in it.
const MIN_IDLE_WINDOW: Duration = Duration::from_secs(16);
/// The server's CPU without any stream, to read the idle window's against.
const QUIET_WINDOW: Duration = Duration::from_secs(5);
/// Streams being opened at once (each open reads the user's newest event from Postgres).
const OPENING: usize = 50;
/// Rounds of keyed orders with the idle streams and without.
const ROUNDS: usize = 3;
/// How long the server is watched for letting go of closed streams.
const RELEASE_WAIT: Duration = Duration::from_secs(40);
/// Descriptors beyond the streams that the bench and the server need (their pools, Postgres,
/// the order clients' connections, files): the streams' count plus this is the least limit.
const SPARE_FILES: u64 = 1_024;

/// Scenario 10, both parts, on a server started here (pushed on `servers`, so that an error
/// stops it too; stopped at the end).
pub(crate) async fn scenario(
    settings: &Settings,
    b: &Bench,
    servers: &mut Vec<tokio::process::Child>,
) -> anyhow::Result<Streams> {
    // Every stream is a socket on both sides: this process and the server (which inherits this
    // process's limit) must be allowed the streams and the rest.
    let need = IDLE_STREAMS as u64 + SPARE_FILES;
    let bench_files = open_files_limit("self")?;
    if bench_files.0 < need {
        bail!(
            "scenario 10 needs {need} open files and this process may open {} (hard limit {}): \
             raise `ulimit -n`",
            bench_files.0,
            bench_files.1
        );
    }
    // The server refuses connections past RAPTOR_MAX_CONNECTIONS with a 503 instead of running
    // out of descriptors: its default (4,096), or less when the limit is lower.
    let max_connections = 4_096.min(bench_files.0 - SPARE_FILES / 4);
    let port = free_port()?;
    let env = [
        // The first part's 32 streams may still be held by the server (until it finds them
        // closed) when the second part opens its 1,000.
        (
            "RAPTOR_TRADE_STREAMS_PER_PROCESS",
            (IDLE_STREAMS + CLIENTS).to_string(),
        ),
        ("RAPTOR_TRADE_STREAMS_PER_USER", PER_USER.to_string()),
        ("RAPTOR_MAX_CONNECTIONS", max_connections.to_string()),
    ]
    .map(|(k, v)| (k.to_owned(), v));
    let url = settings.url(&format!(
        "{}:{}",
        settings.options.get_host(),
        settings.options.get_port()
    ));
    let (child, pid) = start_server(&url, port, true, POOL_SIZE, &env).await?;
    servers.push(child);
    let base = format!("http://127.0.0.1:{port}");
    let http = Http::new(base.clone())?;
    http.wait_ready().await?;
    let server_files = open_files_limit(&pid.to_string())?;
    println!(
        "(10) trade streams on a server of their own: open files {} (bench) and {} (server), \
         RAPTOR_MAX_CONNECTIONS={max_connections}",
        bench_files.0, server_files.0
    );
    let s = Scenario {
        b,
        http,
        streams: reqwest::Client::builder()
            // No overall timeout: a stream lasts as long as the scenario wants it.
            .connect_timeout(Duration::from_secs(5))
            .build()
            .context("streams' client")?,
        base,
        pid,
        port,
        pg_port: settings.options.get_port(),
        meter: b.meter.for_server(pid),
        idle_window: settings.stream_idle.max(MIN_IDLE_WINDOW),
    };
    let (delay, first_part) = s.delay().await?;
    let idle = s.idle(first_part).await?;
    if let Some(mut child) = servers.pop() {
        child.kill().await.context("stop scenario 10's server")?;
    }
    Ok(Streams {
        open_files: OpenFiles {
            bench: bench_files,
            server: server_files,
            server_max_connections: max_connections,
        },
        delay,
        idle,
    })
}

/// Scenario 10's figures.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Streams {
    pub(crate) open_files: OpenFiles,
    pub(crate) delay: Delay,
    pub(crate) idle: Idle,
}

/// The descriptor limits (soft, hard) the run had, and the server's connection bound.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OpenFiles {
    pub(crate) bench: (u64, u64),
    pub(crate) server: (u64, u64),
    pub(crate) server_max_connections: u64,
}

/// Part 1: commit-to-event delay at [`CLIENTS`] clients.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Delay {
    /// Streams that answered 200 with an event stream (one per client's user).
    pub(crate) streams: usize,
    /// The keyed orders (warm-up excluded).
    pub(crate) orders: Run,
    /// Orders answered 201 whose `fill` event arrived within [`MISSED_AFTER`].
    pub(crate) matched: usize,
    /// From the order's 201 to its event (a lower bound of the delay from the commit).
    pub(crate) after_response: Spread,
    /// From the order's request to its event (an upper bound).
    pub(crate) after_send: Spread,
    /// Events that arrived before their order's 201 did.
    pub(crate) before_response: usize,
    /// Orders answered 201 whose `fill` did not arrive within [`MISSED_AFTER`] of the answer.
    pub(crate) missed: usize,
    /// The same event (order and kind) seen more than once, warm-up included.
    pub(crate) duplicates: usize,
    /// Events whose id was not above the previous event's on the same stream.
    pub(crate) not_increasing: usize,
    /// Streams that ended (or failed) while they were being read.
    pub(crate) ended: usize,
}

/// p50, p99 and max of a delay, in ms.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Spread {
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

/// Part 2: the cost of [`IDLE_STREAMS`] idle streams.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Idle {
    pub(crate) wanted: usize,
    /// Streams that answered 200 with an event stream.
    pub(crate) opened: usize,
    /// The others, by status and error code (or transport error).
    pub(crate) refused: BTreeMap<String, usize>,
    pub(crate) open_ms: f64,
    /// Streams opened by each later opening of the rounds (the places the closed ones gave
    /// back).
    pub(crate) reopened: Vec<usize>,
    /// Seconds from the first part's streams' close until the server held none of their
    /// connections any more (`None`: still held after [`RELEASE_WAIT`]); the same for each
    /// close of the idle streams.
    pub(crate) first_part_released_s: Option<f64>,
    pub(crate) released_s: Vec<Option<f64>>,
    pub(crate) window_s: f64,
    pub(crate) rss_before_mib: f64,
    pub(crate) rss_open_mib: f64,
    pub(crate) rss_end_mib: f64,
    /// Every 2 s of the window: whether memory grows while nothing happens.
    pub(crate) rss_window_mib: Vec<f64>,
    /// Once the server has let the streams go (the first time), and once they are open again
    /// in the rounds: memory the closed streams left that new ones do not reuse grows here.
    pub(crate) rss_closed_mib: f64,
    pub(crate) rss_reopened_mib: Vec<f64>,
    /// Growth from before the streams opened to the end of the window, per stream.
    pub(crate) rss_per_stream_kib: f64,
    /// Growth within the window (the streams idle): memory that grows with time.
    pub(crate) rss_window_growth_kib: f64,
    /// The server's CPU over the idle window, and over [`QUIET_WINDOW`] without streams (its
    /// threads' run time); Postgres' and the machine's over the idle window (everything on
    /// them, other users of this Postgres and this machine included).
    pub(crate) server_cpu_ms_per_s: f64,
    pub(crate) server_cpu_quiet_ms_per_s: f64,
    pub(crate) postgres_cpu_ms_per_s: f64,
    pub(crate) machine_cpu_ms_per_s: f64,
    /// Streams that received at least one heartbeat in the window.
    pub(crate) heartbeat_streams: usize,
    /// Streams that ended in the window, and (every opening's) before the bench closed them.
    pub(crate) ended_in_window: usize,
    pub(crate) ended_by_end: usize,
    /// Events received on the idle streams (none is expected: their users place no order).
    pub(crate) events: u64,
    /// The server's Postgres connections by `application_name` and state, before the streams
    /// opened and at the window's busiest sample (most connections).
    pub(crate) postgres_before: BTreeMap<String, i64>,
    pub(crate) postgres_idle: BTreeMap<String, i64>,
    pub(crate) postgres_before_total: i64,
    pub(crate) postgres_idle_max: i64,
    /// Connections named `raptor-listen` in the window (one listener per process).
    pub(crate) listeners: i64,
    /// The server's HTTP connections at the window's end, and its most descriptors in it.
    pub(crate) http_connections: usize,
    pub(crate) server_files: usize,
    /// Keyed orders at [`CLIENTS`] clients with the idle streams open and without, round by
    /// round.
    pub(crate) rounds: Vec<IdleRound>,
}

/// One round of keyed orders with the idle streams open and without (the order flipped each
/// round: with first in round 0).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct IdleRound {
    pub(crate) with: Run,
    pub(crate) without: Run,
}

impl IdleRound {
    pub(crate) fn p50_ratio(&self) -> f64 {
        self.with.p50_ms / self.without.p50_ms.max(1e-9)
    }

    pub(crate) fn rps_ratio(&self) -> f64 {
        self.with.rps / self.without.rps.max(1e-9)
    }
}

impl Idle {
    /// The median round's p50 with the streams over without.
    pub(crate) fn p50_ratio(&self) -> f64 {
        median(self.rounds.iter().map(IdleRound::p50_ratio).collect())
    }

    /// The median round's throughput with the streams over without.
    pub(crate) fn rps_ratio(&self) -> f64 {
        median(self.rounds.iter().map(IdleRound::rps_ratio).collect())
    }

    /// Keyed orders answered other than 2xx, in every round.
    pub(crate) fn errors(&self) -> usize {
        self.rounds
            .iter()
            .map(|r| r.with.errors() + r.without.errors())
            .sum()
    }

    /// Every opening of the idle streams opened them all.
    pub(crate) fn all_opened(&self) -> bool {
        self.opened == self.wanted && self.reopened.iter().all(|&n| n == self.wanted)
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

struct Scenario<'a> {
    b: &'a Bench,
    /// Orders to the scenario's server.
    http: Http,
    /// The streams' client.
    streams: reqwest::Client,
    base: String,
    pid: u32,
    port: u16,
    pg_port: u16,
    meter: Meter,
    idle_window: Duration,
}

impl Scenario<'_> {
    /// Part 1; and its streams' connections (as [`open_connections`] lists them) and when they
    /// were closed.
    async fn delay(&self) -> anyhow::Result<(Delay, (HashSet<u16>, Instant))> {
        println!("(10) commit-to-event delay: {CLIENTS} streams, {CLIENTS} clients ...");
        let sink = Arc::new(Sink::default());
        let before = open_connections(self.pid, self.port)?;
        let mut streams = Vec::with_capacity(CLIENTS);
        for client in 0..CLIENTS {
            let opened = self
                .open(&self.b.users[client].token, Some(sink.clone()))
                .await
                .map_err(|refused| anyhow::anyhow!("stream of user {client}: {refused}"))?;
            streams.push(opened);
        }
        // The streams' connections: those the server holds now and did not before (the
        // readiness check's, which the order clients reuse, is among the latter).
        let connections: HashSet<u16> = open_connections(self.pid, self.port)?
            .difference(&before)
            .copied()
            .collect();
        let (orders, placed) = self.keyed("10 keyed, 32 streams open").await?;
        // Wait for the stragglers: until every order has its event, or the last one its 5 s.
        let last = placed.iter().map(|p| p.answered).max();
        loop {
            let all = {
                let events = sink.lock();
                placed
                    .iter()
                    .filter(|p| p.created)
                    .all(|p| fill_of(&events, &p.order).is_some())
            };
            if all || last.is_none_or(|last| last.elapsed() > MISSED_AFTER) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let ended = streams.iter().filter(|s| s.tally.ended()).count();
        let not_increasing = streams
            .iter()
            .map(|s| s.tally.not_increasing.load(Ordering::Relaxed))
            .sum::<u64>();
        for stream in &streams {
            stream.task.abort();
        }
        let closed_at = Instant::now();
        let events = sink.lock();
        let (mut after_response, mut after_send) = (Vec::new(), Vec::new());
        let (mut missed, mut before_response) = (0, 0);
        for p in placed.iter().filter(|p| p.created) {
            match fill_of(&events, &p.order) {
                Some(at) if at <= p.answered + MISSED_AFTER => {
                    let from_response = signed_ms(at, p.answered);
                    if from_response < 0.0 {
                        before_response += 1;
                    }
                    after_response.push(from_response);
                    after_send.push(signed_ms(at, p.sent));
                }
                _ => missed += 1,
            }
        }
        let duplicates = events
            .values()
            .map(|seen| {
                let mut kinds: HashMap<&str, usize> = HashMap::new();
                for (kind, _) in seen {
                    *kinds.entry(kind.as_str()).or_default() += 1;
                }
                kinds.values().map(|n| n - 1).sum::<usize>()
            })
            .sum();
        let delay = Delay {
            streams: streams.len(),
            matched: after_response.len(),
            after_response: spread(after_response),
            after_send: spread(after_send),
            before_response,
            missed,
            duplicates,
            not_increasing: usize::try_from(not_increasing)?,
            ended,
            orders,
        };
        Ok((delay, (connections, closed_at)))
    }

    /// Part 2; `first_part`: the first part's streams' connections and when they were closed.
    async fn idle(&self, first_part: (HashSet<u16>, Instant)) -> anyhow::Result<Idle> {
        println!(
            "(10) {IDLE_STREAMS} idle streams: {} users, keyed orders at {CLIENTS} clients \
             without and with them ...",
            IDLE_STREAMS / PER_USER
        );
        // Watch, beside the set-up, for the server letting go of the first part's streams.
        let released = tokio::spawn(let_go(self.pid, self.port, first_part.0, first_part.1));
        let users = idle_users(&self.b.pool).await?;
        let first_part_released_s = released.await.context("release watch")?;
        let quiet = self.cpu_over(QUIET_WINDOW).await?;
        let (postgres_before, postgres_before_total) = self.postgres().await?;
        let rss_before_mib = rss_mib(self.pid)?.1;

        let set = self.open_idle(&users).await;
        let (opened, refused, open_ms) = (set.streams.len(), set.refused.clone(), set.open_ms);
        let http_connections = set.connections.len();
        let rss_open_mib = rss_mib(self.pid)?.1;
        println!(
            "    {opened} streams open in {open_ms:.0} ms ({} refused), idle for {} s ...",
            refused.values().sum::<usize>(),
            self.idle_window.as_secs()
        );

        // The idle window: heartbeats counted per stream, the server's Postgres connections
        // sampled every 2 s.
        let heartbeats_before: Vec<u64> =
            set.streams.iter().map(|s| s.tally.heartbeats()).collect();
        let before = self.meter.sample();
        let server_before = run_time_ns(self.pid)?;
        let window_started = Instant::now();
        let (mut postgres_idle, mut postgres_idle_max, mut listeners) = (BTreeMap::new(), 0, 0);
        let mut server_files = 0;
        let mut rss_window_mib = Vec::new();
        while window_started.elapsed() < self.idle_window {
            tokio::time::sleep(
                Duration::from_secs(2)
                    .min(self.idle_window.saturating_sub(window_started.elapsed())),
            )
            .await;
            rss_window_mib.push(rss_mib(self.pid)?.1);
            let (by_name, total) = self.postgres().await?;
            listeners = listeners.max(
                by_name
                    .iter()
                    .filter(|(name, _)| name.starts_with("raptor-listen "))
                    .map(|(_, n)| *n)
                    .sum(),
            );
            if total >= postgres_idle_max {
                postgres_idle_max = total;
                postgres_idle = by_name;
            }
            server_files = server_files.max(
                std::fs::read_dir(format!("/proc/{}/fd", self.pid)).map_or(0, Iterator::count),
            );
        }
        let window = window_started.elapsed();
        let cpu = before.per_request(&self.meter.sample(), 1);
        let server_ns = run_time_ns(self.pid)?.saturating_sub(server_before);
        let rss_end_mib = rss_mib(self.pid)?.1;
        let heartbeat_streams = set
            .streams
            .iter()
            .zip(&heartbeats_before)
            .filter(|(s, before)| s.tally.heartbeats() > **before)
            .count();
        let ended_in_window = set.streams.iter().filter(|s| s.tally.ended()).count();

        // Keyed orders with the streams open and without, side by side: ROUNDS rounds, the
        // order flipped each round (with first in the first, as the streams are open), the
        // median round judged. A single pair a minute apart measured the host, not the streams:
        // the run without them after the one with them was as slow as it.
        println!("    keyed orders with and without them, {ROUNDS} rounds ...");
        let mut current = Some(set);
        let (mut rounds, mut reopened, mut released_s) = (Vec::new(), Vec::new(), Vec::new());
        let mut rss_reopened_mib = Vec::new();
        let (mut ended_by_end, mut events, mut rss_closed_mib) = (0, 0, None);
        for round in 0..ROUNDS {
            let (mut with, mut without) = (None, None);
            for streams_open in [round % 2 == 0, round % 2 == 1] {
                if streams_open {
                    if current.is_none() {
                        let set = self.open_idle(&users).await;
                        reopened.push(set.streams.len());
                        rss_reopened_mib.push(rss_mib(self.pid)?.1);
                        current = Some(set);
                    }
                    with = Some(self.keyed("10 keyed, 1,000 idle streams").await?.0);
                } else {
                    if let Some(set) = current.take() {
                        ended_by_end += set.streams.iter().filter(|s| s.tally.ended()).count();
                        events += set.events();
                        released_s.push(set.close(self.pid, self.port).await);
                        rss_closed_mib.get_or_insert(rss_mib(self.pid)?.1);
                    }
                    without = Some(self.keyed("10 keyed, no streams").await?.0);
                }
            }
            let (Some(with), Some(without)) = (with, without) else {
                unreachable!("each round runs both");
            };
            rounds.push(IdleRound { with, without });
        }
        if let Some(set) = current.take() {
            ended_by_end += set.streams.iter().filter(|s| s.tally.ended()).count();
            events += set.events();
            released_s.push(set.close(self.pid, self.port).await);
        }

        let per_s = |ms: f64| ms / window.as_secs_f64();
        Ok(Idle {
            wanted: IDLE_STREAMS,
            opened,
            refused,
            open_ms,
            reopened,
            first_part_released_s,
            released_s,
            window_s: window.as_secs_f64(),
            rss_before_mib,
            rss_open_mib,
            rss_end_mib,
            rss_window_mib,
            rss_closed_mib: rss_closed_mib.unwrap_or(0.0),
            rss_reopened_mib,
            rss_per_stream_kib: (rss_end_mib - rss_before_mib) * 1024.0 / opened.max(1) as f64,
            rss_window_growth_kib: (rss_end_mib - rss_open_mib) * 1024.0,
            server_cpu_ms_per_s: per_s(server_ns as f64 / 1e6),
            server_cpu_quiet_ms_per_s: quiet,
            postgres_cpu_ms_per_s: per_s(cpu.postgres_ms),
            machine_cpu_ms_per_s: per_s(cpu.machine_ms),
            heartbeat_streams,
            ended_in_window,
            ended_by_end,
            events,
            postgres_before,
            postgres_idle,
            postgres_before_total,
            postgres_idle_max,
            listeners,
            http_connections,
            server_files,
            rounds,
        })
    }

    /// Opens [`IDLE_STREAMS`] streams, [`PER_USER`] for each of `users`, [`OPENING`] at a time.
    async fn open_idle(&self, users: &[String]) -> IdleSet {
        // The streams' connections are those the server holds after the opening and did not
        // before (the orders' keep-alive connections are among the latter).
        let before = open_connections(self.pid, self.port).unwrap_or_default();
        let started = Instant::now();
        let opening = futures_util::stream::iter(
            users
                .iter()
                .flat_map(|token| std::iter::repeat_n(token, PER_USER)),
        )
        .map(|token| self.open(token, None))
        .buffer_unordered(OPENING)
        .collect::<Vec<_>>()
        .await;
        let open_ms = started.elapsed().as_secs_f64() * 1000.0;
        let mut set = IdleSet {
            streams: Vec::with_capacity(IDLE_STREAMS),
            refused: BTreeMap::new(),
            open_ms,
            connections: HashSet::new(),
        };
        for opened in opening {
            match opened {
                Ok(stream) => set.streams.push(stream),
                Err(kind) => *set.refused.entry(kind).or_insert(0) += 1,
            }
        }
        set.connections = open_connections(self.pid, self.port)
            .unwrap_or_default()
            .difference(&before)
            .copied()
            .collect();
        set
    }

    /// The server's CPU over `window` with nothing to do, in ms per second.
    async fn cpu_over(&self, window: Duration) -> anyhow::Result<f64> {
        let before = run_time_ns(self.pid)?;
        let started = Instant::now();
        tokio::time::sleep(window).await;
        let ns = run_time_ns(self.pid)?.saturating_sub(before);
        Ok(ns as f64 / 1e6 / started.elapsed().as_secs_f64())
    }

    /// The server's Postgres connections by `application_name` and state (`raptor idle`), and
    /// their total: the backends whose client port is the local port of one of the server's
    /// sockets to Postgres.
    async fn postgres(&self) -> anyhow::Result<(BTreeMap<String, i64>, i64)> {
        let ports: Vec<i32> = sockets(self.pid)?
            .iter()
            .filter(|s| s.remote_port == self.pg_port && s.state == ESTABLISHED)
            .map(|s| i32::from(s.local_port))
            .collect();
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "select coalesce(application_name, '') || ' ' || coalesce(state, ''), count(*)
               from pg_stat_activity
              where client_port = any($1) and datname = current_database()
              group by 1",
        )
        .bind(&ports)
        .fetch_all(&self.b.pool)
        .await
        .context("the server's connections")?;
        let total = rows.iter().map(|(_, n)| n).sum();
        Ok((rows.into_iter().collect(), total))
    }

    /// Keyed market orders at [`CLIENTS`] closed-loop clients (client i as user i) for the
    /// bench's run length, after a second of warm-up: the run, and each order's times.
    async fn keyed(&self, name: &str) -> anyhow::Result<(Run, Vec<Placed>)> {
        for (duration, measured) in [(Duration::from_secs(1), false), (self.b.secs, true)] {
            let deadline = Instant::now() + duration;
            let started = Instant::now();
            let before = self.meter.sample();
            let tasks = (0..CLIENTS).map(|client| async move {
                let mut sent = Vec::new();
                while Instant::now() < deadline {
                    let at = Instant::now();
                    let answer = self.http.send(self.b.order(client, Some(new_key()))).await;
                    sent.push((at, Instant::now(), answer));
                }
                sent
            });
            let sent: Vec<(Instant, Instant, anyhow::Result<Answer>)> =
                futures_util::future::join_all(tasks)
                    .await
                    .into_iter()
                    .flatten()
                    .collect();
            if !measured {
                continue;
            }
            let after = self.meter.sample();
            let wall = started.elapsed();
            let placed = sent
                .iter()
                .map(|(at, answered, answer)| {
                    let (created, order) = match answer {
                        Ok(a) if a.status == 201 => (true, order_id(&a.body)),
                        _ => (false, None),
                    };
                    Placed {
                        sent: *at,
                        answered: *answered,
                        created: created && order.is_some(),
                        order: order.unwrap_or_default(),
                    }
                })
                .collect();
            let mut run = Run::new(
                name,
                CLIENTS,
                wall,
                sent.into_iter().map(|(_, _, answer)| answer).collect(),
            );
            run.cpu = Some(before.per_request(&after, run.requests));
            return Ok((run, placed));
        }
        unreachable!("the measured run returns")
    }

    /// Opens a stream of the user of `token` and reads it in a task of its own (its events
    /// into `sink` when given). `Err`: the refusal (status and error code, or the transport
    /// error).
    async fn open(&self, token: &str, sink: Option<Arc<Sink>>) -> Result<Opened, String> {
        let request = self
            .streams
            .get(format!("{}/api/trading/stream", self.base))
            .bearer_auth(token)
            .header("accept", "text/event-stream")
            .send();
        let response = match tokio::time::timeout(Duration::from_secs(10), request).await {
            Ok(Ok(response)) => response,
            Ok(Err(err)) => return Err(format!("transport: {err}")),
            Err(_) => return Err("no answer within 10 s".to_owned()),
        };
        let status = response.status().as_u16();
        let event_stream = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if status != 200 || !event_stream {
            let body = response.text().await.unwrap_or_default();
            let code = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|b| b["error"].as_str().map(str::to_owned))
                .unwrap_or_default();
            return Err(format!("{status} {code}"));
        }
        let tally = Arc::new(Tally::default());
        let task = tokio::spawn(read(response, tally.clone(), sink));
        Ok(Opened { task, tally })
    }
}

/// The client ports of the connections to `port` that the server `pid` holds open: established,
/// or closed by the client and not yet by the server.
fn open_connections(pid: u32, port: u16) -> anyhow::Result<HashSet<u16>> {
    Ok(sockets(pid)?
        .iter()
        .filter(|s| s.local_port == port && [ESTABLISHED, CLOSE_WAIT].contains(&s.state))
        .map(|s| s.remote_port)
        .collect())
}

/// Seconds from `closed_at` until the server `pid` holds none of `connections` (client ports of
/// its connections to `port`) any more; `None` if it still does after [`RELEASE_WAIT`]. A
/// stream's connection ends when the server drops the stream, which gives its place in the
/// per-user and per-process counts back.
async fn let_go(pid: u32, port: u16, connections: HashSet<u16>, closed_at: Instant) -> Option<f64> {
    while closed_at.elapsed() < RELEASE_WAIT {
        if open_connections(pid, port).is_ok_and(|open| open.is_disjoint(&connections)) {
            return Some(closed_at.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// The time the threads of `pid` have run, in ns: the scheduler's own count, which resolves the
/// few ms a second of an idle server where the CPU meters' 10 ms ticks do not. Per live thread:
/// one that ended in between is not counted (the runtime's workers live as long as the server).
fn run_time_ns(pid: u32) -> anyhow::Result<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .with_context(|| format!("read /proc/{pid}/task"))?
    {
        // A thread that ended between the listing and the read is skipped.
        let Ok(text) = std::fs::read_to_string(task?.path().join("schedstat")) else {
            continue;
        };
        total += text
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Ok(total)
}

/// 200 users without orders, for the idle streams: their tokens.
async fn idle_users(pool: &PgPool) -> anyhow::Result<Vec<String>> {
    let mut tokens = Vec::with_capacity(IDLE_STREAMS / PER_USER);
    for i in 0..IDLE_STREAMS / PER_USER {
        let created = user(pool, &format!("bench-stream-{i}@example.com"), Role::User).await?;
        tokens.push(created.token);
    }
    Ok(tokens)
}

/// One order of [`Scenario::keyed`].
struct Placed {
    sent: Instant,
    answered: Instant,
    /// Answered 201 with an order id.
    created: bool,
    order: String,
}

/// The order id of a 201's body.
fn order_id(body: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()?
        .get("id")?
        .as_str()
        .map(str::to_owned)
}

/// `a - b` in ms, negative when `a` came first.
fn signed_ms(a: Instant, b: Instant) -> f64 {
    if a >= b {
        (a - b).as_secs_f64() * 1000.0
    } else {
        -((b - a).as_secs_f64() * 1000.0)
    }
}

fn spread(mut values: Vec<f64>) -> Spread {
    values.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        let rank = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
        values[rank - 1]
    };
    if values.is_empty() {
        return Spread::default();
    }
    Spread {
        p50_ms: pct(0.50),
        p99_ms: pct(0.99),
        max_ms: values[values.len() - 1],
    }
}

/// The events of the first part's streams by order id: (kind, arrival) each.
#[derive(Default)]
struct Sink(Mutex<HashMap<String, Vec<(String, Instant)>>>);

impl Sink {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<(String, Instant)>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// When the first `fill` of `order` arrived.
fn fill_of(events: &HashMap<String, Vec<(String, Instant)>>, order: &str) -> Option<Instant> {
    events
        .get(order)?
        .iter()
        .find(|(kind, _)| kind == "fill")
        .map(|(_, at)| *at)
}

/// The idle streams of one opening.
struct IdleSet {
    streams: Vec<Opened>,
    /// The streams refused, by status and error code (or transport error).
    refused: BTreeMap<String, usize>,
    open_ms: f64,
    /// Their connections (client ports) in the server.
    connections: HashSet<u16>,
}

impl IdleSet {
    fn events(&self) -> u64 {
        self.streams
            .iter()
            .map(|s| s.tally.events.load(Ordering::Relaxed))
            .sum()
    }

    /// Closes the streams; how long the server `pid` took to let their connections go.
    async fn close(self, pid: u32, port: u16) -> Option<f64> {
        for stream in &self.streams {
            stream.task.abort();
        }
        let closed_at = Instant::now();
        let_go(pid, port, self.connections, closed_at).await
    }
}

/// An open stream: its reading task (aborted to close it) and what it counted.
struct Opened {
    task: JoinHandle<()>,
    tally: Arc<Tally>,
}

#[derive(Default)]
struct Tally {
    heartbeats: AtomicU64,
    events: AtomicU64,
    not_increasing: AtomicU64,
    ended: AtomicBool,
}

impl Tally {
    fn heartbeats(&self) -> u64 {
        self.heartbeats.load(Ordering::Relaxed)
    }

    fn ended(&self) -> bool {
        self.ended.load(Ordering::Relaxed)
    }
}

/// Reads a stream until it ends: heartbeats and events counted, each event's order and arrival
/// into `sink`.
async fn read(mut response: reqwest::Response, tally: Arc<Tally>, sink: Option<Arc<Sink>>) {
    let mut parser = Parser::default();
    let mut items = Vec::new();
    let mut last_id = 0_i64;
    while let Ok(Some(chunk)) = response.chunk().await {
        let at = Instant::now();
        parser.feed(&chunk, &mut items);
        for item in items.drain(..) {
            match item {
                Item::Comment => {
                    tally.heartbeats.fetch_add(1, Ordering::Relaxed);
                }
                Item::Message { id, event, data } => {
                    tally.events.fetch_add(1, Ordering::Relaxed);
                    let id = id.and_then(|id| id.parse::<i64>().ok()).unwrap_or(0);
                    if id <= last_id {
                        tally.not_increasing.fetch_add(1, Ordering::Relaxed);
                    }
                    last_id = last_id.max(id);
                    let order = serde_json::from_str::<serde_json::Value>(&data)
                        .ok()
                        .and_then(|d| d["order"]["id"].as_str().map(str::to_owned));
                    if let (Some(sink), Some(order)) = (&sink, order) {
                        sink.lock().entry(order).or_default().push((event, at));
                    }
                }
            }
        }
    }
    tally.ended.store(true, Ordering::Relaxed);
}
