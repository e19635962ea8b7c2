//! The outcomes table (docs/idempotency.md, "States") for a key someone else holds or held:
//! a mismatch, a replay (opened and audited), a failed key, one in flight, or a stale attempt
//! fenced off.

use uuid::Uuid;

use crate::outcome::Outcome;
use crate::policy::Replay;
use crate::reply::{Refusal, StoredResponse};
use crate::seal::{RowIdentity, StoredColumns};

use super::round::ClaimRequest;
use crate::service::{Idempotency, ReplayEvent};

pub(super) struct ExistingRow {
    pub(super) id: i64,
    pub(super) lineage: Uuid,
    pub(super) status: String,
    pub(super) attempt: Uuid,
    pub(super) request_hash: String,
    pub(super) response_code: Option<i16>,
    pub(super) stored: StoredColumns,
    pub(super) stale: bool,
    pub(super) in_flight_ms: i64,
    /// The round's connection, when it could stay lent ([`raptor_db::Conn::finish_keeping`]):
    /// the replay's audit row or the stale release goes out on it.
    pub(super) conn: Option<raptor_db::Conn>,
}

/// What to do about a key someone else holds or held.
pub(super) enum Judgement {
    Answer(Refusal, Outcome),
    Again,
}

impl Idempotency {
    /// The outcomes table (docs/idempotency.md) for a key someone else holds or held.
    pub(super) async fn judge(&self, request: &ClaimRequest, mut row: ExistingRow) -> Judgement {
        let deadline = self.inner.config.store_timeout;
        // The fingerprint is checked before the status (as the design record orders it).
        if row.request_hash != request.request_hash {
            return Judgement::Answer(Refusal::BodyMismatch, Outcome::Mismatch);
        }
        match row.status.as_str() {
            // Stored nothing, re-executes: the round takes a completed row over for the same
            // request; one that completed after the round began is claimed on the next.
            "completed" if request.replay == Replay::ReExecute => Judgement::Again,
            "completed" => {
                // The row matched the request's scope and endpoint, so they are its identity.
                let identity = RowIdentity {
                    id: row.id,
                    scope_user_id: request.scope_user_id,
                    endpoint: &request.endpoint,
                    response_code: row.response_code,
                    lineage: row.lineage,
                    attempt: row.attempt,
                };
                let kid = row.stored.response_kid.clone();
                let opened = match self
                    .inner
                    .config
                    .response_keys
                    .open_response(identity, row.stored)
                {
                    Ok(opened) => opened,
                    Err(reason) => {
                        // Never executed again and never answered from anything but the
                        // ciphertext: the key exists, its response is just unreadable here.
                        tracing::error!(
                            endpoint = %request.endpoint,
                            idempotency_key_id = row.id,
                            kid = kid.as_deref(),
                            reason = reason.as_str(),
                            "stored response cannot be decrypted; answering 503 without executing"
                        );
                        reason.record(&request.endpoint);
                        return Judgement::Answer(
                            Refusal::StoreUnreadable,
                            Outcome::StoreUnavailable,
                        );
                    }
                };
                let code = row.response_code.unwrap_or(200);
                let event = ReplayEvent {
                    scope_user_id: request.scope_user_id,
                    idempotency_key_id: row.id,
                    request_hash: row.request_hash,
                    response_code: code,
                    endpoint: request.endpoint.clone(),
                };
                self.audit_replay(event, row.conn.take()).await;
                let stored = StoredResponse {
                    code,
                    body: opened.body,
                    headers: opened.headers,
                };
                Judgement::Answer(Refusal::Replay(Box::new(stored)), Outcome::Replay)
            }
            "failed" => Judgement::Answer(Refusal::PreviousFailed, Outcome::PreviousFailed),
            "released" => {
                // Freed between our upsert and our read: claim again.
                Judgement::Again
            }
            _ if row.stale => {
                // Fence off the abandoned attempt: releasing its row (only if it is still that
                // attempt, still in flight) makes its completion update match nothing, so its
                // transaction rolls back even if it is still alive. The row keeps its lineage.
                let release = async {
                    let mut conn = self.store_conn(row.conn.take()).await?;
                    let released = crate::protocol::settle(
                        &mut conn,
                        crate::protocol::Settle::Release,
                        row.id,
                        row.attempt,
                    )
                    .await?;
                    conn.finish().await?;
                    Ok::<u64, sqlx::Error>(released)
                };
                match tokio::time::timeout(deadline, release).await {
                    Ok(Ok(0)) => Judgement::Again,
                    Ok(Ok(_)) => {
                        tracing::warn!(
                            endpoint = %request.endpoint,
                            idempotency_key_id = row.id,
                            in_flight_ms = row.in_flight_ms,
                            "stale in-flight idempotency key released; the abandoned attempt is fenced off"
                        );
                        Judgement::Answer(
                            Refusal::InFlight {
                                retry_after_ms: 0,
                                message: "an abandoned attempt was released; retry now with the \
                                          same key",
                            },
                            Outcome::Stale,
                        )
                    }
                    Ok(Err(_)) | Err(_) => {
                        // The store answered the read, so this is not a fail-open case.
                        Judgement::Answer(Refusal::StoreUnavailable, Outcome::StoreUnavailable)
                    }
                }
            }
            _ => Judgement::Answer(
                Refusal::InFlight {
                    retry_after_ms: 5000,
                    message: "a request with this Idempotency-Key is in progress; retry later",
                },
                Outcome::InFlight,
            ),
        }
    }

    /// `kept` (the round's connection), or one of the store pool.
    async fn store_conn(
        &self,
        kept: Option<raptor_db::Conn>,
    ) -> Result<raptor_db::Conn, sqlx::Error> {
        match kept {
            Some(conn) => Ok(conn),
            None => raptor_db::conn(&self.inner.store).await,
        }
    }

    /// Writes the replay's audit row (on `kept`, the round's connection, when it has one),
    /// bounded by its own deadline: the replay is answered either way (the original execution's
    /// rows are the canonical record).
    async fn audit_replay(&self, event: ReplayEvent, kept: Option<raptor_db::Conn>) {
        let Some(audit) = &self.inner.audit else {
            return;
        };
        // On the store pool: its sessions commit without waiting for the WAL flush. A replay is no
        // state change (the original's rows are the record); a crash may lose its note, never a
        // business row, and the replay does not wait for the disk.
        let write = async {
            let mut conn = self.store_conn(kept).await?;
            audit.record(&mut conn, &event).await?;
            conn.finish().await
        };
        match tokio::time::timeout(self.inner.config.store_timeout, write).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::error!(error = %err, idempotency_key_id = event.idempotency_key_id, "could not write the idempotency_replay audit row")
            }
            Err(_) => tracing::error!(
                idempotency_key_id = event.idempotency_key_id,
                "the idempotency_replay audit row timed out"
            ),
        }
    }
}
