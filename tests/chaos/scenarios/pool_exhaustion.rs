//! 4. Pool exhaustion.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use raptor_integration_tests::new_key;

use crate::env::{self, Answer, Replica, REQUEST_TIMEOUT_SECS};

use super::{label_counts, Outcome, RowLock, World};

pub(crate) async fn pool_exhaustion(world: &World, secs: u64) -> anyhow::Result<(Outcome, String)> {
    let mut out = Outcome::new("4 pool exhaustion");
    let pool_size = 4;
    let lock_ms = 3_500u64;
    let env = env::base_env(
        &world.cluster.url("postgres"),
        &[
            ("RAPTOR_DB_POOL_SIZE", pool_size.to_string()),
            ("RAPTOR_DB_LOCK_TIMEOUT_MS", lock_ms.to_string()),
            ("RAPTOR_DB_STATEMENT_TIMEOUT_MS", "3800".to_owned()),
        ],
    );
    let mut replica = Replica::spawn(&world.dir, "replica-pool", env).await?;
    let base = replica.base.clone();
    let clients = 40;
    let users = world.users("pool", clients).await?;
    // The driver holds the quote row: every order (which reads it FOR SHARE) waits.
    let lock = RowLock::quote(world, "AAPL").await?;
    let hold = Duration::from_secs(secs);
    let started = Instant::now();
    let mut set = JoinSet::new();
    for user in users.clone() {
        let (http, base) = (world.http.clone(), base.clone());
        set.spawn(async move {
            let mut answers = Vec::new();
            while started.elapsed() < hold {
                answers.push(http.order(&base, &user.token, Some(&new_key())).await);
            }
            answers
        });
    }
    let lock_held = tokio::time::sleep(hold);
    lock_held.await;
    lock.release().await?;
    let mut answers = Vec::new();
    while let Some(joined) = set.join_next().await {
        answers.extend(joined?);
    }
    let limit = Duration::from_secs(REQUEST_TIMEOUT_SECS) + Duration::from_millis(500);
    let slowest = answers.iter().map(|a| a.elapsed).max().unwrap_or_default();
    let mut times: Vec<f64> = answers.iter().map(|a| a.elapsed.as_secs_f64()).collect();
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        times
            .get(((times.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let s503: Vec<&Answer> = answers.iter().filter(|a| a.status == 503).collect();
    let without_retry_after = s503.iter().filter(|a| a.retry_after.is_none()).count();
    let labels = label_counts(answers.iter().cloned());
    out.fact(format!(
        "pool {pool_size} (+{} store), {clients} clients for {secs} s against a held quote lock; answers: {labels}",
        (pool_size / 2).max(2)
    ));
    out.fact(format!(
        "latency p50 {:.2} s, p99 {:.2} s, max {:.2} s (request timeout {REQUEST_TIMEOUT_SECS} s)",
        pct(0.5),
        pct(0.99),
        slowest.as_secs_f64()
    ));
    let retry_afters: BTreeMap<String, usize> = s503.iter().fold(BTreeMap::new(), |mut m, a| {
        *m.entry(format!(
            "{}={}",
            a.code.clone().unwrap_or_default(),
            a.retry_after.clone().unwrap_or_default()
        ))
        .or_default() += 1;
        m
    });
    out.fact(format!("503s by code and Retry-After: {retry_afters:?}"));
    out.check(
        answers.iter().all(|a| a.status != 0),
        "every request got an HTTP answer",
    );
    out.check(
        slowest <= limit,
        format!(
            "every request answered within the request timeout + 0.5 s ({:.2} s)",
            slowest.as_secs_f64()
        ),
    );
    out.check(
        !s503.is_empty(),
        format!("the overload answered 503 ({})", s503.len()),
    );
    out.check(
        without_retry_after == 0,
        format!("every 503 carries Retry-After ({without_retry_after} do not)"),
    );
    let odd = answers
        .iter()
        .filter(|a| !(a.status == 201 || a.status == 503))
        .count();
    out.check(
        odd == 0,
        format!("every answer was 201 or 503 ({odd} others)"),
    );
    // Recovery: the lock is gone; 20 orders, 4 at a time.
    let recovered = Instant::now();
    let mut ok = 0;
    for chunk in users.chunks(4).take(5) {
        let mut set = JoinSet::new();
        for user in chunk {
            let (http, base, token) = (world.http.clone(), base.clone(), user.token.clone());
            set.spawn(async move { http.order(&base, &token, Some(&new_key())).await });
        }
        while let Some(joined) = set.join_next().await {
            if joined?.status == 201 {
                ok += 1;
            }
        }
    }
    out.check(
        ok == 20,
        format!(
            "recovered: {ok}/20 orders succeeded right after the load dropped ({:.2} s)",
            recovered.elapsed().as_secs_f64()
        ),
    );
    let figures = format!(
        "RAPTOR_DB_POOL_SIZE={pool_size}, lock held {secs} s, {clients} clients: {} requests; {labels}; \
         p50 {:.2} s, p99 {:.2} s, max {:.2} s; 503s {retry_afters:?}; 20/20 orders after the lock was released: {}",
        answers.len(),
        pct(0.5),
        pct(0.99),
        slowest.as_secs_f64(),
        ok == 20
    );
    replica.kill9().await?;
    Ok((out, figures))
}
