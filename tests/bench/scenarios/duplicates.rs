//! Scenario 4: 16 concurrent copies of each key (16 and 32 requests in flight): exactly one
//! execution per key, no 5xx.

use std::time::Instant;

use anyhow::Context;
use raptor_integration_tests::new_key;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::runner::Run;
use crate::{Bench, COPIES};

/// Scenario 4 with one key, then two, in flight at a time.
pub(crate) async fn scenario(b: &Bench) -> anyhow::Result<Vec<Duplicates>> {
    println!("(4) {COPIES} copies of each key ...");
    let mut duplicates = Vec::new();
    for groups in [1, 2] {
        duplicates.push(b.duplicates(groups).await?);
    }
    Ok(duplicates)
}

impl Bench {
    /// Scenario 4: rounds of `groups` keys × 16 copies in flight together, for the duration.
    async fn duplicates(&self, groups: usize) -> anyhow::Result<Duplicates> {
        let deadline = Instant::now() + self.secs;
        let started = Instant::now();
        let mut keys = Vec::new();
        let mut answers = Vec::new();
        while Instant::now() < deadline {
            let mut tasks = JoinSet::new();
            for group in 0..groups {
                let key = new_key();
                keys.push(key.clone());
                for _ in 0..COPIES {
                    let (http, req) = (self.http.clone(), self.order(group, Some(key.clone())));
                    tasks.spawn(async move { http.send(req).await });
                }
            }
            while let Some(answer) = tasks.join_next().await {
                answers.push(answer.context("duplicate task")?);
            }
        }
        let executions: Vec<i64> = sqlx::query_scalar(
            "select count(o.id) from unnest($1::text[]) k(key)
               left join paper_orders o on o.idempotency_key = k.key
              group by k.key",
        )
        .bind(&keys)
        .fetch_all(&self.pool)
        .await
        .context("count executions")?;
        let run = Run::new(
            "4 copies of each key",
            groups * COPIES,
            started.elapsed(),
            answers,
        );
        Ok(Duplicates {
            in_flight: groups * COPIES,
            keys: keys.len(),
            exactly_once: executions.iter().all(|&n| n == 1) && executions.len() == keys.len(),
            server_errors: run
                .statuses
                .iter()
                .filter(|(s, _)| **s >= 500)
                .map(|(_, n)| n)
                .sum(),
            run,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Duplicates {
    pub(crate) in_flight: usize,
    pub(crate) keys: usize,
    pub(crate) exactly_once: bool,
    pub(crate) server_errors: usize,
    pub(crate) run: Run,
}
