//! 6. Slow database.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::task::JoinSet;

use raptor_integration_tests::new_key;

use crate::env::{self, Answer, REQUEST_TIMEOUT_SECS, STALE_AFTER_SECS};

use super::{label_counts, orders_by_key, Outcome, World};

pub(crate) async fn slow_database(world: &World) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("6 slow database");
    // The configuration refuses a stale threshold below the request timeout (every command that
    // uses the timeouts checks them; `migrate` does not use them, so it is not asked).
    let refused = env::raptor_cli(
        &env::base_env(
            &world.cluster.url("postgres"),
            &[
                ("IDEMPOTENCY_STALE_AFTER_SECS", "2".to_owned()),
                ("RAPTOR_REQUEST_TIMEOUT_SECS", "4".to_owned()),
            ],
        ),
        &["orders", "expire"],
    )
    .await;
    out.check(
        refused
            .as_ref()
            .err()
            .is_some_and(|e| e.to_string().contains("IDEMPOTENCY_STALE_AFTER_SECS")),
        "a stale threshold below the request timeout is refused at start-up",
    );
    out.check(
        STALE_AFTER_SECS > REQUEST_TIMEOUT_SECS,
        format!("replicas run with stale {STALE_AFTER_SECS} s > request timeout {REQUEST_TIMEOUT_SECS} s"),
    );
    let users = world.users("slow", 12).await?;
    let bases = world.bases();
    let drained = world.warm(&bases).await?;
    out.fact(format!(
        "warm-up: {drained} answers other than 201 drained from the replicas"
    ));
    let mut all: Vec<Answer> = Vec::new();
    let mut ledger: BTreeMap<String, Vec<Answer>> = BTreeMap::new();
    for (delay, label) in [
        ("1.5", "each fill insert sleeps 1.5 s"),
        ("6", "each fill insert sleeps 6 s"),
    ] {
        sqlx::query(&format!(
            "create or replace function chaos_slow() returns trigger language plpgsql as
             $$ begin perform pg_sleep({delay}); return new; end $$"
        ))
        .execute(&world.db)
        .await?;
        sqlx::query(
            "create or replace trigger chaos_slow before insert on paper_fills
             for each row execute function chaos_slow()",
        )
        .execute(&world.db)
        .await?;
        // 12 keys, each sent once; then duplicates of each every 400 ms while it may run.
        let mut set = JoinSet::new();
        for (i, user) in users.iter().enumerate() {
            let (http, bases, user) = (world.http.clone(), bases.clone(), user.clone());
            set.spawn(async move {
                let key = new_key();
                let first = {
                    let (http, base, token, key) = (
                        http.clone(),
                        bases[i % bases.len()].clone(),
                        user.token.clone(),
                        key.clone(),
                    );
                    tokio::spawn(async move { http.order(&base, &token, Some(&key)).await })
                };
                let mut answers = Vec::new();
                for j in 0..10 {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                    if first.is_finished() {
                        break;
                    }
                    answers.push(
                        http.order(&bases[(i + j + 1) % bases.len()], &user.token, Some(&key))
                            .await,
                    );
                }
                let first = first.await.map_err(anyhow::Error::from)?;
                answers.insert(0, first);
                Ok::<_, anyhow::Error>((key, answers))
            });
        }
        let mut round = Vec::new();
        while let Some(joined) = set.join_next().await {
            let (key, answers) = joined??;
            round.extend(answers.iter().cloned());
            ledger.insert(key, answers);
        }
        let slowest = round.iter().map(|a| a.elapsed).max().unwrap_or_default();
        out.check(
            slowest >= Duration::from_millis(1400),
            format!(
                "the injected delay was felt ({label}: slowest {:.2} s)",
                slowest.as_secs_f64()
            ),
        );
        out.fact(format!(
            "{label}: {} requests, slowest {:.2} s; {}",
            round.len(),
            slowest.as_secs_f64(),
            label_counts(round.iter().cloned())
        ));
        all.extend(round);
    }
    sqlx::query("drop trigger chaos_slow on paper_fills")
        .execute(&world.db)
        .await?;
    let limit = Duration::from_secs(REQUEST_TIMEOUT_SECS) + Duration::from_millis(500);
    let slowest = all.iter().map(|a| a.elapsed).max().unwrap_or_default();
    out.check(
        slowest <= limit,
        format!(
            "no request ran past the request timeout + 0.5 s (slowest {:.2} s of {})",
            slowest.as_secs_f64(),
            all.len()
        ),
    );
    let stale = all
        .iter()
        .filter(|a| {
            a.code.as_deref() == Some("idempotency_in_flight")
                && a.retry_after.as_deref() == Some("0")
        })
        .count();
    out.check(
        stale == 0,
        format!("no key was taken over as stale while its first attempt ran ({stale})"),
    );
    let keys: Vec<String> = ledger.keys().cloned().collect();
    let made = orders_by_key(&world.db, &keys).await?;
    let twice = made.values().filter(|v| v.len() > 1).count();
    out.check(twice == 0, format!("no key executed twice ({twice})"));
    let unacked = ledger
        .iter()
        .filter(|(k, answers)| {
            !answers.iter().any(|a| a.status == 201) && made.get(*k).is_some_and(|v| !v.is_empty())
        })
        .count();
    out.check(
        unacked == 0,
        format!("no key whose every answer was an error made an order ({unacked})"),
    );
    Ok(out)
}
