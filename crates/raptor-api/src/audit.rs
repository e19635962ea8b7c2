//! The audit log: `record` and `record_many` are the only writers of `audit_log`, always called on the same
//! connection (transaction) as the change it describes.

use raptor_idempotency::{AuditFuture, ReplayAudit, ReplayEvent};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use sqlx::types::Json;
use sqlx::PgConnection;

tokio::task_local! {
    /// The current request's server id (`middleware::ServerRequestId`, never the client's
    /// `x-request-id`), set by the request-id middleware, stamped on audit rows.
    pub static REQUEST_ID: String;
}

/// Declares [`AuditAction`]: every action the service writes, and its stored name.
macro_rules! audit_actions {
    ($($variant:ident => $name:literal,)*) => {
        /// What an audit row records: every action the service writes (`audit_log.action`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum AuditAction {
            $(
                #[doc = concat!("`", $name, "`")]
                $variant,
            )*
        }

        impl AuditAction {
            /// Every action.
            pub const ALL: &'static [AuditAction] = &[$(AuditAction::$variant),*];

            /// The stored name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }
    };
}

audit_actions! {
    AccountReset => "account.reset",
    AuditRead => "audit.read",
    BillingCheckoutSessionCreated => "billing.checkout_session.created",
    BillingCustomerCreated => "billing.customer.created",
    BillingPortalSessionCreated => "billing.portal_session.created",
    BillingSubscriptionCancelRequested => "billing.subscription.cancel_requested",
    BillingSubscriptionSynced => "billing.subscription.synced",
    BillingWebhookApplied => "billing.webhook.applied",
    FlagSet => "flag.set",
    IdempotencyReplay => "idempotency_replay",
    OrderAccepted => "order.accepted",
    OrderCanceled => "order.canceled",
    OrderEvaluationRejected => "order.evaluation_rejected",
    OrderExpired => "order.expired",
    OrderFilled => "order.filled",
    OrderRejected => "order.rejected",
    PositionExpired => "position.expired",
    ProfileUpdated => "profile.updated",
    QuoteSet => "quote.set",
    ServiceTokenCreated => "service_token.created",
    SessionCreated => "session.created",
    SessionRevoked => "session.revoked",
    SessionsRevoked => "sessions.revoked",
    TokenRevoked => "token.revoked",
    UserCreated => "user.created",
    UserErased => "user.erased",
    UserRegistered => "user.registered",
    UserShown => "user.shown",
    WaitlistJoined => "waitlist.joined",
}

/// One audit row.
#[derive(Debug, Clone)]
pub struct AuditEvent {
    /// The user the change belongs to (`None` for service or system actions).
    pub user_id: Option<i32>,
    /// Dotted action name, e.g. `order.filled` ([`AuditAction::as_str`]).
    pub action: &'static str,
    /// What happened, with enough detail to reconstruct it.
    pub context: Value,
}

impl AuditEvent {
    /// An event for `user_id`.
    pub fn new(user_id: Option<i32>, action: AuditAction, context: Value) -> Self {
        Self::named(user_id, action.as_str(), context)
    }

    /// An event whose action is not one of the service's own (the integration tests' probe
    /// routes record theirs this way); the service itself uses [`AuditEvent::new`].
    pub fn named(user_id: Option<i32>, action: &'static str, context: Value) -> Self {
        Self {
            user_id,
            action,
            context,
        }
    }
}

/// The largest `context` stored as is; a larger one is replaced by a note of its size, so no
/// request can turn into megabytes of audit.
pub const MAX_CONTEXT_BYTES: usize = 16 * 1024;

/// Appends one row. Takes `&mut PgConnection` so it can only join the caller's transaction.
pub async fn record(conn: &mut PgConnection, event: AuditEvent) -> Result<i64, sqlx::Error> {
    let request_id = REQUEST_ID.try_with(Clone::clone).ok();
    let context = capped(&event);
    raptor_db::query_scalar(
        "insert into audit_log (user_id, action, context, request_id)
         values ($1, $2, $3, $4) returning id",
    )
    .bind(event.user_id)
    .bind(event.action)
    .bind(context)
    .bind(request_id)
    .fetch_one(conn)
    .await
}

/// Appends several rows in one statement (a quote sweep writes an account's fills together).
/// Same rules as [`record`].
pub async fn record_many(
    conn: &mut PgConnection,
    events: Vec<AuditEvent>,
) -> Result<(), sqlx::Error> {
    if events.is_empty() {
        return Ok(());
    }
    let rows = Rows::new(events);
    raptor_db::query(
        "insert into audit_log (user_id, action, context, request_id)
         select e.user_id, e.action, e.context, $4
           from unnest($1::integer[], $2::text[], $3::jsonb[]) as e(user_id, action, context)",
    )
    .bind(rows.users)
    .bind(rows.actions)
    .bind(rows.contexts)
    .bind(rows.request_id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Audit rows as the columns of an `unnest`, for a statement that writes them together with
/// what they record (the order insert): `user_id integer[]`, `action text[]`,
/// `context jsonb[]`, and the request's id. Same rules as [`record`].
#[derive(Debug)]
pub(crate) struct Rows {
    pub(crate) users: Vec<Option<i32>>,
    pub(crate) actions: Vec<&'static str>,
    pub(crate) contexts: Vec<Context>,
    pub(crate) request_id: Option<String>,
}

/// A `context` as it is stored: serialised once, when its size is checked ([`capped`]), and
/// sent as those bytes.
pub(crate) type Context = Json<Box<RawValue>>;

impl Rows {
    pub(crate) fn new(events: Vec<AuditEvent>) -> Self {
        let mut rows = Self {
            users: Vec::with_capacity(events.len()),
            actions: Vec::with_capacity(events.len()),
            contexts: Vec::with_capacity(events.len()),
            request_id: REQUEST_ID.try_with(Clone::clone).ok(),
        };
        for event in events {
            rows.contexts.push(capped(&event));
            rows.users.push(event.user_id);
            rows.actions.push(event.action);
        }
        rows
    }
}

/// `event`'s context serialised, or a note of its size when it is larger than
/// [`MAX_CONTEXT_BYTES`].
fn capped(event: &AuditEvent) -> Context {
    // A `Value` always serialises (its keys are strings); `null` stands in all the same.
    let raw = |value: &Value| {
        serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned())
    };
    let context = raw(&event.context);
    let size = context.get().len();
    if size <= MAX_CONTEXT_BYTES {
        return Json(context);
    }
    tracing::warn!(action = event.action, size, "audit context truncated");
    Json(raw(&json!({ "truncated": true, "context_bytes": size })))
}

/// Writes the `idempotency_replay` row for each replay (docs/idempotency.md: a replay is not a new state
/// change, so it never duplicates the business row; it gets one distinct row of its own).
pub(crate) struct ReplayAuditor;

impl ReplayAudit for ReplayAuditor {
    fn record<'a>(&'a self, conn: &'a mut PgConnection, event: &'a ReplayEvent) -> AuditFuture<'a> {
        Box::pin(async move {
            record(
                conn,
                AuditEvent::new(
                    event.scope_user_id,
                    AuditAction::IdempotencyReplay,
                    json!({
                        "idempotency_key_id": event.idempotency_key_id,
                        "request_hash": event.request_hash,
                        "response_code": event.response_code,
                        "endpoint": event.endpoint,
                    }),
                ),
            )
            .await
            .map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_names_are_unique_and_lower_case() {
        let mut names = std::collections::HashSet::new();
        for action in AuditAction::ALL {
            let name = action.as_str();
            assert!(names.insert(name), "{name} twice");
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'.' || b == b'_'),
                "{name}"
            );
        }
    }
}
