//! The periodic jobs `raptor serve` runs beside the API, and [`Jobs`], the tasks it stops once
//! the API has stopped.
//!
//! A [`Job`] is a name (the `schedule` label of `raptor_schedule_runs_total` and
//! `raptor_schedule_last_success_timestamp_seconds`), the warning its failed runs log, and a
//! body: one run, returning a `Result`. [`spawn`] runs it on a [`Cadence`]; the loop, the
//! metric and the warning are there, once for every job. A job logs what a run did itself.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use raptor_api::ApiState;
use sqlx::PgPool;
use tokio::task::{AbortHandle, JoinHandle};

/// When a job runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cadence {
    /// Every period, from the start; a tick missed by a long run is delayed, not made up
    /// (`MissedTickBehavior::Delay`).
    Every(Duration),
    /// Run, and run again at once while a run says more work is waiting ([`Ran::Full`]); else
    /// (and after a failure) wait this long.
    UntilIdle(Duration),
}

/// What a successful run left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    /// Nothing that could run now: wait.
    Idle,
    /// A full batch, so more may be waiting: a [`Cadence::UntilIdle`] job runs again at once.
    Full,
}

/// One periodic job of `raptor serve`.
pub(crate) trait Job: Send + 'static {
    /// The `schedule` label of its metrics.
    const NAME: &'static str;
    /// The warning a failed run logs, with the error.
    const FAILED: &'static str;
    /// What a failed run returns.
    type Error: Display + Send;

    /// One run.
    fn run(&mut self) -> impl Future<Output = Result<Ran, Self::Error>> + Send;

    /// Before each wait, after the run's metric is recorded (not after a full batch).
    fn before_wait(&mut self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Runs `job` on `cadence` until the task is aborted: each run is counted in
/// `raptor_schedule_runs_total{schedule, outcome}` (and a success stamped in
/// `raptor_schedule_last_success_timestamp_seconds`), and a failed one logged as a warning.
pub(crate) fn spawn<J: Job>(mut job: J, cadence: Cadence) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = match cadence {
            Cadence::Every(period) => {
                let mut ticker = tokio::time::interval(period);
                ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                Some(ticker)
            }
            Cadence::UntilIdle(_) => None,
        };
        loop {
            if let Some(ticker) = &mut ticker {
                ticker.tick().await;
            }
            let ran = job.run().await;
            raptor_api::metrics::record_schedule_run(J::NAME, ran.is_ok());
            let full = matches!(ran, Ok(Ran::Full));
            if !full {
                job.before_wait().await;
            }
            if let Err(err) = ran {
                tracing::warn!(error = %err, "{}", J::FAILED);
            }
            match cadence {
                Cadence::UntilIdle(wait) if !full => tokio::time::sleep(wait).await,
                Cadence::UntilIdle(_) | Cadence::Every(_) => {}
            }
        }
    })
}

/// The tasks `raptor serve` runs beside the API (its jobs, the metrics listener and the
/// metrics upkeep), stopped together once the API has stopped.
#[derive(Debug, Default)]
pub(crate) struct Jobs {
    tasks: Vec<AbortHandle>,
}

impl Jobs {
    /// Adds a running task.
    pub(crate) fn add<T>(&mut self, task: JoinHandle<T>) {
        self.tasks.push(task.abort_handle());
    }

    /// Aborts every task, the last added first. Nothing is lost: a sweep cut short rolls back
    /// and stays queued for the next sweeper; a message being sent when aborted rolls back and
    /// stays due (docs: at least once).
    pub(crate) fn stop(self) {
        for task in self.tasks.into_iter().rev() {
            task.abort();
        }
    }
}

/// Runs the retention cleanup ([`raptor_api::retention::delete_expired`]: expired keys, sent
/// outbox messages, spent sign-in links, old Stripe event ids) every `every`, in batches of
/// 1,000 rows.
pub fn spawn_cleanup(pool: PgPool, every: Duration) -> JoinHandle<()> {
    spawn(Cleanup { pool }, Cadence::Every(every))
}

struct Cleanup {
    pool: PgPool,
}

impl Job for Cleanup {
    const NAME: &'static str = "cleanup";
    const FAILED: &'static str = "retention cleanup failed";
    type Error = sqlx::Error;

    async fn run(&mut self) -> Result<Ran, sqlx::Error> {
        let deleted = raptor_api::retention::delete_expired(&self.pool, 1000).await?;
        tracing::info!(
            idempotency_keys = deleted.idempotency_keys,
            email_outbox = deleted.email_outbox,
            sign_in_links = deleted.sign_in_links,
            stripe_events = deleted.stripe_events,
            quote_events = deleted.quote_events,
            "retention cleanup"
        );
        Ok(Ran::Idle)
    }
}

/// Expires due orders every `every` (day orders at the close, even on accounts nobody touches).
pub fn spawn_order_expiry(state: ApiState, every: Duration) -> JoinHandle<()> {
    spawn(OrderExpiry { state }, Cadence::Every(every))
}

struct OrderExpiry {
    state: ApiState,
}

impl Job for OrderExpiry {
    const NAME: &'static str = "order_expiry";
    const FAILED: &'static str = "order expiry failed";
    type Error = raptor_api::ApiError;

    async fn run(&mut self) -> Result<Ran, raptor_api::ApiError> {
        let done = raptor_api::trading::expire_orders(&self.state).await?;
        if done != raptor_api::trading::Expired::default() {
            tracing::info!(
                expired = done.orders,
                settled = done.settled,
                awaiting_quote = done.awaiting_quote,
                "expired open orders and settled expired option positions"
            );
        }
        Ok(Ran::Idle)
    }
}

/// Works pending quote sweeps ([`raptor_api::trading::sweep_quotes`]) until none is ready, then
/// waits `every`: each sweep is one account's transaction, taken with `SKIP LOCKED`, so the
/// sweepers of every replica share the work.
pub fn spawn_quote_sweeper(state: ApiState, every: Duration) -> JoinHandle<()> {
    spawn(QuoteSweeper { state }, Cadence::UntilIdle(every))
}

struct QuoteSweeper {
    state: ApiState,
}

impl Job for QuoteSweeper {
    const NAME: &'static str = "quote_sweep";
    const FAILED: &'static str = "quote sweep failed; retried";
    type Error = raptor_api::ApiError;

    async fn run(&mut self) -> Result<Ran, raptor_api::ApiError> {
        // A run already works until no sweep is ready: it always waits afterwards.
        let swept = raptor_api::trading::sweep_quotes(&self.state).await?;
        if swept > 0 {
            tracing::debug!(swept, "quote sweeps");
        }
        Ok(Ran::Idle)
    }
}

/// Messages one pass of the serving relay handles at most.
const MAIL_BATCH: u64 = 100;

/// Sends due sign-in email ([`raptor_api::mail::Relay::run_pass`]) until none is due, then
/// waits `every`: each message is its own transaction, taken with `SKIP LOCKED`, so the relays
/// of every replica share the queue and never send one message twice.
pub fn spawn_mail_relay(
    pool: PgPool,
    relay: raptor_api::mail::Relay,
    every: Duration,
) -> JoinHandle<()> {
    spawn(MailRelay { pool, relay }, Cadence::UntilIdle(every))
}

struct MailRelay {
    pool: PgPool,
    relay: raptor_api::mail::Relay,
}

impl Job for MailRelay {
    const NAME: &'static str = "mail_relay";
    const FAILED: &'static str = "mail relay failed; retried";
    type Error = sqlx::Error;

    async fn run(&mut self) -> Result<Ran, sqlx::Error> {
        let pass = self.relay.run_pass(&self.pool, MAIL_BATCH).await?;
        if pass.total() == MAIL_BATCH {
            return Ok(Ran::Full);
        }
        if pass.total() > 0 {
            tracing::debug!(
                sent = pass.sent,
                retried = pass.retried,
                given_up = pass.given_up,
                "mail relay"
            );
        }
        Ok(Ran::Idle)
    }

    /// Samples the queue once per idle wait, not per full batch.
    async fn before_wait(&mut self) {
        if let Err(err) = raptor_api::mail::Relay::sample_backlog(&self.pool).await {
            tracing::warn!(error = %err, "could not read the mail queue's size");
        }
    }
}
