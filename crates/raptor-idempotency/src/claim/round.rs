//! Claiming a key: the one-statement claim round (insert-or-read, in a task of its own that
//! releases what nobody took), the fail-open rule for a round that got no connection, and the
//! winner's path into its business transaction. The outcomes table for a taken key is
//! [`super::judge`].

use std::time::{Duration, Instant};

use raptor_db::reach::Reach;
use raptor_db::StoreBudget;
use tracing::Instrument;
use uuid::Uuid;

use crate::claim::{Claim, KeyGuard, Tracked};
use crate::key::IdempotencyKey;
use crate::lent::Lent;
use crate::outcome::Outcome;
use crate::policy::{Replay, Tier};
use crate::protocol;
use crate::reply::Refusal;

use super::judge::{ExistingRow, Judgement};
use crate::service::Idempotency;

/// One instrumented request, as the store sees it.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// `scope_user_id` (`None` for service principals).
    pub scope_user_id: Option<i32>,
    /// `scope_endpoint`: method and route template.
    pub endpoint: String,
    /// The key.
    pub key: IdempotencyKey,
    /// `request_hash`.
    pub request_hash: String,
    /// Retention.
    pub ttl: Duration,
    /// Fail-closed or fail-open.
    pub tier: Tier,
    /// What a completed key keeps of the response, and whether a retry re-executes.
    pub replay: Replay,
}

/// The receiving end of a claim round. Dropped before its answer was taken (the request was
/// cancelled after the round sent it), it releases a row the round won.
struct UntakenWin {
    receiver: tokio::sync::oneshot::Receiver<Result<Found, RoundError>>,
    idem: Idempotency,
    request: ClaimRequest,
    attempt: Uuid,
}

impl Drop for UntakenWin {
    fn drop(&mut self) {
        if let Some(Ok(Found::Won { id, lineage })) = take_before_drop(&mut self.receiver) {
            let (idem, request, attempt) = (self.idem.clone(), self.request.clone(), self.attempt);
            if tokio::runtime::Handle::try_current().is_ok() {
                let background = idem.background().clone();
                background
                    .spawn(async move { idem.release_won(&request, id, lineage, attempt).await });
            }
        }
    }
}

/// Why a claim round has no answer.
#[derive(Debug)]
enum RoundError {
    /// The store pool lent no connection: nothing was sent. The only case that can be "the
    /// store cannot be connected to" (decided by [`Idempotency::no_connection`]).
    NoConnection(sqlx::Error),
    /// A connection was lent, and its statement (or transaction block) failed: the store was
    /// reached.
    Statement(sqlx::Error),
}

/// Whatever a receiver about to be dropped still holds. Closed first: a value sent before the
/// close is still in the channel for `try_recv`, and a send after it fails (so the sender keeps
/// the value, and the claim task releases the row itself). Without the close, a win sent
/// between `try_recv` and dropping the receiver would be lost to both sides, and its key left
/// in flight until stale.
fn take_before_drop<T>(receiver: &mut tokio::sync::oneshot::Receiver<T>) -> Option<T> {
    receiver.close();
    receiver.try_recv().ok()
}

/// How long a claim round may keep the connection the authentication kept for the request's
/// transaction ([`Lent`]). A round answers in well under a millisecond when the store is
/// healthy; one that waits (a locked row, a saturated store pool) lets go of it, so a slow store
/// never ties up the business pool.
const KEEP_WHILE_CLAIMING: Duration = Duration::from_millis(10);

/// The round's answer within `left`, letting go of the `lent` connection once the round has taken
/// [`KEEP_WHILE_CLAIMING`]; `Err` when the time is up.
async fn answer_within<T>(
    left: Duration,
    answer: &mut tokio::sync::oneshot::Receiver<T>,
    lent: &mut Lent,
) -> Result<Result<T, tokio::sync::oneshot::error::RecvError>, tokio::time::error::Elapsed> {
    let until = tokio::time::Instant::now() + left;
    if lent.is_lent() && left > KEEP_WHILE_CLAIMING {
        if let Ok(found) = tokio::time::timeout(KEEP_WHILE_CLAIMING, &mut *answer).await {
            return Ok(found);
        }
        lent.let_go();
    }
    tokio::time::timeout_at(until, answer).await
}

/// What one claim round found.
enum Found {
    /// The key was free (absent, expired or released): this attempt holds it, uncommitted.
    Won { id: i64, lineage: Uuid },
    /// Someone holds or held it.
    Existing(Box<ExistingRow>),
    /// The row disappeared between the insert and the read.
    Vanished,
}

impl Idempotency {
    /// Claims `request.key`. `Ok` gives the winner its [`Claim`] (or, on a fail-open route whose
    /// store cannot be connected to, an untracked one); `Err` is the answer to send instead: a
    /// replay, 409, 422 or 503. `lent`, the connection the authentication lent
    /// ([`Lent`]), becomes the winner's transaction; every other answer returns it.
    ///
    /// The fail-open rule (docs/idempotency.md, "Tiers"): a Tier 2 route runs without dedup
    /// only when **no connection to the store can be made at all**. That is decided in one
    /// place, `Idempotency::no_connection`, and only for a round that never got a
    /// connection. Everything else (a pool that is merely busy, a locked row, a statement that
    /// timed out or failed, no answer by the deadline) answers 409 or 503 on every tier, so a
    /// key that exists is never executed again by the fail-open path.
    ///
    /// Timing cannot undo that: the store pool's acquire timeout, plus the store sessions'
    /// lock and statement timeouts, plus a reachability probe, all end well inside the claim's
    /// deadline ([`StoreBudget`]), and the deadline itself never fails open.
    #[tracing::instrument(
        skip_all,
        fields(endpoint = %request.endpoint, idempotency.key = %request.key, otel.name = "idempotency.claim")
    )]
    pub async fn claim(&self, request: ClaimRequest, mut lent: Lent) -> Result<Claim, Refusal> {
        let deadline = self.inner.config.store_timeout;
        let started = Instant::now();
        // Chosen before the round so that a claim whose commit outlived the deadline can still
        // be fenced off (released) by its token.
        let attempt = Uuid::new_v4();
        for _ in 0..3 {
            // The claim statement runs in a task of its own that outlives this request: if the
            // request gives up (deadline) or is cancelled (client gone) while the statement is
            // under way, the task finds nobody took its answer and releases a row it won once
            // the statement has committed. Released any earlier, the release could run before
            // the claim and miss its row.
            let (sender, receiver) = tokio::sync::oneshot::channel();
            let (idem, claiming) = (self.clone(), request.clone());
            self.background().spawn(
                async move {
                    let found = idem.round(&claiming, attempt).await;
                    if let Err(RoundError::Statement(err)) = &found {
                        if err.as_database_error().is_none() {
                            // The connection failed after the statement went out: it may have
                            // committed. Release whatever this attempt holds. (A round that got no
                            // connection sent nothing: no release, which would only ask the same
                            // exhausted pool again.)
                            idem.release_attempt(&claiming, attempt).await;
                        }
                    }
                    if let Err(Ok(Found::Won { id, lineage })) = sender.send(found) {
                        idem.release_won(&claiming, id, lineage, attempt).await;
                    }
                }
                // In the claim's span: its statements are part of the request's trace.
                .in_current_span(),
            );
            // Dropped with this future (a cancelled request), it releases a win that arrived
            // but was never taken.
            let mut receiver = UntakenWin {
                receiver,
                idem: self.clone(),
                request: request.clone(),
                attempt,
            };
            let left = deadline.saturating_sub(started.elapsed());
            let found = match answer_within(left, &mut receiver.receiver, &mut lent).await {
                Ok(Ok(Ok(found))) => found,
                Ok(Ok(Err(RoundError::Statement(err))))
                    if raptor_db::classify(&err) == raptor_db::Failure::Busy =>
                {
                    // The key's row (or a concurrent claimer's uncommitted row) is locked, e.g.
                    // by an original completing slowly (or the server resolved a conflict by
                    // rolling the round back): the store answered, and the key most likely
                    // exists. In flight, on every tier.
                    tracing::info!(endpoint = %request.endpoint, error = %err, "idempotency key row is locked; answering in flight");
                    Outcome::InFlight.record(&request.endpoint);
                    return Err(Refusal::InFlight {
                        retry_after_ms: 1000,
                        message: "a request with this Idempotency-Key is completing; retry shortly",
                    });
                }
                Ok(Ok(Err(RoundError::Statement(err)))) => {
                    return Err(self.refuse(&request, &format!("claim statement failed: {err}")));
                }
                Ok(Ok(Err(RoundError::NoConnection(err)))) => {
                    return self.no_connection(request, err, started, lent).await;
                }
                Ok(Err(_)) => return Err(self.refuse(&request, "claim task ended")),
                // No answer by the deadline although every bound inside the round is shorter:
                // a connection was had and the store stalled on it. Not "cannot connect".
                Err(_) => return Err(self.refuse(&request, "claim timed out")),
            };
            let existing = match found {
                // No await between receiving the win and arming its guard (in `won`): a
                // cancellation cannot fall between the two.
                Found::Won { id, lineage } => {
                    return self.won(request, id, lineage, attempt, lent).await
                }
                Found::Vanished => continue,
                Found::Existing(row) => row,
            };
            match self.judge(&request, *existing).await {
                Judgement::Answer(refusal, outcome) => {
                    outcome.record(&request.endpoint);
                    return Err(refusal);
                }
                Judgement::Again => continue,
            }
        }
        // The row kept changing under us (released, re-claimed, cleaned up): ask for a retry.
        Outcome::InFlight.record(&request.endpoint);
        Err(Refusal::InFlight {
            retry_after_ms: 1000,
            message: "the key is changing hands; retry shortly",
        })
    }

    /// The claim round got no connection from the store pool. Only an affirmative connect
    /// failure (refused, a name that does not resolve, authentication or TLS refused:
    /// [`raptor_db::reach::affirmative_connect_failure`]) says the store cannot be reached, and
    /// only that goes on to the tier policy. A pool timeout says nothing by itself (busy, slow,
    /// or connecting kept being refused), so a probe connection decides ([`Reachability`]);
    /// a busy or closed pool, a probe that was refused by a server or pooler that answered, or
    /// one without an answer in time is 503 on every tier, as is any other failure.
    async fn no_connection(
        &self,
        request: ClaimRequest,
        err: sqlx::Error,
        started: Instant,
        lent: Lent,
    ) -> Result<Claim, Refusal> {
        let budget = StoreBudget::new(self.inner.config.store_timeout);
        let why = match err {
            sqlx::Error::PoolClosed => return Err(self.refuse(&request, "store pool closed")),
            sqlx::Error::PoolTimedOut => {
                let left = budget.deadline.saturating_sub(started.elapsed());
                match self.inner.reach.probe(budget.probe.min(left)).await {
                    Some(Reach::Unreachable(why)) => why,
                    Some(Reach::Reachable) => {
                        tracing::warn!(endpoint = %request.endpoint, "idempotency store pool saturated; refusing");
                        return Err(self.refuse(&request, "store pool saturated"));
                    }
                    Some(Reach::Refused(why)) => {
                        return Err(self.refuse(
                            &request,
                            &format!("store pool timed out; a probe was refused: {why}"),
                        ))
                    }
                    None => {
                        return Err(self.refuse(
                            &request,
                            "store pool timed out; the probe did not answer in time",
                        ))
                    }
                }
            }
            other => match raptor_db::reach::affirmative_connect_failure(&other) {
                Some(why) => why,
                None => {
                    return Err(self.refuse(
                        &request,
                        &format!("store connect failed without saying it cannot connect: {other}"),
                    ))
                }
            },
        };
        match request.tier {
            Tier::FailClosed => {
                tracing::error!(endpoint = %request.endpoint, why, "idempotency store unreachable; refusing (fail-closed)");
                Outcome::StoreUnavailable.record(&request.endpoint);
                Err(Refusal::StoreUnavailable)
            }
            Tier::FailOpen => {
                // The only path that runs a keyed request without dedup (and the only place
                // `fail_open` is counted).
                tracing::warn!(endpoint = %request.endpoint, why, "idempotency store unreachable; running without dedup (fail-open)");
                Outcome::FailOpen.record(&request.endpoint);
                self.untracked(request.endpoint, true, Some(request.key), lent)
                    .await
            }
        }
    }

    /// `503 idempotency_store_unavailable` on every tier: the store was reached (or may have
    /// been), so whether the key exists is unknown and it must not run untracked.
    fn refuse(&self, request: &ClaimRequest, why: &str) -> Refusal {
        tracing::warn!(endpoint = %request.endpoint, why, "idempotency store did not answer; refusing on every tier");
        Outcome::StoreUnavailable.record(&request.endpoint);
        Refusal::StoreUnavailable
    }

    /// Releases a row this attempt won but nobody will use (the request is gone).
    async fn release_won(&self, request: &ClaimRequest, id: i64, lineage: Uuid, attempt: Uuid) {
        let tracked = Tracked::new(request, id, lineage, attempt);
        crate::claim::settle(self, tracked, crate::claim::Settle::Release).await;
    }

    /// Releases the key's row if this attempt holds it (fenced by the attempt token).
    async fn release_attempt(&self, request: &ClaimRequest, attempt: Uuid) {
        let released = async {
            let mut conn = raptor_db::conn(&self.inner.store).await?;
            crate::protocol::release_attempt(
                &mut conn,
                &request.key.to_string(),
                request.scope_user_id,
                &request.endpoint,
                attempt,
            )
            .await?;
            conn.finish().await
        }
        .await;
        if let Err(err) = released {
            tracing::warn!(error = %err, "could not release an uncertain claim; it stays in flight until stale");
        }
    }

    /// The winner's path (its claim already committed): arm the key's guard, then open the
    /// business transaction.
    async fn won(
        &self,
        request: ClaimRequest,
        id: i64,
        lineage: Uuid,
        attempt: Uuid,
        lent: Lent,
    ) -> Result<Claim, Refusal> {
        let tracked = Tracked::new(&request, id, lineage, attempt);
        let guard = KeyGuard::new(self.clone(), Some(tracked));
        let tx = match self.begin(lent).await {
            Ok(tx) => tx,
            Err(err) => {
                tracing::error!(error = %err, "claimed a key but could not begin the business transaction");
                // Dropping the guard releases the key: nothing ran, a retry may execute.
                drop(guard);
                Outcome::StoreUnavailable.record(&request.endpoint);
                return Err(Refusal::StoreUnavailable);
            }
        };
        Outcome::Miss.record(&request.endpoint);
        Ok(Claim::new(
            tx,
            guard,
            request.endpoint,
            Some(request.key),
            true,
        ))
    }

    /// One claim round: the insert-or-read statement, committed on its own. A taken key's row
    /// comes back with the round's connection where it can stay lent (session mode, holding no
    /// transaction and no lock), for the judge's next statement.
    async fn round(&self, request: &ClaimRequest, attempt: Uuid) -> Result<Found, RoundError> {
        let ttl_ms = i64::try_from(request.ttl.as_millis()).unwrap_or(i64::MAX);
        let stale_ms = i64::try_from(self.inner.config.stale_after.as_millis()).unwrap_or(i64::MAX);
        // One autocommit statement on the store pool, whose sessions run with
        // synchronous_commit=off and half the store timeout as lock and statement timeouts
        // (`raptor_db::pool::store_options`): the claim commits on its own (so duplicates see `in_flight`)
        // without waiting for the WAL flush (the completing transaction's synchronous commit
        // flushes everything before it, so the claim is durable whenever anything it guarded
        // is), and a claim blocked on a locked row gets 55P03 back with time left to look
        // (see `blocked`).
        //
        // An expired row is treated as absent: the upsert takes it over for this attempt, as a
        // new lifetime (new lineage). A released row (an attempt that rolled back) is free too
        // for the same request (another body is a mismatch, 422, like on any row), and keeps
        // its lineage while it has not expired; so is a completed row of a route that stores
        // nothing and re-executes (`Replay::ReExecute`). When the key is taken, the same
        // statement reads the row; a row committed after the statement began is not seen
        // (`Vanished`, and the next round sees it). In transaction pool mode the statement is
        // its own transaction block instead (`raptor_db::conn`), committed before the answer is used.
        // Bounded here whatever the pool was built with, so a pool timeout always comes back
        // (and is classified) well before the claim's deadline.
        let acquire = StoreBudget::new(self.inner.config.store_timeout).acquire;
        let mut conn = match tokio::time::timeout(acquire, raptor_db::try_conn(&self.inner.store))
            .await
        {
            Ok(Ok(conn)) => conn,
            Ok(Err(raptor_db::ConnError::Acquire(err))) => {
                return Err(RoundError::NoConnection(err))
            }
            Ok(Err(raptor_db::ConnError::Begin(err))) => return Err(RoundError::Statement(err)),
            Err(_) => return Err(RoundError::NoConnection(sqlx::Error::PoolTimedOut)),
        };
        let key = request.key.to_string();
        let values = protocol::ClaimValues {
            key: &key,
            scope_user_id: request.scope_user_id,
            endpoint: &request.endpoint,
            request_hash: &request.request_hash,
            attempt,
            ttl_ms,
            stale_ms,
            re_execute: request.replay == Replay::ReExecute,
        };
        let row = protocol::claim(&mut conn, &values)
            .await
            .map_err(RoundError::Statement)?;
        // Kept (session mode) for what the judge may write next: a replay's audit row, a stale
        // release.
        let conn = conn.finish_keeping().await.map_err(RoundError::Statement)?;
        Ok(match row {
            None => Found::Vanished,
            Some(row) if row.won => Found::Won {
                id: row.id,
                lineage: row.lineage,
            },
            Some(row) => Found::Existing(Box::new(ExistingRow {
                id: row.id,
                lineage: row.lineage,
                status: row.status.unwrap_or_default(),
                attempt: row.attempt.unwrap_or_default(),
                request_hash: row.request_hash.unwrap_or_default(),
                response_code: row.response_code,
                stored: row.stored,
                stale: row.stale,
                in_flight_ms: row.in_flight_ms,
                conn,
            })),
        })
    }
}

impl Tracked {
    /// The row `id` this attempt won for `request`.
    fn new(request: &ClaimRequest, id: i64, lineage: Uuid, attempt: Uuid) -> Self {
        Self {
            id,
            attempt,
            lineage,
            scope_user_id: request.scope_user_id,
            replay: request.replay,
            claimed_at: Instant::now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two orders in which the claim task's send and a dropping receiver's look can fall:
    /// either way the win ends with exactly one side, which then releases the row.
    #[test]
    fn a_win_is_never_lost_between_the_look_and_the_drop() {
        // Sent before the look: the receiver takes it.
        let (sender, mut receiver) = tokio::sync::oneshot::channel::<u8>();
        assert!(sender.send(1).is_ok());
        assert_eq!(take_before_drop(&mut receiver), Some(1));

        // Sent after the look but before the receiver is gone: the send fails and hands the
        // win back to the task (which releases it), instead of landing in a channel nobody
        // reads.
        let (sender, mut receiver) = tokio::sync::oneshot::channel::<u8>();
        assert_eq!(take_before_drop(&mut receiver), None);
        let handed_back = sender.send(1);
        drop(receiver);
        assert_eq!(handed_back, Err(1), "the win was lost to both sides");
    }
}
