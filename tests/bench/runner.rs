//! The closed-loop runner most scenarios measure with, and its figures: one measured [`Run`]
//! (throughput, latency percentiles, answers by status, CPU and shared buffers per request).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use raptor_integration_tests::{ORDERS, ORDER_BODY};
use serde::Serialize;

use crate::http::{Answer, Req};
use crate::{cpu, Bench, USERS};

impl Bench {
    pub(crate) fn order(&self, user: usize, key: Option<String>) -> Req {
        Req {
            method: reqwest::Method::POST,
            path: ORDERS.to_owned(),
            token: self.users[user % USERS].token.clone(),
            key,
            body: Some(Cow::Borrowed(ORDER_BODY)),
        }
    }

    /// `clients` closed-loop clients for the run's duration; `make(user, i)` builds the i-th
    /// request of the client of `user`. One warm-up second first.
    pub(crate) async fn closed(
        &self,
        name: &str,
        clients: usize,
        make: impl Fn(usize, u64) -> Req + Send + Sync,
    ) -> anyhow::Result<Run> {
        let make = &make;
        // Each client numbers its requests across the warm-up and the measured run.
        let counters: Vec<std::sync::atomic::AtomicU64> = (0..clients)
            .map(|_| std::sync::atomic::AtomicU64::new(0))
            .collect();
        let counters = &counters;
        for (duration, measured) in [(Duration::from_secs(1), false), (self.secs, true)] {
            let deadline = Instant::now() + duration;
            let started = Instant::now();
            let blocks_before = if measured {
                Some(self.pg_counters().await?)
            } else {
                None
            };
            let before = self.meter.sample();
            let mut tasks = Vec::new();
            for (client, counter) in counters.iter().enumerate() {
                let http = &self.http;
                tasks.push(async move {
                    let mut samples = Vec::new();
                    while Instant::now() < deadline {
                        let i = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let answer = http.send(make(client, i)).await;
                        samples.push(answer);
                    }
                    samples
                });
            }
            let answers: Vec<anyhow::Result<Answer>> = futures_util::future::join_all(tasks)
                .await
                .into_iter()
                .flatten()
                .collect();
            if measured {
                let after = self.meter.sample();
                let mut run = Run::new(name, clients, started.elapsed(), answers);
                run.cpu = Some(before.per_request(&after, run.requests));
                if let Some(a) = blocks_before {
                    let b = self.pg_counters().await?;
                    let n = run.requests.max(1) as f64;
                    run.buffers = Some(Buffers {
                        hit_per_request: (b.blks_hit - a.blks_hit) as f64 / n,
                        read_per_request: (b.blks_read - a.blks_read) as f64 / n,
                    });
                }
                return Ok(run);
            }
        }
        unreachable!("the measured run returns")
    }
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Run {
    pub(crate) name: String,
    /// Closed-loop clients (0: open loop).
    pub(crate) clients: usize,
    pub(crate) requests: usize,
    pub(crate) rps: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) p999_ms: f64,
    pub(crate) max_ms: f64,
    /// Answers by status code (a client error is `0`).
    pub(crate) statuses: BTreeMap<u16, usize>,
    /// CPU per request (closed-loop runs).
    pub(crate) cpu: Option<cpu::PerRequest>,
    /// Shared-buffer blocks per request (closed-loop runs).
    pub(crate) buffers: Option<Buffers>,
}

/// Blocks of the bench's database found in Postgres' shared buffers (`hit`) and read from the
/// kernel (`read`: the OS page cache or the disk), per request, from `pg_stat_database`. A
/// backend reports its counts at the end of a transaction at most once a second, so a run's
/// figures are within about a second's worth.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Buffers {
    pub(crate) hit_per_request: f64,
    pub(crate) read_per_request: f64,
}

impl Run {
    pub(crate) fn new(
        name: &str,
        clients: usize,
        wall: Duration,
        answers: Vec<anyhow::Result<Answer>>,
    ) -> Self {
        let mut statuses = BTreeMap::new();
        let mut latencies: Vec<f64> = Vec::with_capacity(answers.len());
        for answer in &answers {
            match answer {
                Ok(a) => {
                    *statuses.entry(a.status).or_insert(0) += 1;
                    latencies.push(a.elapsed.as_secs_f64() * 1000.0);
                }
                Err(_) => *statuses.entry(0).or_insert(0) += 1,
            }
        }
        latencies.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            if latencies.is_empty() {
                return 0.0;
            }
            let rank = ((p * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len());
            latencies[rank - 1]
        };
        Self {
            name: name.to_owned(),
            clients,
            requests: answers.len(),
            rps: answers.len() as f64 / wall.as_secs_f64().max(1e-9),
            p50_ms: pct(0.50),
            p99_ms: pct(0.99),
            p999_ms: pct(0.999),
            max_ms: latencies.last().copied().unwrap_or(0.0),
            statuses,
            cpu: None,
            buffers: None,
        }
    }

    pub(crate) fn errors(&self) -> usize {
        self.statuses
            .iter()
            .filter(|(s, _)| !(200..300).contains(*s))
            .map(|(_, n)| n)
            .sum()
    }
}

pub(crate) fn find<'a>(runs: &'a [Run], name: &str, clients: usize) -> anyhow::Result<&'a Run> {
    runs.iter()
        .find(|r| r.name == name && r.clients == clients)
        .with_context(|| format!("no run {name} at {clients}"))
}
