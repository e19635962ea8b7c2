//! SQL of the mail relay on `email_outbox`: lease the next due message (one statement), then,
//! after the SMTP conversation, record what became of it while the lease is still the relay's.

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
    /// The lease's end, which only this relay's outcome may find on the row.
    pub(crate) lease: chrono::DateTime<chrono::Utc>,
}

/// Leases the oldest due message nobody else holds, in one autocommit statement: its
/// `next_attempt_at` moves `lease` ahead, so every other relay (in this process or another
/// replica) passes it over until the lease runs out, and no transaction stays open while the
/// SMTP conversation runs. The new `next_attempt_at` is the lease's token: the outcome is
/// recorded only while the row still carries it ([`mark_sent`], [`mark_retry`],
/// [`mark_failed`]). `done` are the ids this pass has handled already (a failure due again at
/// once waits for the next pass).
pub(crate) async fn lease_due(
    conn: &mut PgConnection,
    done: &[i64],
    lease: Duration,
) -> Result<Option<Due>, sqlx::Error> {
    raptor_db::query_as(
        "with due as (
            select id from email_outbox
             where sent_at is null and failed_at is null and next_attempt_at <= now()
               and id <> all($1)
             order by next_attempt_at, id limit 1
             for update skip locked)
         update email_outbox o
            set next_attempt_at = now() + make_interval(secs => $2)
           from due
          where o.id = due.id
         returning o.id, o.email, o.subject, o.body, o.link, o.attempts,
                   (extract(epoch from o.created_at) * 1000000)::bigint as created_us,
                   o.next_attempt_at as lease",
    )
    .bind(done)
    .bind(lease.as_secs_f64())
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

/// Sent: the body and the link (they carry the sign-in token in clear) are cleared. Whether
/// the lease was still this relay's (false: it ran out and another relay took the message).
pub(crate) async fn mark_sent(conn: &mut PgConnection, due: &Due) -> Result<bool, sqlx::Error> {
    let done = raptor_db::query(
        "update email_outbox
            set sent_at = now(), attempts = attempts + 1, body = null, link = null,
                last_error = null
          where id = $1 and next_attempt_at = $2 and sent_at is null",
    )
    .bind(due.id)
    .bind(due.lease)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Failed, to be tried again after `delay` (while the lease is this relay's; see
/// [`mark_sent`]).
pub(crate) async fn mark_retry(
    conn: &mut PgConnection,
    due: &Due,
    delay: Duration,
    error: &str,
) -> Result<bool, sqlx::Error> {
    let done = raptor_db::query(
        "update email_outbox
            set attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $3),
                last_error = $4
          where id = $1 and next_attempt_at = $2 and sent_at is null",
    )
    .bind(due.id)
    .bind(due.lease)
    .bind(delay.as_secs_f64())
    .bind(error)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Given up: never tried again; the token is cleared like a sent message's (while the lease
/// is this relay's; see [`mark_sent`]).
pub(crate) async fn mark_failed(
    conn: &mut PgConnection,
    due: &Due,
    error: &str,
) -> Result<bool, sqlx::Error> {
    let done = raptor_db::query(
        "update email_outbox
            set attempts = attempts + 1, failed_at = now(), body = null, link = null,
                last_error = $3
          where id = $1 and next_attempt_at = $2 and sent_at is null",
    )
    .bind(due.id)
    .bind(due.lease)
    .bind(error)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}
