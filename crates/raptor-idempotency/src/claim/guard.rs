//! The key row a winning attempt owns ([`Tracked`]) and its guard ([`KeyGuard`]): whatever
//! ends a claim without [`Claim::finish`](super::Claim::finish) committing it settles the row,
//! fenced by the attempt token: a panic fails it, a cancellation releases it.

use std::time::Instant;

use uuid::Uuid;

use crate::service::Idempotency;

/// The key row this attempt owns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tracked {
    pub(crate) id: i64,
    /// The fencing token: completion and failure only touch the row while it still carries it.
    pub(crate) attempt: Uuid,
    /// The key's lineage: stable across released attempts, new for each lifetime of the key.
    pub(crate) lineage: Uuid,
    /// The key's scope user: with the id and endpoint, the identity a sealed body is bound to.
    pub(crate) scope_user_id: Option<i32>,
    pub(crate) replay: crate::policy::Replay,
    pub(crate) claimed_at: Instant,
}

/// Settles the key row when a claim ends without [`Claim::finish`] committing it: a panic marks
/// the key failed (docs/idempotency.md); a cancelled request (client gone, timeout, shutdown) releases
/// the row, because its transaction rolled back and a retry may safely execute. Both updates
/// are fenced by the attempt token.
pub(crate) struct KeyGuard {
    pub(super) idem: Idempotency,
    pub(super) tracked: Option<Tracked>,
}

impl KeyGuard {
    pub(crate) fn new(idem: Idempotency, tracked: Option<Tracked>) -> Self {
        Self { idem, tracked }
    }

    pub(super) fn keys(&self) -> &crate::seal::ResponseKeys {
        &self.idem.config().response_keys
    }

    pub(super) fn disarm(&mut self) -> Option<Tracked> {
        self.tracked.take()
    }

    /// Marks the key failed now (awaited, so a client's next request sees it).
    pub(super) async fn fail(&mut self) {
        if let Some(tracked) = self.tracked.take() {
            settle(&self.idem, tracked, Settle::Fail).await;
        }
    }

    /// Settles the key of a rolled-back 5xx answer: released when a retry with the same key
    /// may run ([`ErrorReply::releases_key`]: a `503` that says "retry", an upstream outcome
    /// that the retry deduplicates upstream), so the retry executes; failed otherwise.
    pub(super) async fn settle_error(&mut self, release: bool) {
        if let Some(tracked) = self.tracked.take() {
            let how = if release {
                Settle::Release
            } else {
                Settle::Fail
            };
            settle(&self.idem, tracked, how).await;
        }
    }
}

impl Drop for KeyGuard {
    fn drop(&mut self) {
        let Some(tracked) = self.tracked.take() else {
            return;
        };
        let how = if std::thread::panicking() {
            Settle::Fail
        } else {
            Settle::Release
        };
        let idem = self.idem.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(_) => {
                let background = idem.background().clone();
                background.spawn(async move { settle(&idem, tracked, how).await });
            }
            Err(_) => {
                tracing::error!(
                    idempotency_key_id = tracked.id,
                    "claim dropped outside a runtime; the key stays in flight until stale"
                );
            }
        }
    }
}

pub(crate) use crate::protocol::Settle;

/// Settles `tracked`'s row ([`crate::protocol::settle`]) on the store pool, logging a failure:
/// the row then stays in flight until stale.
pub(crate) async fn settle(idem: &Idempotency, tracked: Tracked, how: Settle) {
    let result = async {
        let mut conn = raptor_db::conn(idem.store_pool()).await?;
        crate::protocol::settle(&mut conn, how, tracked.id, tracked.attempt).await?;
        conn.finish().await
    }
    .await;
    match result {
        Ok(_) => tracing::debug!(idempotency_key_id = tracked.id, ?how, "key settled"),
        Err(err) => tracing::error!(
            error = %err,
            idempotency_key_id = tracked.id,
            ?how,
            "could not settle the key; it stays in flight until stale"
        ),
    }
}
