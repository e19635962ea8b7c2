//! The [`Claim`]: the winning request's one transaction. Business writes and audit rows go
//! through [`Claim::conn`] (or the work of [`Claim::run`] / [`Claim::run_completing`]); only the
//! claim's finish commits, once the response is stored on the key row (by its own statement,
//! or by the work's, [`completion`]); every other exit rolls back and releases (or fails) the
//! key. Getting a claim is
//! [`round`] (the claim round) and [`judge`] (the answer for a key someone else holds).

mod completion;
mod guard;
mod judge;
mod round;

pub use completion::{Answer, Completed, Completer, PendingCompletion};
use completion::{Completion, Written};

pub(crate) use guard::{settle, KeyGuard, Settle, Tracked};
pub use round::ClaimRequest;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sqlx::{PgConnection, Postgres, Transaction};
use tracing::Instrument;
use uuid::Uuid;

use crate::key::IdempotencyKey;
use crate::outcome::Outcome;
use crate::reply::{error_body, error_response, ErrorReply, Refusal, Reply, REPLAYED_HEADER};

/// Owns the winner's transaction. There is no way to commit it except [`Claim::finish`], and
/// dropping it rolls back: at-most-once execution is a property of the type.
pub struct Claim {
    tx: Transaction<'static, Postgres>,
    guard: KeyGuard,
    endpoint: String,
    key: Option<IdempotencyKey>,
    instrumented: bool,
}

impl Claim {
    pub(crate) fn new(
        tx: Transaction<'static, Postgres>,
        guard: KeyGuard,
        endpoint: String,
        key: Option<IdempotencyKey>,
        instrumented: bool,
    ) -> Self {
        Self {
            tx,
            guard,
            endpoint,
            key,
            instrumented,
        }
    }

    /// The transaction, for the handler's business writes and audit rows.
    pub fn conn(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    /// The request's key, when it sent a valid one (tracked, or untracked because the kill
    /// switch is off or the store was unreachable on a fail-open route).
    pub fn key(&self) -> Option<IdempotencyKey> {
        self.key
    }

    /// The key row's lineage, when this claim guards one: the same for every attempt of one key
    /// within its retention (a released or stale attempt's retry gets it again), different for
    /// a key reused after it expired. Derive downstream dedup ids (a broker's client order id,
    /// Stripe's `Idempotency-Key`) from it: it is random, so it never exposes the client's key.
    pub fn lineage(&self) -> Option<Uuid> {
        self.guard.tracked.map(|tracked| tracked.lineage)
    }

    /// Whether this claim guards a key row (false for passthrough and fail-open).
    pub fn is_tracked(&self) -> bool {
        self.guard.tracked.is_some()
    }

    /// Runs the handler's `work` on the claim's transaction, then [`Claim::finish`]es with its
    /// result: the shape of every instrumented handler,
    /// `claim.run(async |tx| book::place(tx, …).await.map(created)).await`. `work` gets the
    /// transaction and nothing else, so it cannot reach a pool and write outside it.
    ///
    /// `work` runs in a span of its own, `business.transaction` (a child of the claim's
    /// request span, like the claim and the finish).
    pub async fn run<E, F>(mut self, work: F) -> Response
    where
        E: ErrorReply,
        F: AsyncFnOnce(&mut PgConnection) -> Result<Reply, E>,
    {
        let span = tracing::info_span!(
            "business.transaction",
            endpoint = %self.endpoint,
            tracked = self.is_tracked()
        );
        let result = work(self.conn()).instrument(span).await;
        self.finish(result).await
    }

    /// [`Claim::run`] for work whose last statement also completes the key: `work` gets a
    /// [`Completer`] with the transaction, prepares the completion of the answer it will
    /// return, binds it into that statement, and returns the [`Completed`] answer
    /// ([`PendingCompletion`] says how). An answer returned as a plain [`Reply`] (a refusal, a
    /// statement that wrote nothing) is completed by the claim as in [`Claim::run`].
    pub async fn run_completing<E, F>(mut self, work: F) -> Response
    where
        E: ErrorReply,
        F: AsyncFnOnce(&mut PgConnection, Completer<'_>) -> Result<Answer, E>,
    {
        let span = tracing::info_span!(
            "business.transaction",
            endpoint = %self.endpoint,
            tracked = self.is_tracked()
        );
        let Claim {
            tx,
            guard,
            endpoint,
            ..
        } = &mut self;
        let completer = Completer {
            tracked: guard.tracked,
            endpoint,
            keys: guard.keys(),
        };
        let result = work(tx, completer).instrument(span).await;
        self.end(result).await
    }

    /// Ends the request.
    ///
    /// - `Ok(reply)` below 500 is committed with the handler's writes, and stored on the key
    ///   in the same transaction; a business rejection whose writes must be kept (its audit
    ///   row) is spelled `Ok(Reply::rejected(err))`.
    /// - `Err(err)` below 500 keeps nothing the handler wrote: the transaction rolls back, and
    ///   the answer is stored on the key in a statement of its own (fenced like any
    ///   completion), so it is replayed all the same.
    /// - A 500-class result rolls back and marks the key failed, except one whose retry may
    ///   run ([`ErrorReply::releases_key`]: a 503 that says "retry later", an upstream outcome
    ///   the retry deduplicates upstream), which releases it.
    ///
    /// Every answer carries `Idempotent-Replayed: false`. If the attempt was fenced off as
    /// stale meanwhile, the completion matches no row and nothing commits.
    pub async fn finish<E: ErrorReply>(self, result: Result<Reply, E>) -> Response {
        self.end(result.map(Answer::Reply)).await
    }

    /// [`Claim::finish`] for either kind of [`Answer`].
    #[tracing::instrument(
        skip_all,
        fields(endpoint = %self.endpoint, tracked = self.is_tracked(), otel.name = "idempotency.finish")
    )]
    async fn end<E: ErrorReply>(self, result: Result<Answer, E>) -> Response {
        let Claim {
            tx,
            mut guard,
            endpoint,
            instrumented,
            ..
        } = self;
        let replayed = instrumented.then_some(false);
        let (answer, keep_writes) = match result {
            Ok(answer) => (answer, true),
            Err(err) if err.status().is_server_error() => {
                rollback(tx).await;
                guard.settle_error(err.releases_key()).await;
                return mark(err.into_response(), replayed);
            }
            Err(err) => (Answer::Reply(Reply::rejected(&err)), false),
        };
        let status = answer.reply().status;
        if status.is_server_error() {
            rollback(tx).await;
            guard
                .settle_error(status == StatusCode::SERVICE_UNAVAILABLE)
                .await;
            return answer.into_reply().into_response_with(replayed);
        }
        if keep_writes {
            commit(tx, guard, &endpoint, answer, replayed).await
        } else {
            rollback(tx).await;
            complete_alone(guard, &endpoint, answer.into_reply(), replayed).await
        }
    }
}

/// The answer to an attempt fenced off after going stale: nothing of it committed.
fn fenced(endpoint: &str, id: i64, replayed: Option<bool>) -> Response {
    tracing::warn!(%endpoint, idempotency_key_id = id, "attempt fenced off after going stale; rolled back");
    mark(
        Refusal::InFlight {
            retry_after_ms: 1000,
            message: "this attempt outlived the stale threshold and was rolled back; retry with \
                      the same key",
        }
        .into_response(),
        replayed,
    )
}

/// Completes the key in the business transaction `tx` (unless the work's statement did) and
/// commits the two together.
async fn commit(
    mut tx: Transaction<'static, Postgres>,
    mut guard: KeyGuard,
    endpoint: &str,
    answer: Answer,
    replayed: Option<bool>,
) -> Response {
    let (reply, written) = match answer {
        Answer::Completed(Completed { reply, written }) => (reply, Some(written)),
        Answer::Reply(reply) => (reply, None),
    };
    if let Some(tracked) = guard.tracked {
        let rows = match written {
            Some(Written::Rows(rows)) => rows,
            Some(Written::SealFailed(err)) => {
                return unsealed(tx, guard, endpoint, err, replayed).await
            }
            // Nothing written although the claim guards a row (not a completer's answer): the
            // claim's own statement.
            Some(Written::Nothing) | None => {
                let completion = match Completion::new(&tracked, endpoint, &reply, guard.keys()) {
                    Ok(completion) => completion,
                    Err(err) => return unsealed(tx, guard, endpoint, err, replayed).await,
                };
                match completion.write(&mut tx).await {
                    Ok(rows) => i64::try_from(rows).unwrap_or(i64::MAX),
                    Err(err) => return failed_completion(tx, guard, endpoint, err, replayed).await,
                }
            }
        };
        if rows != 1 {
            rollback(tx).await;
            guard.disarm();
            return fenced(endpoint, tracked.id, replayed);
        }
    }
    match tx.commit().await {
        Ok(()) => {
            if let Some(tracked) = guard.disarm() {
                metrics::histogram!(
                    "raptor_idempotency_claim_to_completion_seconds",
                    "endpoint" => endpoint.to_owned(),
                )
                .record(tracked.claimed_at.elapsed().as_secs_f64());
            }
            reply.into_response_with(replayed)
        }
        Err(err) if raptor_db::error::is_connection_lost(&err) => {
            // The COMMIT's outcome is unknown (the connection went away, e.g. Postgres
            // restarting). Releasing is safe either way: the release is fenced on
            // `status = 'in_flight'` and waits for the key row's lock, so if the commit landed
            // the row is `completed` (it carried the completion) and the release matches
            // nothing, and the client's retry gets the replay; if it did not, the retry
            // executes. 503 tells the client to retry with the same key.
            tracing::warn!(error = %err, %endpoint, "commit outcome unknown (connection lost); releasing the key");
            guard.settle_error(true).await;
            mark(Refusal::StoreUnavailable.into_response(), replayed)
        }
        Err(err) => {
            tracing::error!(error = %err, %endpoint, "commit failed");
            guard.fail().await;
            mark(internal(), replayed)
        }
    }
}

/// The answer could not be sealed: nothing commits, the key fails.
async fn unsealed(
    tx: Transaction<'static, Postgres>,
    mut guard: KeyGuard,
    endpoint: &str,
    err: crate::seal::SealError,
    replayed: Option<bool>,
) -> Response {
    tracing::error!(error = %err, %endpoint, "could not seal the idempotent response; rolling back");
    rollback(tx).await;
    guard.fail().await;
    mark(internal(), replayed)
}

/// The claim's own completion statement failed: nothing commits.
async fn failed_completion(
    tx: Transaction<'static, Postgres>,
    mut guard: KeyGuard,
    endpoint: &str,
    err: sqlx::Error,
    replayed: Option<bool>,
) -> Response {
    rollback(tx).await;
    if raptor_db::classify(&err) != raptor_db::Failure::Other {
        // Duplicates briefly lock the key row: a completion that timed out waiting for it
        // committed nothing; nor did one rolled back by a deadlock, or one whose connection
        // was lost. Release the key so the client's retry runs.
        tracing::warn!(error = %err, %endpoint, "storing the idempotent response timed out on a lock or lost its connection; rolling back");
        guard.settle_error(true).await;
        return mark(Refusal::StoreUnavailable.into_response(), replayed);
    }
    tracing::error!(error = %err, %endpoint, "could not store the idempotent response; rolling back");
    guard.fail().await;
    mark(internal(), replayed)
}

/// Completes the key with a refusal whose writes were rolled back, in a statement of its own on
/// the store's pool. If that cannot be written the key is released (nothing of the request
/// committed, so a retry may run) and the answer is `503` with `Retry-After`, not the refusal:
/// the refusal was never stored, so the retry runs again and may answer otherwise (a 201 where
/// the client was told 422); no answer is sent that a retry could contradict.
async fn complete_alone(
    mut guard: KeyGuard,
    endpoint: &str,
    reply: Reply,
    replayed: Option<bool>,
) -> Response {
    let Some(tracked) = guard.tracked else {
        return reply.into_response_with(replayed);
    };
    let written = async {
        let completion = Completion::new(&tracked, endpoint, &reply, guard.keys())
            .map_err(|err| sqlx::Error::Protocol(err.to_string()))?;
        let mut conn = raptor_db::conn(guard.idem.store_pool()).await?;
        let rows = completion.write(&mut conn).await?;
        conn.finish().await?;
        Ok::<u64, sqlx::Error>(rows)
    }
    .await;
    match written {
        Ok(1) => {
            guard.disarm();
            reply.into_response_with(replayed)
        }
        Ok(_) => {
            guard.disarm();
            fenced(endpoint, tracked.id, replayed)
        }
        Err(err) => {
            tracing::warn!(error = %err, %endpoint, status = %reply.status,
                           "could not store a refusal on its key; releasing it and answering 503");
            guard.settle_error(true).await;
            Outcome::StoreUnavailable.record(endpoint);
            mark(Refusal::StoreUnavailable.into_response(), replayed)
        }
    }
}

async fn rollback(tx: Transaction<'static, Postgres>) {
    if let Err(err) = tx.rollback().await {
        // The connection is closed rather than reused; nothing was committed.
        tracing::warn!(error = %err, "rollback failed");
    }
}

fn internal() -> Response {
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        error_body("internal", "internal server error"),
    )
}

fn mark(mut response: Response, replayed: Option<bool>) -> Response {
    if let Some(replayed) = replayed {
        response.headers_mut().insert(
            REPLAYED_HEADER,
            axum::http::HeaderValue::from_static(if replayed { "true" } else { "false" }),
        );
    }
    response
}
