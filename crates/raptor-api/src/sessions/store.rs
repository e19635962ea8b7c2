//! SQL of sign-in links, the email outbox and sessions. Link and session tokens are stored
//! only as SHA-256 hashes; a link's token in clear exists once, in its outbox message, until
//! the mail relay (`crate::mail`) has sent it.

use std::time::Duration;

use sqlx::PgConnection;

use crate::auth;
use crate::error::{ApiError, ApiResult, ResultExt};

/// What a sign-in link was issued for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// Sign-up: verifying it creates the user (the first time).
    Register,
    /// Login of an existing user.
    Login,
}

impl Purpose {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Register => "register",
            Self::Login => "login",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "register" => Some(Self::Register),
            "login" => Some(Self::Login),
            _ => None,
        }
    }
}

/// The link a message carries: `<public_url>/<page>?token=<token>` (the token is hex, so it
/// needs no escaping).
pub(crate) fn link_url(public_url: &str, purpose: Purpose, token: &str) -> String {
    let page = match purpose {
        Purpose::Register => "verify",
        Purpose::Login => "login",
    };
    format!("{}/{page}?token={token}", public_url.trim_end_matches('/'))
}

/// A link token: 256 random bits, hex, prefixed `rpl_` (a link, never a bearer token: the two
/// live in different tables and are told apart at a glance in a leak).
pub(crate) fn new_link_token() -> ApiResult<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|err| ApiError::Internal(anyhow::anyhow!("no randomness: {err}")))?;
    Ok(format!("rpl_{}", hex::encode(bytes)))
}

/// Stores a link for `email` (and `user_id` when the user exists) valid for `ttl`.
#[tracing::instrument(skip_all, fields(purpose = purpose.as_str()))]
pub(crate) async fn insert_link(
    conn: &mut PgConnection,
    token: &str,
    purpose: Purpose,
    email: &str,
    user_id: Option<i32>,
    ttl: Duration,
) -> ApiResult<()> {
    raptor_db::query(
        "insert into auth_link_tokens (token_hash, purpose, email, user_id, expires_at)
         values ($1, $2, $3, $4, now() + make_interval(secs => $5))",
    )
    .bind(auth::hash_token(token))
    .bind(purpose.as_str())
    .bind(email)
    .bind(user_id)
    .bind(ttl.as_secs_f64())
    .execute(conn)
    .await
    .context("insert link token")?;
    Ok(())
}

/// One message for the mailer.
#[derive(Debug, Clone)]
pub(crate) struct OutboxMessage<'a> {
    pub(crate) user_id: Option<i32>,
    pub(crate) email: &'a str,
    /// `verify_email` or `login_link`.
    pub(crate) kind: &'static str,
    pub(crate) subject: &'static str,
    pub(crate) body: String,
    /// The sign-in link the body carries (logged instead of sent when no SMTP relay is set).
    pub(crate) link: String,
}

/// Queues `message` in `email_outbox`, the hand-off to the mailer.
pub(crate) async fn enqueue_email(
    conn: &mut PgConnection,
    message: OutboxMessage<'_>,
) -> ApiResult<()> {
    raptor_db::query(
        "insert into email_outbox (user_id, email, kind, subject, body, link)
         values ($1, $2, $3, $4, $5, $6)",
    )
    .bind(message.user_id)
    .bind(message.email)
    .bind(message.kind)
    .bind(message.subject)
    .bind(message.body)
    .bind(message.link)
    .execute(conn)
    .await
    .context("enqueue email")?;
    Ok(())
}

/// A link row, locked, with its state judged by the database clock.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) id: i64,
    pub(crate) purpose: Purpose,
    pub(crate) email: String,
    pub(crate) user_id: Option<i32>,
    /// Already verified once.
    pub(crate) used: bool,
    /// Past `expires_at`.
    pub(crate) expired: bool,
    /// Used, and longer ago than the repeat grace.
    pub(crate) grace_over: bool,
    /// The session the link issued last (`api_tokens.id`).
    pub(crate) session_token_id: Option<i64>,
}

#[derive(sqlx::FromRow)]
struct LinkRow {
    id: i64,
    purpose: String,
    email: String,
    user_id: Option<i32>,
    session_token_id: Option<i64>,
    used: bool,
    expired: bool,
    grace_over: bool,
}

/// The link whose token is `token`, locked `FOR UPDATE`: concurrent verifications of one link
/// run one after the other, so only the first can create the user.
pub(crate) async fn lock_link(
    conn: &mut PgConnection,
    token: &str,
    grace: Duration,
) -> ApiResult<Option<Link>> {
    let row: Option<LinkRow> = raptor_db::query_as(
        "select id, purpose, email, user_id, session_token_id, used_at is not null as used,
                expires_at <= now() as expired,
                coalesce(used_at + make_interval(secs => $2) <= now(), false) as grace_over
           from auth_link_tokens where token_hash = $1 for update",
    )
    .bind(auth::hash_token(token))
    .bind(grace.as_secs_f64())
    .fetch_optional(conn)
    .await
    .context("lock link token")?;
    row.map(|row| {
        let purpose = Purpose::parse(&row.purpose)
            .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("unknown link purpose")))?;
        Ok(Link {
            id: row.id,
            purpose,
            email: row.email,
            user_id: row.user_id,
            used: row.used,
            expired: row.expired,
            grace_over: row.grace_over,
            session_token_id: row.session_token_id,
        })
    })
    .transpose()
}

/// Marks the link used by `user_id` (first verification only).
pub(crate) async fn mark_link_used(
    conn: &mut PgConnection,
    link_id: i64,
    user_id: i32,
) -> ApiResult<()> {
    raptor_db::query(
        "update auth_link_tokens set used_at = now(), user_id = $2
          where id = $1 and used_at is null",
    )
    .bind(link_id)
    .bind(user_id)
    .execute(conn)
    .await
    .context("mark link used")?;
    Ok(())
}

/// Stores a session token for `user_id` that expires after `ttl`; its id, or `None` when the
/// token is stored already (a repeated verification of a link).
pub(crate) async fn insert_session_if_new(
    conn: &mut PgConnection,
    user_id: i32,
    token: &str,
    ttl: Duration,
) -> ApiResult<Option<i64>> {
    raptor_db::query_scalar(
        "insert into api_tokens (token_hash, kind, user_id, expires_at)
         values ($1, 'session', $2, now() + make_interval(secs => $3))
         on conflict on constraint uq_api_tokens_token_hash do nothing
         returning id",
    )
    .bind(auth::hash_token(token))
    .bind(user_id)
    .bind(ttl.as_secs_f64())
    .fetch_optional(conn)
    .await
    .context("insert session")
}

/// Records `session` as the session of link `link_id`. The reference is cleared when the
/// session is deleted (logout), which ends the link's grace.
pub(crate) async fn set_link_session(
    conn: &mut PgConnection,
    link_id: i64,
    session: i64,
) -> ApiResult<()> {
    raptor_db::query("update auth_link_tokens set session_token_id = $2 where id = $1")
        .bind(link_id)
        .bind(session)
        .execute(conn)
        .await
        .context("record the link's session")?;
    Ok(())
}

/// Deletes the session of `user_id` whose token is `token`; whether there was one.
pub(crate) async fn delete_session(
    conn: &mut PgConnection,
    user_id: i32,
    token: &str,
) -> ApiResult<bool> {
    let deleted = raptor_db::query(
        "delete from api_tokens where token_hash = $1 and user_id = $2 and kind = 'session'",
    )
    .bind(auth::hash_token(token))
    .bind(user_id)
    .execute(conn)
    .await
    .context("delete session")?
    .rows_affected();
    Ok(deleted > 0)
}
