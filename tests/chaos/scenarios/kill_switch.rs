//! 7. Kill switch flip under load.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use raptor_integration_tests::new_key;

use crate::env::{Answer, Tally, User};

use super::{KeyLedger, Outcome, World};

async fn flag_seen(
    world: &World,
    base: &str,
    probe: &User,
    want_enabled: bool,
    since: Instant,
) -> anyhow::Result<Option<f64>> {
    while since.elapsed() < Duration::from_secs(5) {
        let key = new_key();
        let a = world.http.order(base, &probe.token, Some(&key)).await;
        if a.status == 201 {
            let tracked: bool = sqlx::query_scalar(
                "select exists (select 1 from idempotency_keys where idem_key = $1)",
            )
            .bind(&key)
            .fetch_one(&world.db)
            .await?;
            if tracked == want_enabled {
                return Ok(Some(since.elapsed().as_secs_f64()));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(None)
}

pub(crate) async fn kill_switch(world: &World, secs: u64) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("7 kill switch under load");
    let clients = 24;
    let users = world.users("flag", clients + 3).await?;
    let (load_users, probes) = users.split_at(clients);
    let bases = world.bases();
    let drained = world.warm(&bases).await?;
    out.fact(format!(
        "warm-up: {drained} answers other than 201 drained from the replicas"
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    // Each key is sent once, and again only after a 503 (nothing committed): with the switch off
    // there is no dedup, so a retry of an unknown outcome could legitimately run twice.
    let mut set = JoinSet::new();
    for (i, user) in load_users.iter().enumerate() {
        let (http, base, user, stop, tally) = (
            world.http.clone(),
            bases[i % bases.len()].clone(),
            user.clone(),
            stop.clone(),
            tally.clone(),
        );
        set.spawn(async move {
            let mut ledger: Vec<(String, Vec<Answer>)> = Vec::new();
            for _ in 0..100_000 {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let key = new_key();
                let mut answers = Vec::new();
                for _ in 0..50 {
                    let a = http.order(&base, &user.token, Some(&key)).await;
                    tally.add(a.label());
                    let again = a.status == 503;
                    answers.push(a);
                    if !again {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                ledger.push((key, answers));
            }
            (user.id, ledger)
        });
    }
    let pause = Duration::from_secs(secs / 3);
    for enabled in [false, true] {
        tokio::time::sleep(pause).await;
        let body = format!(r#"{{"enabled":{enabled}}}"#);
        let put = world
            .http
            .send(
                reqwest::Method::PUT,
                &bases[0],
                "/api/admin/flags/FLAG_IDEMPOTENCY_MIDDLEWARE",
                &world.operator.token,
                None,
                Some(body),
            )
            .await;
        let flipped = Instant::now();
        out.check(
            put.status == 200,
            format!("PUT flag enabled={enabled}: {}", put.label()),
        );
        let mut seen = Vec::new();
        for (base, probe) in bases.iter().zip(probes) {
            seen.push(flag_seen(world, base, probe, enabled, flipped).await?);
        }
        let worst = seen
            .iter()
            .map(|s| s.unwrap_or(f64::INFINITY))
            .fold(0.0, f64::max);
        out.check(
            worst <= 1.0,
            format!(
                "every replica saw enabled={enabled} within 1 s (per replica {:?} s)",
                seen.iter()
                    .map(|s| s.map_or("never".to_owned(), |t| format!("{t:.2}")))
                    .collect::<Vec<_>>()
            ),
        );
    }
    tokio::time::sleep(pause).await;
    stop.store(true, Ordering::Release);
    let mut per_user: Vec<(i32, KeyLedger)> = Vec::new();
    while let Some(joined) = set.join_next().await {
        per_user.push(joined?);
    }
    out.fact(format!("{clients} clients; answers: {}", tally.summary()));
    // Per account: orders in the database == keys answered 201; every received id exists.
    let (mut lost, mut extra, mut unanswered) = (0, 0, 0);
    for (user_id, ledger) in &per_user {
        let ids: Vec<String> =
            sqlx::query_scalar("select id::text from paper_orders where user_id = $1")
                .bind(user_id)
                .fetch_all(&world.db)
                .await?;
        let ids: HashSet<String> = ids.into_iter().collect();
        let mut got = 0;
        for (_, answers) in ledger {
            match answers.last() {
                Some(a) if a.status == 201 => {
                    got += 1;
                    if !a.order_id.as_ref().is_some_and(|id| ids.contains(id)) {
                        lost += 1;
                    }
                }
                Some(a) if a.status == 0 => unanswered += 1,
                _ => {}
            }
        }
        if ids.len() != got {
            extra += ids.len().abs_diff(got);
        }
    }
    out.check(
        lost == 0,
        format!("every 201 names a committed order ({lost} do not)"),
    );
    out.check(
        extra == 0 && unanswered == 0,
        format!("orders per account == 201s per account (off by {extra}; {unanswered} requests unanswered)"),
    );
    Ok(out)
}
