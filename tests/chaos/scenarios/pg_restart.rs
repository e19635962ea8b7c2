//! 2. Postgres restarted during keyed load.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::JoinSet;

use raptor_integration_tests::new_key;

use crate::env::{until_final, Answer, Http, Tally, User};

use super::{check_ledger, Outcome, World};

/// Closed-loop keyed load: each client its own user and replica (round robin), a fresh key per
/// order, every non-final answer retried with the same key. Runs until `stop` is set.
pub(crate) async fn keyed_load(
    http: &Http,
    bases: &[String],
    users: &[User],
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> anyhow::Result<BTreeMap<String, Vec<Answer>>> {
    let mut set = JoinSet::new();
    for (i, user) in users.iter().enumerate() {
        let (http, stop, tally, user) = (http.clone(), stop.clone(), tally.clone(), user.clone());
        // Each client favours one replica; its retries go round the others too.
        let mut mine = bases.to_vec();
        mine.rotate_left(i % bases.len());
        set.spawn(async move {
            let mut ledger = BTreeMap::new();
            for _ in 0..100_000 {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let key = new_key();
                let answers = until_final(
                    &http,
                    &mine,
                    &user.token,
                    &key,
                    400,
                    Duration::from_secs(40),
                    Duration::from_millis(100),
                )
                .await;
                for a in &answers {
                    tally.add(a.label());
                }
                ledger.insert(key, answers);
            }
            ledger
        });
    }
    let mut all = BTreeMap::new();
    while let Some(joined) = set.join_next().await {
        all.extend(joined?);
    }
    Ok(all)
}

/// Time until every replica answers readyz 200 and takes an order, from now.
pub(crate) async fn recovery(
    out: &mut Outcome,
    http: &Http,
    bases: &[String],
    probe: &User,
) -> anyhow::Result<Vec<f64>> {
    let started = Instant::now();
    let mut times = Vec::new();
    for base in bases {
        let mut done = None;
        while started.elapsed() < Duration::from_secs(20) {
            if http.readyz(base).await == 200 {
                let a = http.order(base, &probe.token, Some(&new_key())).await;
                if a.status == 201 {
                    done = Some(started.elapsed().as_secs_f64());
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        match done {
            Some(t) => times.push(t),
            None => {
                out.check(false, format!("replica {base} did not recover within 20 s"));
                times.push(f64::INFINITY);
            }
        }
    }
    Ok(times)
}

pub(crate) async fn pg_restart(
    world: &World,
    name: &str,
    bases: &[String],
    load_secs: u64,
) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new(name);
    let clients = 32;
    let users = world.users("restart", clients + 1).await?;
    let (probe, users) = users.split_last().context("users")?;
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let load = {
        let (http, bases, users, stop, tally) = (
            world.http.clone(),
            bases.to_vec(),
            users.to_vec(),
            stop.clone(),
            tally.clone(),
        );
        tokio::spawn(async move { keyed_load(&http, &bases, &users, stop, tally).await })
    };
    let started = Instant::now();
    let modes: &[&str] = &["fast", "immediate"];
    let slot = Duration::from_secs(load_secs / (modes.len() as u64 + 1));
    for mode in modes {
        tokio::time::sleep(slot).await;
        let before = tally.snapshot();
        let down = Instant::now();
        world.cluster.pg_stop(mode)?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        world.cluster.pg_start()?;
        let outage = down.elapsed().as_secs_f64();
        let times = recovery(&mut out, &world.http, bases, probe).await?;
        let after = tally.snapshot();
        let during: Vec<String> = after
            .iter()
            .filter_map(|(k, v)| {
                let d = v - before.get(k).copied().unwrap_or(0);
                (d > 0).then(|| format!("{k}: {d}"))
            })
            .collect();
        out.fact(format!(
            "pg_ctl stop -m {mode} at {:.1} s, start after {outage:.1} s; answers from stop to recovery: {}",
            (down - started).as_secs_f64(),
            during.join(", ")
        ));
        let worst = times.iter().copied().fold(0.0, f64::max);
        out.check(
            worst <= 5.0,
            format!(
                "every replica ready and taking orders {:.2} s after Postgres returned ({mode}; limit 5 s; per replica {:?})",
                worst,
                times.iter().map(|t| format!("{t:.2}")).collect::<Vec<_>>()
            ),
        );
    }
    tokio::time::sleep(slot).await;
    stop.store(true, Ordering::Release);
    let ledger = load.await??;
    out.fact(format!(
        "{clients} clients, {} s of load; all answers: {}",
        started.elapsed().as_secs(),
        tally.summary()
    ));
    let odd: u64 = tally
        .snapshot()
        .iter()
        .filter(|(k, _)| {
            !(k.starts_with("201")
                || k.starts_with("503")
                || k.as_str() == "409 idempotency_in_flight")
        })
        .map(|(_, v)| *v)
        .sum();
    out.check(
        odd == 0,
        format!("every answer was 201, 503 or 409 in flight ({odd} others)"),
    );
    check_ledger(&mut out, &world.db, &ledger).await?;
    Ok(out)
}
