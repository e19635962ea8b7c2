//! The [`Claim`]: the winning request's one transaction. Business writes and audit rows go
//! through [`Claim::conn`]; only [`Claim::finish`] stores the response on the key row and
//! commits; every other exit rolls back and releases (or fails) the key. Getting a claim is
//! [`round`] (the claim round) and [`judge`] (the answer for a key someone else holds).

mod guard;
mod judge;
mod round;

pub(crate) use guard::{settle, KeyGuard, Settle, Tracked};
pub use round::ClaimRequest;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sqlx::{PgConnection, Postgres, Transaction};
use tracing::Instrument;
use uuid::Uuid;

use crate::key::IdempotencyKey;
use crate::reply::{self, error_body, error_response, ErrorReply, Refusal, Reply, REPLAYED_HEADER};
use crate::seal::RowIdentity;

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
    #[tracing::instrument(
        skip_all,
        fields(endpoint = %self.endpoint, tracked = self.is_tracked(), otel.name = "idempotency.finish")
    )]
    pub async fn finish<E: ErrorReply>(self, result: Result<Reply, E>) -> Response {
        let Claim {
            tx,
            mut guard,
            endpoint,
            instrumented,
            ..
        } = self;
        let replayed = instrumented.then_some(false);
        let (reply, keep_writes) = match result {
            Ok(reply) => (reply, true),
            Err(err) if err.status().is_server_error() => {
                rollback(tx).await;
                guard.settle_error(err.releases_key()).await;
                return mark(err.into_response(), replayed);
            }
            Err(err) => (Reply::rejected(&err), false),
        };
        if reply.status.is_server_error() {
            rollback(tx).await;
            guard
                .settle_error(reply.status == StatusCode::SERVICE_UNAVAILABLE)
                .await;
            return reply.into_response_with(replayed);
        }
        if keep_writes {
            commit(tx, guard, &endpoint, reply, replayed).await
        } else {
            rollback(tx).await;
            complete_alone(guard, &endpoint, reply, replayed).await
        }
    }
}

/// The completion of a key: what its row keeps of `reply`.
struct Completion {
    id: i64,
    attempt: uuid::Uuid,
    code: i16,
    plain_body: Option<serde_json::Value>,
    plain_headers: Option<serde_json::Value>,
    sealed: Option<crate::seal::Sealed>,
}

impl Completion {
    /// What `tracked`'s row keeps of `reply` under its policy: with keys configured the
    /// response (body and headers) is stored sealed, bound to this row, this lifetime of the
    /// key and this attempt (`response_body` and `response_headers` stay NULL); without, as
    /// plain JSON. A policy that keeps nothing keeps no headers either.
    fn new(
        tracked: &Tracked,
        endpoint: &str,
        reply: &Reply,
        keys: &crate::seal::ResponseKeys,
    ) -> Result<Self, crate::seal::SealError> {
        let headers = reply::stored_headers(reply.location.as_deref());
        let code = i16::try_from(reply.status.as_u16()).unwrap_or(i16::MAX);
        let body = tracked
            .replay
            .stores_body(reply.status)
            .then_some(&reply.body);
        let identity = RowIdentity {
            id: tracked.id,
            scope_user_id: tracked.scope_user_id,
            endpoint,
            response_code: Some(code),
            lineage: tracked.lineage,
            attempt: tracked.attempt,
        };
        let keeps_headers = tracked.replay != crate::policy::Replay::ReExecute;
        let sealed = if keeps_headers {
            keys.seal_response(identity, body, &headers)?
        } else {
            None
        };
        let (plain_body, plain_headers) = match (&sealed, keeps_headers) {
            (None, true) => (body.cloned(), Some(headers)),
            _ => (None, None),
        };
        Ok(Self {
            id: tracked.id,
            attempt: tracked.attempt,
            code,
            plain_body,
            plain_headers,
            sealed,
        })
    }

    /// The fenced completion update: one row while the attempt still holds the key, none once
    /// it was declared stale and released or re-claimed.
    async fn write(&self, conn: &mut PgConnection) -> Result<u64, sqlx::Error> {
        let sealed = self.sealed.as_ref();
        Ok(raptor_db::query(
            "update idempotency_keys
                set status = 'completed', response_code = $3, response_body = $4,
                    response_kid = $5, response_nonce = $6, response_ciphertext = $7,
                    response_headers = $8, response_seal = $9, completed_at = now()
              where id = $1 and attempt = $2 and status = 'in_flight'",
        )
        .bind(self.id)
        .bind(self.attempt)
        .bind(self.code)
        .bind(self.plain_body.as_ref())
        .bind(sealed.map(|s| s.kid.as_str()))
        .bind(sealed.map(|s| s.nonce.as_slice()))
        .bind(sealed.map(|s| s.ciphertext.as_slice()))
        .bind(self.plain_headers.as_ref())
        .bind(sealed.map(|_| crate::seal::SEAL_V2))
        .execute(conn)
        .await?
        .rows_affected())
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

/// Completes the key in the business transaction `tx` and commits the two together.
async fn commit(
    mut tx: Transaction<'static, Postgres>,
    mut guard: KeyGuard,
    endpoint: &str,
    reply: Reply,
    replayed: Option<bool>,
) -> Response {
    if let Some(tracked) = guard.tracked {
        let completion = match Completion::new(&tracked, endpoint, &reply, guard.keys()) {
            Ok(completion) => completion,
            Err(err) => {
                tracing::error!(error = %err, %endpoint, "could not seal the idempotent response; rolling back");
                rollback(tx).await;
                guard.fail().await;
                return mark(internal(), replayed);
            }
        };
        match completion.write(&mut tx).await {
            Ok(1) => {}
            Ok(_) => {
                rollback(tx).await;
                guard.disarm();
                return fenced(endpoint, tracked.id, replayed);
            }
            Err(err) if raptor_db::classify(&err) != raptor_db::Failure::Other => {
                // Duplicates briefly lock the key row: a completion that timed out waiting for
                // it committed nothing; nor did one rolled back by a deadlock, or one whose
                // connection was lost. Release the key so the client's retry runs.
                tracing::warn!(error = %err, %endpoint, "storing the idempotent response timed out on a lock or lost its connection; rolling back");
                rollback(tx).await;
                guard.settle_error(true).await;
                return mark(Refusal::StoreUnavailable.into_response(), replayed);
            }
            Err(err) => {
                tracing::error!(error = %err, %endpoint, "could not store the idempotent response; rolling back");
                rollback(tx).await;
                guard.fail().await;
                return mark(internal(), replayed);
            }
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

/// Completes the key with a refusal whose writes were rolled back, in a statement of its own on
/// the store's pool. If that cannot be written the key is released (nothing of the request
/// committed, so a retry may run) and the refusal answered all the same.
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
            tracing::warn!(error = %err, %endpoint, "could not store a refusal on its key; releasing it");
            guard.settle_error(true).await;
            reply.into_response_with(replayed)
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
