//! Scenario 7: a fresh key (1 client) for an account holding 500 resting orders (the
//! per-account cap), request by request alternating with one for an account without any.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use raptor_api::auth::Role;
use raptor_integration_tests::{new_key, ORDERS, ORDER_BODY};

use crate::http::{Answer, Req};
use crate::runner::Run;
use crate::setup::{seed_resting, user};
use crate::{Bench, CAPPED};

/// Scenario 7: the capped account's run, then the empty book's.
pub(crate) async fn scenario(b: &Bench) -> anyhow::Result<[Run; 2]> {
    println!(
        "(7) fresh key on an account with {CAPPED} resting orders, alternating with one without ..."
    );
    let capped = user(&b.pool, "bench-capped@example.com", Role::User).await?;
    seed_resting(&b.pool, capped.id, "NFLX", "300.00", CAPPED).await?;
    let empty = user(&b.pool, "bench-empty-book@example.com", Role::User).await?;
    let tokens = [capped.token.clone(), empty.token.clone()];
    let (book, empty_book) = b
        .alternating(
            ["7 fresh key, 500 resting", "7 fresh key, empty book"],
            |which| Req {
                method: reqwest::Method::POST,
                path: ORDERS.to_owned(),
                token: tokens[which].clone(),
                key: Some(new_key()),
                body: Some(Cow::Borrowed(ORDER_BODY)),
            },
        )
        .await?;
    Ok([book, empty_book])
}

impl Bench {
    /// One client alternating two kinds of request (`make(0)`, then `make(1)`) for twice the
    /// run's length after a second's warm-up: two runs that met the same tables, the same
    /// checkpoints and the same neighbours, so their ratio is what tells them apart. Each run's
    /// throughput is over the time its own requests took.
    async fn alternating(
        &self,
        names: [&str; 2],
        make: impl Fn(usize) -> Req,
    ) -> anyhow::Result<(Run, Run)> {
        let warm_up = Instant::now() + Duration::from_secs(1);
        while Instant::now() < warm_up {
            for which in 0..2 {
                let _ = self.http.send(make(which)).await;
            }
        }
        let deadline = Instant::now() + self.secs * 2;
        let mut answers: [Vec<anyhow::Result<Answer>>; 2] = [Vec::new(), Vec::new()];
        let mut spent = [Duration::ZERO; 2];
        while Instant::now() < deadline {
            for which in 0..2 {
                let started = Instant::now();
                answers[which].push(self.http.send(make(which)).await);
                spent[which] += started.elapsed();
            }
        }
        let [a, b] = answers;
        Ok((
            Run::new(names[0], 1, spent[0], a),
            Run::new(names[1], 1, spent[1], b),
        ))
    }
}
