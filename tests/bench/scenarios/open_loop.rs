//! Scenario 6: open loop (a fixed arrival rate) at half of scenario 2's 32-client throughput.

use std::time::{Duration, Instant};

use anyhow::Context;
use raptor_integration_tests::new_key;
use tokio::task::JoinSet;

use crate::runner::{find, Run};
use crate::Bench;

/// Scenario 6, at half the rate scenario 2 reached at 32 clients in `runs`.
pub(crate) async fn scenario(b: &Bench, runs: &[Run]) -> anyhow::Result<Run> {
    let max_rps = find(runs, "2 fresh key", 32)?.rps;
    let rate = (max_rps / 2.0).max(1.0);
    println!("(6) open loop at {rate:.0} req/s ...");
    b.open_loop(rate).await
}

impl Bench {
    /// Scenario 6: requests at a fixed rate, each on its own task, whatever the answers do.
    async fn open_loop(&self, rate: f64) -> anyhow::Result<Run> {
        let interval = Duration::from_secs_f64(1.0 / rate);
        let count = (rate * self.secs.as_secs_f64()) as u64;
        let started = Instant::now();
        let mut tasks = JoinSet::new();
        for i in 0..count {
            tokio::time::sleep_until((started + interval.mul_f64(i as f64)).into()).await;
            let (http, req) = (self.http.clone(), self.order(i as usize, Some(new_key())));
            tasks.spawn(async move { http.send(req).await });
        }
        let mut answers = Vec::new();
        while let Some(answer) = tasks.join_next().await {
            answers.push(answer.context("open-loop task")?);
        }
        Ok(Run::new(
            "6 open loop, half of max",
            0,
            started.elapsed(),
            answers,
        ))
    }
}
