//! 3. Duplicates across replicas.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use raptor_integration_tests::new_key;

use crate::env::{until_final, Answer, Tally, User};

use super::{check_ledger, Outcome, World};

pub(crate) async fn duplicates(
    world: &World,
    name: &str,
    bases: &[String],
    keys: usize,
) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new(name);
    let copies = 8;
    let users = world.users("dup", 40).await?;
    let drained = world.warm(bases).await?;
    out.fact(format!(
        "warm-up: {drained} answers other than 201 drained from the replicas"
    ));
    let started = Instant::now();
    let tally = Arc::new(Tally::default());
    let mut ledger: BTreeMap<String, Vec<Answer>> = BTreeMap::new();
    let keyset: Vec<(String, User)> = (0..keys)
        .map(|i| (new_key(), users[i % users.len()].clone()))
        .collect();
    // 12 keys (96 requests) in flight at a time; the 8 copies of a key go out together.
    for chunk in keyset.chunks(12) {
        let mut set = JoinSet::new();
        for (key, user) in chunk {
            for c in 0..copies {
                let (http, base, key, token) = (
                    world.http.clone(),
                    bases[c % bases.len()].clone(),
                    key.clone(),
                    user.token.clone(),
                );
                set.spawn(async move {
                    let a = http.order(&base, &token, Some(&key)).await;
                    (key, a)
                });
            }
        }
        while let Some(joined) = set.join_next().await {
            let (key, a) = joined?;
            tally.add(a.label());
            ledger.entry(key).or_default().push(a);
        }
    }
    let burst = started.elapsed().as_secs_f64();
    out.fact(format!(
        "{keys} keys x {copies} copies over {} replicas in {burst:.1} s: {}",
        bases.len(),
        tally.summary()
    ));
    let mut originals = 0;
    let mut bad = 0;
    for answers in ledger.values() {
        for a in answers {
            let first = a.status == 201 && a.replayed.as_deref() == Some("false");
            let dup_ok = (a.status == 201 && a.replayed.as_deref() == Some("true"))
                || (a.status == 409 && a.code.as_deref() == Some("idempotency_in_flight"));
            if first {
                originals += 1;
            } else if !dup_ok {
                bad += 1;
            }
        }
    }
    out.check(
        originals <= keys,
        format!("at most one first execution answer per key ({originals} for {keys} keys)"),
    );
    out.check(
        bad == 0,
        format!(
            "every duplicate got the replay or 409 idempotency_in_flight ({bad} other answers)"
        ),
    );
    // Requests here take milliseconds, far below the stale threshold: an attempt fenced off
    // (its completion found the key taken over) or a key taken over as stale means two
    // attempts of one key ran at once.
    let overlapping = ledger
        .values()
        .flatten()
        .filter(|a| {
            a.message.as_deref().is_some_and(|m| {
                m.contains("outlived the stale threshold") || m.contains("abandoned attempt")
            })
        })
        .count();
    out.check(
        overlapping == 0,
        format!("no attempt was fenced off or taken over as stale ({overlapping})"),
    );
    // Keys nobody executed (every copy saw another in flight that then rolled back) are
    // finished now, sequentially, so the count below is exact.
    let mut followed = 0;
    for (key, user) in &keyset {
        let answers = ledger.entry(key.clone()).or_default();
        if answers.iter().any(|a| a.status == 201) {
            continue;
        }
        followed += 1;
        let more = until_final(
            &world.http,
            bases,
            &user.token,
            key,
            100,
            Duration::from_secs(20),
            Duration::from_millis(200),
        )
        .await;
        answers.extend(more);
    }
    out.fact(format!(
        "{followed} keys had no 201 in the burst and were retried until final"
    ));
    let made = check_ledger(&mut out, &world.db, &ledger).await?;
    let executions: usize = made.values().map(Vec::len).sum();
    out.check(
        executions == keys,
        format!("exactly {keys} executions ({executions} orders in the database)"),
    );
    Ok(out)
}
