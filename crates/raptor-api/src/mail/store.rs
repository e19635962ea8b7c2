//! SQL of the mail relay on `email_outbox`: take the next due message (locked, `SKIP LOCKED`),
//! then record what became of it in the same transaction.

use std::time::Duration;

use sqlx::PgConnection;

/// A message due to be sent, locked by the caller's transaction.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct Due {
    pub(crate) id: i64,
    pub(crate) email: String,
    pub(crate) subject: String,
    /// `None` only for a row whose body was cleared by hand; it cannot be sent.
    pub(crate) body: Option<String>,
    pub(crate) link: Option<String>,
    /// Failed attempts so far.
    pub(crate) attempts: i32,
    /// When it was queued, in microseconds since the epoch (part of its Message-ID).
    pub(crate) created_us: i64,
}

/// The oldest due message nobody else holds, locked `FOR UPDATE SKIP LOCKED`: while this
/// transaction is open, every other relay (in this process or another replica) skips it.
/// `done` are the ids this pass has handled already (a failure due again at once waits for the
/// next pass).
pub(crate) async fn lock_due(
    conn: &mut PgConnection,
    done: &[i64],
) -> Result<Option<Due>, sqlx::Error> {
    raptor_db::query_as(
        "select id, email, subject, body, link, attempts,
                (extract(epoch from created_at) * 1000000)::bigint as created_us
           from email_outbox
          where sent_at is null and failed_at is null and next_attempt_at <= now()
            and id <> all($1)
          order by next_attempt_at, id limit 1
          for update skip locked",
    )
    .bind(done)
    .fetch_optional(conn)
    .await
}

/// The queue: messages neither sent nor given up (due now or waiting for a retry), and the age
/// in seconds of the oldest (`None` when there is none).
pub(crate) async fn backlog(conn: &mut PgConnection) -> Result<(i64, Option<f64>), sqlx::Error> {
    raptor_db::query_as(
        "select count(*), extract(epoch from now() - min(created_at))::float8
           from email_outbox
          where sent_at is null and failed_at is null",
    )
    .fetch_one(conn)
    .await
}

/// Sent: the body and the link (they carry the sign-in token in clear) are cleared.
pub(crate) async fn mark_sent(conn: &mut PgConnection, id: i64) -> Result<(), sqlx::Error> {
    raptor_db::query(
        "update email_outbox
            set sent_at = now(), attempts = attempts + 1, body = null, link = null,
                last_error = null
          where id = $1",
    )
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Failed, to be tried again after `delay`.
pub(crate) async fn mark_retry(
    conn: &mut PgConnection,
    id: i64,
    delay: Duration,
    error: &str,
) -> Result<(), sqlx::Error> {
    raptor_db::query(
        "update email_outbox
            set attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2),
                last_error = $3
          where id = $1",
    )
    .bind(id)
    .bind(delay.as_secs_f64())
    .bind(error)
    .execute(conn)
    .await?;
    Ok(())
}

/// Given up: never tried again; the token is cleared like a sent message's.
pub(crate) async fn mark_failed(
    conn: &mut PgConnection,
    id: i64,
    error: &str,
) -> Result<(), sqlx::Error> {
    raptor_db::query(
        "update email_outbox
            set attempts = attempts + 1, failed_at = now(), body = null, link = null,
                last_error = $2
          where id = $1",
    )
    .bind(id)
    .bind(error)
    .execute(conn)
    .await?;
    Ok(())
}
