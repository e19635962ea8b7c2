//! The `client_order_id` of an order placed without one: derived from the Idempotency-Key.

use raptor_idempotency::{IdempotencyKey, Policy, Tier1};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult};
use crate::trading::store;

/// Namespace of derived `client_order_id`s (UUIDv5 of account, purpose and Idempotency-Key).
const CLIENT_ORDER_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6d1e_0f3a_51c4_4e1b_9a0d_7c55_2b8e_11a7);

/// The order's `client_order_id`: the requested one, or one derived from the Idempotency-Key so
/// that a future live adapter can forward it as the broker's own dedup id (random without a key).
///
/// The derived id is the same for every retry of one key within its retention (also after a
/// released or stale attempt, and also while the kill switch is off, so a retry after the switch
/// comes back cannot execute twice), and different for a key reused after it expired: when the
/// key's first id belongs to an order older than the key's retention, that order's key has
/// expired, and the id comes from the new lifetime's lineage instead ([`ClientOrderId::reuse`]).
pub(super) struct ClientOrderId {
    pub(super) first: String,
    /// For a derived id: the id of this lifetime of the key, used when `first` belongs to an
    /// order older than the key's retention.
    lifetime: Option<String>,
    requested: bool,
}

/// The natural key of what `user_id` asked for with `key` (an order's `client_order_id`, an
/// account reset's id): UUIDv5 of the account, the purpose, the key and `suffix`; the same for
/// every retry of one key, and never the key itself.
pub(super) fn natural_key(user_id: i32, purpose: &str, key: IdempotencyKey, suffix: &str) -> Uuid {
    Uuid::new_v5(
        &CLIENT_ORDER_ID_NAMESPACE,
        format!("{user_id}:{purpose}:{key}{suffix}").as_bytes(),
    )
}

impl ClientOrderId {
    pub(super) fn new(
        user_id: i32,
        purpose: &str,
        requested: Option<String>,
        key: Option<IdempotencyKey>,
        lineage: Option<Uuid>,
    ) -> ApiResult<Self> {
        if let Some(id) = requested {
            return Ok(Self {
                first: id,
                lifetime: None,
                requested: true,
            });
        }
        let Some(key) = key else {
            return Ok(Self {
                first: Uuid::now_v7().to_string(),
                lifetime: None,
                requested: false,
            });
        };
        let derive = |suffix: String| natural_key(user_id, purpose, key, &suffix).to_string();
        let lifetime = lineage.unwrap_or_else(Uuid::new_v4);
        Ok(Self {
            first: derive(String::new()),
            lifetime: Some(derive(format!(":{lifetime}"))),
            requested: false,
        })
    }

    pub(super) fn duplicate(id: &str) -> ApiError {
        ApiError::invalid(
            ErrorCode::DuplicateClientOrderId,
            format!("client_order_id {id} is already used on this account"),
        )
    }

    /// After `first` was found taken: the id to use instead, or the duplicate error.
    pub(super) async fn reuse(
        &self,
        conn: &mut PgConnection,
        user_id: i32,
        now: chrono::DateTime<chrono::Utc>,
    ) -> ApiResult<String> {
        let (false, Some(lifetime)) = (self.requested, &self.lifetime) else {
            return Err(Self::duplicate(&self.first));
        };
        let created = store::client_order_id_created(conn, user_id, &self.first).await?;
        let retention = chrono::Duration::from_std(<Tier1 as Policy>::TTL).unwrap_or_default();
        match created {
            // The key's order exists and its key may still be retained: a second execution.
            Some(created) if now - created < retention => Err(Self::duplicate(&self.first)),
            _ => Ok(lifetime.clone()),
        }
    }
}
