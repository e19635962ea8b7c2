//! Scenarios 1-3 (a market order without a key, with a fresh key, the replay of a completed
//! key; at 1 and 32 clients), and the statements per order counted through the proxy.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::bail;
use raptor_integration_tests::new_key;

use crate::http::Req;
use crate::runner::Run;
use crate::{Bench, LEVELS, USERS};

/// Statements and pool pings per order, unkeyed and keyed, through the counting proxy.
pub(crate) async fn statement_counts(b: &Bench) -> anyhow::Result<BTreeMap<&'static str, f64>> {
    println!("statements per order, through the counting proxy ...");
    let mut round_trips = BTreeMap::new();
    let (statements, pings) = b.count_statements(|user| b.order(user, None)).await?;
    round_trips.insert("unkeyed", statements);
    round_trips.insert("unkeyed_pool_pings", pings);
    let (statements, pings) = b
        .count_statements(|user| b.order(user, Some(new_key())))
        .await?;
    round_trips.insert("keyed", statements);
    round_trips.insert("keyed_pool_pings", pings);
    Ok(round_trips)
}

/// Scenarios 1-3 at each of [`LEVELS`], in that order.
pub(crate) async fn scenarios(b: &Bench) -> anyhow::Result<Vec<Run>> {
    let mut runs = Vec::new();
    for &clients in &LEVELS {
        println!("(1) no key, {clients} clients ...");
        let run = b
            .closed("1 no key", clients, |user, _| b.order(user, None))
            .await?;
        runs.push(run);
        println!("(2) fresh key, {clients} clients ...");
        let run = b
            .closed("2 fresh key", clients, |user, _| {
                b.order(user, Some(new_key()))
            })
            .await?;
        runs.push(run);
        println!("(3) replay, {clients} clients ...");
        let keys = b.completed_keys().await?;
        let run = b
            .closed("3 replay", clients, |user, _| {
                b.order(user, Some(keys[user].clone()))
            })
            .await?;
        runs.push(run);
    }
    Ok(runs)
}

impl Bench {
    /// Statements and pool pings per request of `make(user)`, through the counting proxy: 200
    /// requests one after the other after 20 to warm up.
    async fn count_statements(&self, make: impl Fn(usize) -> Req) -> anyhow::Result<(f64, f64)> {
        for user in 0..20 {
            self.counted.send(make(user)).await?;
        }
        let (round_trips, pings) = (self.counts.round_trips(), self.counts.pings());
        let n = 200;
        for user in 0..n {
            let answer = self.counted.send(make(user)).await?;
            if !(200..300).contains(&answer.status) {
                bail!("counting run: {} {}", answer.status, answer.body);
            }
        }
        // sqlx pings a connection as it goes back to the pool, after the answer: let the last
        // request's pings arrive.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let per = |d: u64| d as f64 / n as f64;
        Ok((
            per(self.counts.round_trips() - round_trips),
            per(self.counts.pings() - pings),
        ))
    }

    /// One completed key per user, for replays.
    async fn completed_keys(&self) -> anyhow::Result<Vec<String>> {
        let mut keys = Vec::with_capacity(USERS);
        for user in 0..USERS {
            let key = new_key();
            let answer = self.http.send(self.order(user, Some(key.clone()))).await?;
            if answer.status != 201 {
                bail!("replay set-up: {} {}", answer.status, answer.body);
            }
            keys.push(key);
        }
        Ok(keys)
    }
}
