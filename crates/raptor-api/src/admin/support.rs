//! What support staff do for a user, from the command line (`raptor tokens revoke`, `raptor users
//! sessions revoke`, `raptor users show`) or over HTTP (`GET /api/admin/audit`). Each action is
//! audited on the subject user's trail, in the same transaction, with who did it
//! ([`Actor`]): a user can always learn that support looked at or changed their account.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::PgConnection;
use utoipa::ToSchema;

use crate::audit::{self, AuditAction, AuditEvent};
use crate::auth::hash_token;
use crate::error::{ApiResult, ResultExt};

/// Who did an operator action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A signed-in operator (`users.id`), over HTTP.
    Operator(i32),
    /// The command line, run by this operating-system user (`$USER`, when known).
    Cli(Option<String>),
}

impl Actor {
    /// The command line's actor: the operating-system user running it.
    pub fn cli() -> Self {
        Self::Cli(
            std::env::var("USER")
                .ok()
                .filter(|user| !user.is_empty() && user.len() <= 64),
        )
    }

    /// How the audit row names it.
    fn context(&self) -> Value {
        match self {
            Self::Operator(id) => json!({ "via": "api", "operator_id": id }),
            Self::Cli(user) => json!({ "via": "cli", "os_user": user }),
        }
    }
}

/// An audit row for `subject`'s trail: `action`, `details`, and who did it.
fn event(subject: Option<i32>, action: AuditAction, actor: &Actor, details: Value) -> AuditEvent {
    let mut context = json!({ "by": actor.context() });
    if let (Some(context), Value::Object(details)) = (context.as_object_mut(), details) {
        context.extend(details);
    }
    AuditEvent::new(subject, action, context)
}

/// A revoked token: whose it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RevokedToken {
    /// `session` or `service`.
    pub kind: String,
    /// The user of a session token.
    pub user_id: Option<i32>,
    /// The service of a service token.
    pub service_name: Option<String>,
}

/// Revokes the token `token` (a session's or a service's): refused from now on. `None` when no
/// such token exists (never issued, expired and cleaned up, or revoked already).
pub async fn revoke_token(
    conn: &mut PgConnection,
    token: &str,
    actor: &Actor,
) -> ApiResult<Option<RevokedToken>> {
    let revoked: Option<(String, Option<i32>, Option<String>)> = raptor_db::query_as(
        "delete from api_tokens where token_hash = $1 returning kind, user_id, service_name",
    )
    .bind(hash_token(token.trim()))
    .fetch_optional(&mut *conn)
    .await
    .context("revoke token")?;
    let Some((kind, user_id, service_name)) = revoked else {
        return Ok(None);
    };
    audit::record(
        conn,
        event(
            user_id,
            AuditAction::TokenRevoked,
            actor,
            json!({ "kind": kind, "service_name": service_name }),
        ),
    )
    .await
    .context("audit token revoke")?;
    Ok(Some(RevokedToken {
        kind,
        user_id,
        service_name,
    }))
}

/// Revokes every session of `user_id` (signed out everywhere); how many there were.
pub async fn revoke_sessions(
    conn: &mut PgConnection,
    user_id: i32,
    actor: &Actor,
) -> ApiResult<u64> {
    let revoked =
        raptor_db::query("delete from api_tokens where kind = 'session' and user_id = $1")
            .bind(user_id)
            .execute(&mut *conn)
            .await
            .context("revoke sessions")?
            .rows_affected();
    audit::record(
        conn,
        event(
            Some(user_id),
            AuditAction::SessionsRevoked,
            actor,
            json!({ "sessions": revoked }),
        ),
    )
    .await
    .context("audit sessions revoke")?;
    Ok(revoked)
}

/// Which user [`show_user`] shows.
#[derive(Debug, Clone)]
pub enum UserRef {
    /// By `users.id`.
    Id(i32),
    /// By sign-up address (case does not matter).
    Email(String),
}

/// What support sees of a user.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UserSummary {
    /// `users.id`.
    pub id: i32,
    /// The sign-up address.
    pub email: String,
    /// `user` or `operator`.
    pub role: String,
    /// Display name.
    pub display_name: Option<String>,
    /// When the user was created.
    pub created_at: DateTime<Utc>,
    /// The paper account's mode (`paper`, `live`), `None` without an account.
    pub account_mode: Option<String>,
    /// The paper account's cash.
    pub cash: Option<Decimal>,
    /// Sessions that are still valid.
    pub active_sessions: i64,
    /// When the newest of them began.
    pub last_session_at: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
struct SummaryRow {
    id: i32,
    email: String,
    role: String,
    display_name: Option<String>,
    created_at: DateTime<Utc>,
    account_mode: Option<String>,
    cash: Option<Decimal>,
    active_sessions: i64,
    last_session_at: Option<DateTime<Utc>>,
}

/// The user `who`, audited as looked at; `None` when there is none.
pub async fn show_user(
    conn: &mut PgConnection,
    who: &UserRef,
    actor: &Actor,
) -> ApiResult<Option<UserSummary>> {
    let (id, email) = match who {
        UserRef::Id(id) => (Some(*id), None),
        UserRef::Email(email) => (None, Some(email.trim())),
    };
    let row: Option<SummaryRow> = raptor_db::query_as(
        "select u.id, u.email, u.role, u.display_name, u.created_at,
                a.mode as account_mode, a.cash,
                (select count(*) from api_tokens t
                  where t.user_id = u.id and t.kind = 'session'
                    and (t.expires_at is null or t.expires_at > now())) as active_sessions,
                (select max(t.created_at) from api_tokens t
                  where t.user_id = u.id and t.kind = 'session'
                    and (t.expires_at is null or t.expires_at > now())) as last_session_at
           from users u
           left join paper_accounts a on a.user_id = u.id
          where u.id = $1 or lower(u.email) = lower($2)",
    )
    .bind(id)
    .bind(email)
    .fetch_optional(&mut *conn)
    .await
    .context("show user")?;
    let Some(row) = row else {
        return Ok(None);
    };
    audit::record(
        conn,
        event(Some(row.id), AuditAction::UserShown, actor, json!({})),
    )
    .await
    .context("audit user show")?;
    Ok(Some(UserSummary {
        id: row.id,
        email: row.email,
        role: row.role,
        display_name: row.display_name,
        created_at: row.created_at,
        account_mode: row.account_mode,
        cash: row.cash,
        active_sessions: row.active_sessions,
        last_session_at: row.last_session_at,
    }))
}

/// One row of a user's audit trail.
#[derive(Debug, Clone, Serialize, ToSchema, sqlx::FromRow)]
pub struct AuditEntry {
    /// The row's id (increasing).
    pub id: i64,
    /// What happened (`order.filled`, `session.created`, `user.shown`, …).
    #[schema(example = "order.filled")]
    pub action: String,
    /// Its details, as recorded.
    #[schema(value_type = Object)]
    pub context: Value,
    /// The server id of the request that wrote it (none for background work and the command
    /// line).
    pub request_id: Option<String>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

/// Up to `limit` rows of `user_id`'s trail, newest first, older than `before` (`(time, id)` of
/// the previous page's last row). Reading it is audited once per page, on the same trail.
pub async fn audit_trail(
    conn: &mut PgConnection,
    user_id: i32,
    before: Option<(DateTime<Utc>, i64)>,
    limit: i64,
    actor: &Actor,
) -> ApiResult<Vec<AuditEntry>> {
    let (before_at, before_id) = before.unzip();
    let rows: Vec<AuditEntry> = raptor_db::query_as(
        "select id, action, context, request_id, created_at
           from audit_log
          where user_id = $1
            and ($2::timestamptz is null or (created_at, id) < ($2, $3))
          order by created_at desc, id desc
          limit $4",
    )
    .bind(user_id)
    .bind(before_at)
    .bind(before_id)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await
    .context("read audit trail")?;
    audit::record(
        conn,
        event(
            Some(user_id),
            AuditAction::AuditRead,
            actor,
            json!({ "rows": rows.len() }),
        ),
    )
    .await
    .context("audit audit read")?;
    Ok(rows)
}
