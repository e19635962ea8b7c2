//! Retention of the tables that hold credentials or only matter for a while
//! (docs/operations.md, "Retention"), deleted by the hourly cleanup in bounded batches (each
//! batch its own short transaction, `FOR UPDATE SKIP LOCKED`, so it is safe while the server
//! runs and never holds many locks):
//!
//! - `email_outbox`: a message a day after the mail relay sent it or gave it up (its token was
//!   cleared then; the row is kept that long to investigate a delivery, since it names an
//!   address), and one never sent a week after it was queued (its link has long expired);
//! - `auth_link_tokens`: a link a day after it stopped working (expired, or used and past its
//!   repeat grace);
//! - `processed_stripe_events`: an event 30 days after it was processed (Stripe retries a
//!   delivery for 3 days, and an event can be resent by hand for 30: older ones can no longer
//!   arrive again, so their dedup rows are not needed);
//! - `quote_events`: an event 30 days after it happened, once no sweep of it is pending (the
//!   fills it caused keep its id in their audit rows).
//!
//! Idempotency keys have their own, `raptor_idempotency::cleanup`; [`delete_expired`] runs it
//! too.

use serde::Serialize;
use sqlx::PgPool;

use crate::sessions::REVERIFY_GRACE;

/// How many rows each part of a cleanup run deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Deleted {
    /// Expired idempotency keys.
    pub idempotency_keys: u64,
    /// Sent, given-up or long-unsent outbox messages.
    pub email_outbox: u64,
    /// Spent or expired sign-in links.
    pub sign_in_links: u64,
    /// Processed Stripe events past the resend window.
    pub stripe_events: u64,
    /// Quote events past their retention.
    pub quote_events: u64,
}

/// One table's rule: a `delete … where <key> in (select <key> … limit $1 … skip locked)`; `$2`
/// is the sign-in links' repeat grace, for the rule that names it.
struct Rule {
    sql: &'static str,
    uses_grace: bool,
}

const OUTBOX: Rule = Rule {
    sql: "delete from email_outbox where id in (
            select id from email_outbox
             where (sent_at is not null and sent_at < now() - interval '1 day')
                or (failed_at is not null and failed_at < now() - interval '1 day')
                or created_at < now() - interval '7 days'
             order by id limit $1 for update skip locked)",
    uses_grace: false,
};

const LINKS: Rule = Rule {
    sql: "delete from auth_link_tokens where id in (
            select id from auth_link_tokens
             where expires_at < now() - interval '1 day'
                or used_at < now() - make_interval(secs => $2) - interval '1 day'
             order by id limit $1 for update skip locked)",
    uses_grace: true,
};

const STRIPE_EVENTS: Rule = Rule {
    sql: "delete from processed_stripe_events where event_id in (
            select event_id from processed_stripe_events
             where processed_at < now() - interval '30 days'
             order by processed_at limit $1 for update skip locked)",
    uses_grace: false,
};

const QUOTE_EVENTS: Rule = Rule {
    sql: "delete from quote_events where id in (
            select e.id from quote_events e
             where e.created_at < now() - interval '30 days'
               and not exists (select 1 from quote_sweeps s where s.event_id = e.id)
             order by e.id limit $1 for update skip locked)",
    uses_grace: false,
};

/// One cleanup run: expired idempotency keys, then each table's rule, `batch_size` rows per
/// statement until none is left.
pub async fn delete_expired(pool: &PgPool, batch_size: i64) -> Result<Deleted, sqlx::Error> {
    let batch_size = batch_size.max(1);
    Ok(Deleted {
        idempotency_keys: raptor_idempotency::cleanup::delete_expired(pool, batch_size).await?,
        email_outbox: batches(pool, &OUTBOX, batch_size).await?,
        sign_in_links: batches(pool, &LINKS, batch_size).await?,
        stripe_events: batches(pool, &STRIPE_EVENTS, batch_size).await?,
        quote_events: batches(pool, &QUOTE_EVENTS, batch_size).await?,
    })
}

async fn batches(pool: &PgPool, rule: &Rule, batch_size: i64) -> Result<u64, sqlx::Error> {
    let mut total = 0;
    loop {
        let mut conn = raptor_db::conn(pool).await?;
        let mut query = raptor_db::query(rule.sql).bind(batch_size);
        if rule.uses_grace {
            query = query.bind(REVERIFY_GRACE.as_secs_f64());
        }
        let rows = query.execute(&mut *conn).await?.rows_affected();
        conn.finish().await?;
        total += rows;
        if rows < u64::try_from(batch_size).unwrap_or(u64::MAX) {
            return Ok(total);
        }
    }
}
