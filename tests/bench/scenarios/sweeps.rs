//! Scenario 8: quote updates that make 2,000 and 20,000 resting orders marketable, timed until
//! every order is filled; the big one again with keyed orders on another symbol before and
//! during it.

use std::time::{Duration, Instant};

use raptor_api::auth::Role;
use raptor_integration_tests::new_key;
use serde::Serialize;

use crate::http::Answer;
use crate::runner::Run;
use crate::setup::{seed_resting, user};
use crate::{Bench, SWEEPS, SWEEP_CLIENTS};

/// Scenario 8: each of [`SWEEPS`] on its own symbol.
pub(crate) async fn scenario(b: &Bench) -> anyhow::Result<Vec<Fill>> {
    let mut fills = Vec::new();
    for (i, &(accounts, per_account, background)) in SWEEPS.iter().enumerate() {
        println!(
            "(8) a quote update sweeping {} resting orders on {accounts} accounts{} ...",
            accounts * per_account,
            if background {
                ", keyed orders alongside"
            } else {
                ""
            }
        );
        let symbol = ["MSFT", "NVDA", "AMD"][i];
        fills.push(
            b.fill_scenario(symbol, accounts, per_account, background)
                .await?,
        );
    }
    Ok(fills)
}

impl Bench {
    /// Scenario 8: `accounts` × `per_account` resting buys of `symbol` at 300; one quote update
    /// to 290 sweeps them (the request sweeps for a quarter of its timeout, the server's
    /// sweeper the rest, one account per transaction). Timed from the update until every order
    /// is filled. With `background`, keyed orders on AAPL run at [`SWEEP_CLIENTS`] clients
    /// before (the baseline) and during the sweep.
    async fn fill_scenario(
        &self,
        symbol: &str,
        accounts: usize,
        per_account: usize,
        background: bool,
    ) -> anyhow::Result<Fill> {
        let resting = accounts * per_account;
        // The quote before the orders, so that setting it sweeps nothing.
        self.quote(symbol, "310.00", "310.10").await?;
        for i in 0..accounts {
            let owner = user(
                &self.pool,
                &format!("bench-resting-{symbol}-{i}@example.com"),
                Role::User,
            )
            .await?;
            seed_resting(&self.pool, owner.id, symbol, "300.00", per_account).await?;
        }
        let baseline = if background {
            Some(
                self.keyed_for(Duration::from_secs(3), "8 keyed orders before the sweep")
                    .await?,
            )
        } else {
            None
        };
        let stop = std::sync::atomic::AtomicBool::new(false);
        let during = async {
            if background {
                Some(
                    self.keyed_until(&stop, "8 keyed orders during the sweep")
                        .await,
                )
            } else {
                None
            }
        };
        let sweep = async {
            let started = Instant::now();
            let answer = self.quote(symbol, "290.00", "290.10").await;
            let body: serde_json::Value = match &answer {
                Ok(a) => serde_json::from_str(&a.body).unwrap_or_default(),
                Err(_) => serde_json::Value::Null,
            };
            let by_request = body["filled_order_ids"].as_array().map_or(0, Vec::len);
            let deadline = Instant::now() + Duration::from_secs(600);
            let mut filled = 0;
            // A refused quote update sweeps nothing: report it now, not after the deadline.
            while answer.is_ok() && Instant::now() < deadline {
                filled = sqlx::query_scalar::<_, i64>(
                    "select count(*) from paper_orders where symbol = $1 and status = 'filled'",
                )
                .bind(symbol)
                .fetch_one(&self.pool)
                .await
                .unwrap_or(0);
                if usize::try_from(filled).unwrap_or(0) >= resting {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            answer.map(|_| (started.elapsed(), filled, by_request))
        };
        let (swept, during) = tokio::join!(sweep, during);
        let (elapsed, filled, by_request) = swept?;
        let ms = elapsed.as_secs_f64() * 1000.0;
        Ok(Fill {
            accounts,
            resting,
            filled: usize::try_from(filled)?,
            filled_by_request: by_request,
            ms,
            orders_per_second: resting as f64 / elapsed.as_secs_f64().max(1e-9),
            keyed_before: baseline,
            keyed_during: during.transpose()?,
        })
    }

    /// Keyed orders on AAPL at [`SWEEP_CLIENTS`] clients for `duration`.
    async fn keyed_for(&self, duration: Duration, name: &str) -> anyhow::Result<Run> {
        let stop = std::sync::atomic::AtomicBool::new(false);
        let run = self.keyed_until(&stop, name);
        let timer = async {
            tokio::time::sleep(duration).await;
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        };
        let (run, ()) = tokio::join!(run, timer);
        run
    }

    /// Keyed orders on AAPL at [`SWEEP_CLIENTS`] clients until `stop` is set.
    async fn keyed_until(
        &self,
        stop: &std::sync::atomic::AtomicBool,
        name: &str,
    ) -> anyhow::Result<Run> {
        let started = Instant::now();
        let tasks = (0..SWEEP_CLIENTS).map(|client| async move {
            let mut answers = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                answers.push(self.http.send(self.order(client, Some(new_key()))).await);
            }
            answers
        });
        let answers: Vec<anyhow::Result<Answer>> = futures_util::future::join_all(tasks)
            .await
            .into_iter()
            .flatten()
            .collect();
        Ok(Run::new(name, SWEEP_CLIENTS, started.elapsed(), answers))
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Fill {
    pub(crate) accounts: usize,
    pub(crate) resting: usize,
    pub(crate) filled: usize,
    /// Filled by the quote update's own request (the rest by the server's sweeper).
    pub(crate) filled_by_request: usize,
    /// From the quote update until every order was filled.
    pub(crate) ms: f64,
    pub(crate) orders_per_second: f64,
    pub(crate) keyed_before: Option<Run>,
    pub(crate) keyed_during: Option<Run>,
}
