//! SQL of billing: the user's Stripe customer, the subscription mirror and the processed
//! webhook events. Every write takes `&mut PgConnection` (the caller's transaction).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};

/// Class id of the per-user billing advisory lock (`pg_advisory_xact_lock(class, user_id)`).
const BILLING_LOCK_CLASS: i32 = 0x0B11;

/// A subscription's state to write into the mirror.
#[derive(Debug, Clone)]
pub(crate) struct SubscriptionState {
    pub(crate) stripe_subscription_id: String,
    pub(crate) stripe_customer_id: String,
    /// Our user; `None` resolves it from `billing_customers` (or keeps the row's).
    pub(crate) user_id: Option<i32>,
    pub(crate) status: String,
    pub(crate) price_id: Option<String>,
    pub(crate) current_period_end: Option<DateTime<Utc>>,
    pub(crate) cancel_at_period_end: bool,
    pub(crate) canceled_at: Option<DateTime<Utc>>,
    /// Stripe time of this state: the event's `created`, or the time of a sync.
    pub(crate) source_at: DateTime<Utc>,
}

/// A `billing_subscriptions` row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct SubscriptionRow {
    pub(crate) stripe_subscription_id: String,
    pub(crate) stripe_customer_id: String,
    pub(crate) user_id: Option<i32>,
    pub(crate) status: String,
    pub(crate) price_id: Option<String>,
    pub(crate) current_period_end: Option<DateTime<Utc>>,
    pub(crate) cancel_at_period_end: bool,
    pub(crate) canceled_at: Option<DateTime<Utc>>,
    pub(crate) source_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
}

const COLUMNS: &str = "stripe_subscription_id, stripe_customer_id, user_id, status, price_id, \
     current_period_end, cancel_at_period_end, canceled_at, source_at, updated_at";

/// Serialises the billing writes of one user until the transaction ends, so two requests with
/// different keys cannot both create a Stripe customer for them. Only billing takes this lock:
/// holding it across a Stripe call (bounded by the Stripe timeout) blocks nothing else.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn lock_user_billing(conn: &mut PgConnection, user_id: i32) -> ApiResult<()> {
    raptor_db::query("select pg_advisory_xact_lock($1, $2)")
        .bind(BILLING_LOCK_CLASS)
        .bind(user_id)
        .execute(conn)
        .await
        .context("lock user billing")?;
    Ok(())
}

/// The user's Stripe customer id, if they have one.
pub(crate) async fn find_customer(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<Option<String>> {
    raptor_db::query_scalar("select stripe_customer_id from billing_customers where user_id = $1")
        .bind(user_id)
        .fetch_optional(conn)
        .await
        .context("find customer")
}

/// The user's email (sent to Stripe when creating their customer).
pub(crate) async fn user_email(conn: &mut PgConnection, user_id: i32) -> ApiResult<String> {
    raptor_db::query_scalar("select email from users where id = $1")
        .bind(user_id)
        .fetch_optional(conn)
        .await
        .context("read user email")?
        .ok_or(ApiError::NotFound("user"))
}

/// Records the user's Stripe customer (the caller holds [`lock_user_billing`]; a row linked
/// meanwhile by a webhook is kept).
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn insert_customer(
    conn: &mut PgConnection,
    user_id: i32,
    stripe_customer_id: &str,
) -> ApiResult<()> {
    raptor_db::query(
        "insert into billing_customers (user_id, stripe_customer_id) values ($1, $2)
         on conflict do nothing",
    )
    .bind(user_id)
    .bind(stripe_customer_id)
    .execute(conn)
    .await
    .context("insert customer")?;
    Ok(())
}

/// The id of the user's subscription that is still running (active, trialing, past due,
/// unpaid or paused), if any.
pub(crate) async fn open_subscription_id(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<Option<String>> {
    raptor_db::query_scalar(
        "select stripe_subscription_id from billing_subscriptions
          where user_id = $1
            and status in ('active', 'trialing', 'past_due', 'unpaid', 'paused')
          order by source_at desc limit 1",
    )
    .bind(user_id)
    .fetch_optional(conn)
    .await
    .context("open subscription")
}

/// The user's subscription to show: the one still running if any, else the newest.
pub(crate) async fn current_subscription(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<Option<SubscriptionRow>> {
    raptor_db::query_as(&format!(
        "select {COLUMNS} from billing_subscriptions
          where user_id = $1
          order by status in ('active', 'trialing', 'past_due', 'unpaid', 'paused') desc,
                   source_at desc, stripe_subscription_id
          limit 1"
    ))
    .bind(user_id)
    .fetch_optional(conn)
    .await
    .context("current subscription")
}

/// Links a customer to a user when neither is linked yet (a completed checkout), and gives the
/// customer's unowned subscription rows their user. Returns whether anything changed.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn link_customer(
    conn: &mut PgConnection,
    user_id: i32,
    stripe_customer_id: &str,
) -> ApiResult<bool> {
    // Serialised with `ensure_customer` of the same user.
    lock_user_billing(conn, user_id).await?;
    // The user id comes from Stripe (our `client_reference_id`): an erased user is skipped.
    let linked = raptor_db::query(
        "insert into billing_customers (user_id, stripe_customer_id)
         select $1, $2 where exists (select 1 from users where id = $1)
         on conflict do nothing",
    )
    .bind(user_id)
    .bind(stripe_customer_id)
    .execute(&mut *conn)
    .await
    .context("link customer")?
    .rows_affected();
    let owned = raptor_db::query(
        "update billing_subscriptions s set user_id = c.user_id, updated_at = now()
           from billing_customers c
          where c.stripe_customer_id = $1 and s.stripe_customer_id = $1 and s.user_id is null",
    )
    .bind(stripe_customer_id)
    .execute(conn)
    .await
    .context("own subscriptions")?
    .rows_affected();
    Ok(linked + owned > 0)
}

/// The user's subscription that can still be canceled, locked (`FOR UPDATE`) so a webhook for
/// it waits for our answer from Stripe. The newest when there are several.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn lock_open_subscription(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<Option<SubscriptionRow>> {
    raptor_db::query_as(&format!(
        "select {COLUMNS} from billing_subscriptions
          where (user_id = $1
                 or stripe_customer_id in
                    (select stripe_customer_id from billing_customers where user_id = $1))
            and status in ('active', 'trialing', 'past_due', 'unpaid', 'paused')
          order by source_at desc, stripe_subscription_id
          limit 1
          for update"
    ))
    .bind(user_id)
    .fetch_optional(conn)
    .await
    .context("find subscription")
}

/// Applies a webhook's state unless the row already holds a newer one: an event older than the
/// row's `source_at` changes nothing (`None`). At equal times a `canceled` row stays canceled
/// (Stripe's `created` has one-second resolution and deletion is final).
#[tracing::instrument(skip_all, fields(subscription.id = %state.stripe_subscription_id))]
pub(crate) async fn apply_subscription(
    conn: &mut PgConnection,
    state: &SubscriptionState,
) -> ApiResult<Option<SubscriptionRow>> {
    upsert(
        conn,
        state,
        "where billing_subscriptions.source_at < excluded.source_at
            or (billing_subscriptions.source_at = excluded.source_at
                and billing_subscriptions.status <> 'canceled')",
    )
    .await
}

/// Writes a state read from Stripe just now (an operator sync, Stripe's answer to our own
/// call): always applied; `source_at` never moves backwards.
#[tracing::instrument(skip_all, fields(subscription.id = %state.stripe_subscription_id))]
pub(crate) async fn sync_subscription(
    conn: &mut PgConnection,
    state: &SubscriptionState,
) -> ApiResult<SubscriptionRow> {
    upsert(conn, state, "")
        .await?
        .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("unconditional upsert wrote no row")))
}

async fn upsert(
    conn: &mut PgConnection,
    state: &SubscriptionState,
    condition: &str,
) -> ApiResult<Option<SubscriptionRow>> {
    let sql = format!(
        "insert into billing_subscriptions
             (stripe_subscription_id, stripe_customer_id, user_id, status, price_id,
              current_period_end, cancel_at_period_end, canceled_at, source_at)
         values ($1, $2,
                 coalesce($3, (select user_id from billing_customers where stripe_customer_id = $2)),
                 $4, $5, $6, $7, $8, $9)
         on conflict (stripe_subscription_id) do update
            set stripe_customer_id = excluded.stripe_customer_id,
                user_id = coalesce(excluded.user_id, billing_subscriptions.user_id),
                status = excluded.status,
                price_id = excluded.price_id,
                current_period_end = excluded.current_period_end,
                cancel_at_period_end = excluded.cancel_at_period_end,
                canceled_at = excluded.canceled_at,
                source_at = greatest(billing_subscriptions.source_at, excluded.source_at),
                updated_at = now()
          {condition}
         returning {COLUMNS}"
    );
    raptor_db::query_as(&sql)
        .bind(&state.stripe_subscription_id)
        .bind(&state.stripe_customer_id)
        .bind(state.user_id)
        .bind(&state.status)
        .bind(&state.price_id)
        .bind(state.current_period_end)
        .bind(state.cancel_at_period_end)
        .bind(state.canceled_at)
        .bind(state.source_at)
        .fetch_optional(conn)
        .await
        .map_err(|err| match &err {
            sqlx::Error::Database(db)
                if db.constraint() == Some("billing_subscriptions_user_id_fkey") =>
            {
                ApiError::invalid(ErrorCode::InvalidSubscription, "user_id names no user")
            }
            _ => ApiError::from(err),
        })
}

/// A webhook event to record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventRecord<'a> {
    pub(crate) event_id: &'a str,
    pub(crate) kind: &'a str,
    pub(crate) created: DateTime<Utc>,
    pub(crate) livemode: bool,
}

/// Records the event; `false` when it was processed before. A concurrent delivery of the same
/// event waits here until the first one's transaction ends, then sees its row (or, if that
/// rolled back, records it itself): a duplicate never runs twice and never fails.
#[tracing::instrument(skip_all, fields(stripe.event_id = event.event_id))]
pub(crate) async fn record_event(
    conn: &mut PgConnection,
    event: EventRecord<'_>,
) -> ApiResult<bool> {
    let inserted = raptor_db::query(
        "insert into processed_stripe_events (event_id, type, created, livemode, applied)
         values ($1, $2, $3, $4, false)
         on conflict (event_id) do nothing",
    )
    .bind(event.event_id)
    .bind(event.kind)
    .bind(event.created)
    .bind(event.livemode)
    .execute(conn)
    .await
    .context("record event")?;
    Ok(inserted.rows_affected() == 1)
}

/// Marks a recorded event as applied to the mirror.
pub(crate) async fn mark_event_applied(conn: &mut PgConnection, event_id: &str) -> ApiResult<()> {
    raptor_db::query("update processed_stripe_events set applied = true where event_id = $1")
        .bind(event_id)
        .execute(conn)
        .await
        .context("mark event applied")?;
    Ok(())
}

/// Remembers the Stripe customers of `user_id` (its customer row and its subscriptions') as
/// erased, by hash, before the erasure deletes them (see `erased_stripe_customers`).
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn remember_erased_customers(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<u64> {
    let remembered = raptor_db::query(
        "insert into erased_stripe_customers (customer_hash)
         select distinct sha256(convert_to(stripe_customer_id, 'UTF8'))
           from (select stripe_customer_id from billing_customers where user_id = $1
                 union
                 select stripe_customer_id from billing_subscriptions where user_id = $1) c
         on conflict do nothing",
    )
    .bind(user_id)
    .execute(conn)
    .await
    .context("remember erased customers")?
    .rows_affected();
    Ok(remembered)
}

/// Whether `customer` belonged to an erased user.
pub(crate) async fn customer_erased(conn: &mut PgConnection, customer: &str) -> ApiResult<bool> {
    raptor_db::query_scalar(
        "select exists (select 1 from erased_stripe_customers
                         where customer_hash = sha256(convert_to($1, 'UTF8')))",
    )
    .bind(customer)
    .fetch_one(conn)
    .await
    .context("read erased customers")
}
