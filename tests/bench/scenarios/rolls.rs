//! Scenario 5: an LCC roll with a fresh key (each user rolls its short call back and forth).

use std::borrow::Cow;

use anyhow::bail;
use raptor_integration_tests::{new_key, ORDERS};

use crate::http::Req;
use crate::runner::Run;
use crate::{Bench, LEAPS, LEVELS, NEAR, NEXT, USERS};

/// Scenario 5 at each of [`LEVELS`].
pub(crate) async fn scenario(b: &Bench) -> anyhow::Result<Vec<Run>> {
    let mut runs = Vec::new();
    println!("(5) LCC rolls ...");
    for &clients in &LEVELS {
        // Every user starts short the near call (its client's first roll goes near -> next).
        b.lcc_positions().await?;
        let run = b
            .closed("5 roll", clients, |user, i| b.roll(user, i))
            .await?;
        runs.push(run);
    }
    Ok(runs)
}

impl Bench {
    /// Every user's account reset, then 1 LEAPS long and 1 near call short.
    async fn lcc_positions(&self) -> anyhow::Result<()> {
        for user in 0..USERS {
            let reset = self
                .http
                .send(Req {
                    method: reqwest::Method::POST,
                    path: "/api/trading/account/reset".to_owned(),
                    token: self.users[user].token.clone(),
                    key: None,
                    body: Some(Cow::Borrowed("{}")),
                })
                .await?;
            if reset.status != 200 {
                bail!("reset: {} {}", reset.status, reset.body);
            }
            for body in [
                format!(
                    r#"{{"symbol":"{LEAPS}","qty":"1","side":"buy","type":"market","position_intent":"buy_to_open"}}"#
                ),
                format!(
                    r#"{{"symbol":"{NEAR}","qty":"1","side":"sell","type":"market","position_intent":"sell_to_open"}}"#
                ),
            ] {
                let answer = self
                    .http
                    .send(Req {
                        method: reqwest::Method::POST,
                        path: ORDERS.to_owned(),
                        token: self.users[user].token.clone(),
                        key: None,
                        body: Some(Cow::Owned(body)),
                    })
                    .await?;
                if answer.status != 201 {
                    bail!("LCC set-up: {} {}", answer.status, answer.body);
                }
            }
        }
        Ok(())
    }

    /// The i-th roll of `user`: near to next, then back (each user's client alternates).
    fn roll(&self, user: usize, i: u64) -> Req {
        let (from, to) = if i.is_multiple_of(2) {
            (NEAR, NEXT)
        } else {
            (NEXT, NEAR)
        };
        let body = if to == NEXT {
            r#"{"to_symbol":"XYZ270115C00067500","qty":"1"}"#
        } else {
            r#"{"to_symbol":"XYZ261218C00065000","qty":"1"}"#
        };
        Req {
            method: reqwest::Method::POST,
            path: format!("/api/trading/positions/{from}/roll"),
            token: self.users[user % USERS].token.clone(),
            key: Some(new_key()),
            body: Some(Cow::Borrowed(body)),
        }
    }
}
