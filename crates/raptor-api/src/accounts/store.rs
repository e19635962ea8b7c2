//! SQL for users, their paper account, their profile and their data subject rights.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde_json::{json, Value};
use sqlx::PgConnection;

use super::dto::{invalid_time_zone, Email, ProfileChanges};
use crate::audit::{self, AuditAction, AuditEvent};
use crate::auth::{self, Role};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};

/// A created user and its first session token (shown once).
#[derive(Debug, Clone)]
pub struct CreatedUser {
    /// `users.id`.
    pub user_id: i32,
    /// The bearer token.
    pub token: String,
}

/// Creates a user, its paper account holding `starting_cash`, and a session token that
/// expires after `session_ttl` (the CLI's `users create`). An address already taken is
/// `409 email_taken`.
pub async fn create_user(
    conn: &mut PgConnection,
    email: &str,
    role: Role,
    starting_cash: Decimal,
    session_ttl: std::time::Duration,
) -> ApiResult<CreatedUser> {
    let email = Email::parse(email)?;
    let user_id = insert_user(conn, &email, role, starting_cash)
        .await?
        .ok_or_else(|| ApiError::Conflict {
            code: ErrorCode::EmailTaken,
            message: format!("a user with email {} exists", email.as_str()),
        })?;
    let token = auth::new_token()?;
    auth::insert_session_token(conn, user_id, &token, session_ttl)
        .await
        .context("insert token")?;
    audit::record(
        conn,
        AuditEvent::new(
            Some(user_id),
            AuditAction::UserCreated,
            json!({ "role": role.as_str(), "starting_cash": starting_cash.to_string() }),
        ),
    )
    .await
    .context("audit user")?;
    Ok(CreatedUser { user_id, token })
}

/// Inserts a user and its paper account holding `starting_cash`; `None` when the address is
/// taken (the `lower(email)` unique index decides, so concurrent callers cannot both insert).
/// The caller audits, because it knows why the user was created.
#[tracing::instrument(skip_all)]
pub async fn insert_user(
    conn: &mut PgConnection,
    email: &Email,
    role: Role,
    starting_cash: Decimal,
) -> ApiResult<Option<i32>> {
    let user_id: Option<i32> = raptor_db::query_scalar(
        "insert into users (email, role) values ($1, $2)
         on conflict ((lower(email))) do nothing returning id",
    )
    .bind(email.as_str())
    .bind(role.as_str())
    .fetch_optional(&mut *conn)
    .await
    .context("insert user")?;
    let Some(user_id) = user_id else {
        return Ok(None);
    };
    raptor_db::query("insert into paper_accounts (user_id, cash) values ($1, $2)")
        .bind(user_id)
        .bind(starting_cash)
        .execute(&mut *conn)
        .await
        .context("insert paper account")?;
    Ok(Some(user_id))
}

/// The id of the user with this address (case-insensitive).
pub async fn find_user_by_email(conn: &mut PgConnection, email: &Email) -> ApiResult<Option<i32>> {
    raptor_db::query_scalar("select id from users where lower(email) = lower($1)")
        .bind(email.as_str())
        .fetch_optional(conn)
        .await
        .context("find user by email")
}

/// Creates a service principal's token.
pub async fn create_service_token(conn: &mut PgConnection, name: &str) -> ApiResult<String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::invalid(
            ErrorCode::InvalidName,
            "name must not be empty",
        ));
    }
    let token = auth::new_token()?;
    auth::insert_service_token(conn, name, &token)
        .await
        .context("insert service token")?;
    audit::record(
        conn,
        AuditEvent::new(
            None,
            AuditAction::ServiceTokenCreated,
            json!({ "name": name }),
        ),
    )
    .await
    .context("audit service token")?;
    Ok(token)
}

/// A user's profile row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Profile {
    /// `users.id`.
    pub id: i32,
    /// The sign-up address.
    pub email: String,
    /// Display name.
    pub display_name: Option<String>,
    /// IANA time zone.
    pub time_zone: Option<String>,
    /// Marketing consent.
    pub marketing_opt_in: bool,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

const PROFILE_COLUMNS: &str = "id, email, display_name, time_zone, marketing_opt_in, updated_at";

/// The profile of `user_id`.
pub async fn profile(conn: &mut PgConnection, user_id: i32) -> ApiResult<Profile> {
    raptor_db::query_as(&format!(
        "select {PROFILE_COLUMNS} from users where id = $1"
    ))
    .bind(user_id)
    .fetch_optional(conn)
    .await
    .context("read profile")?
    .ok_or(ApiError::NotFound("user"))
}

/// Applies `changes` to the profile of `user_id` and audits the names of the fields that
/// actually changed (never their values: they are personal data). A patch that changes nothing
/// writes nothing and keeps `updated_at`.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub async fn update_profile(
    conn: &mut PgConnection,
    user_id: i32,
    changes: ProfileChanges,
) -> ApiResult<Profile> {
    if let Some(Some(zone)) = &changes.time_zone {
        // The database's zone list is the one `AT TIME ZONE` accepts: no second copy to drift.
        let known: bool = raptor_db::query_scalar(
            "select exists (select 1 from pg_timezone_names where name = $1)",
        )
        .bind(zone)
        .fetch_one(&mut *conn)
        .await
        .context("check time zone")?;
        if !known {
            return Err(invalid_time_zone(zone));
        }
    }
    let current: Profile = raptor_db::query_as(&format!(
        "select {PROFILE_COLUMNS} from users where id = $1 for update"
    ))
    .bind(user_id)
    .fetch_optional(&mut *conn)
    .await
    .context("lock profile")?
    .ok_or(ApiError::NotFound("user"))?;

    let mut next = current.clone();
    let mut changed: Vec<&'static str> = Vec::new();
    if let Some(name) = changes.display_name {
        if name != current.display_name {
            next.display_name = name;
            changed.push("display_name");
        }
    }
    if let Some(zone) = changes.time_zone {
        if zone != current.time_zone {
            next.time_zone = zone;
            changed.push("time_zone");
        }
    }
    if let Some(opt_in) = changes.marketing_opt_in {
        if opt_in != current.marketing_opt_in {
            next.marketing_opt_in = opt_in;
            changed.push("marketing_opt_in");
        }
    }
    if changed.is_empty() {
        return Ok(current);
    }
    let updated: Profile = raptor_db::query_as(&format!(
        "update users set display_name = $2, time_zone = $3, marketing_opt_in = $4,
                updated_at = now()
          where id = $1 returning {PROFILE_COLUMNS}"
    ))
    .bind(user_id)
    .bind(&next.display_name)
    .bind(&next.time_zone)
    .bind(next.marketing_opt_in)
    .fetch_one(&mut *conn)
    .await
    .context("update profile")?;
    audit::record(
        conn,
        AuditEvent::new(
            Some(user_id),
            AuditAction::ProfileUpdated,
            json!({ "fields": changed }),
        ),
    )
    .await
    .context("audit profile")?;
    Ok(updated)
}

/// The `user` section of an export, and the user's address (rows written before sign-up are
/// known only by it). `404` when the user is gone.
pub(crate) async fn export_user(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<(Value, String)> {
    let user: Option<Value> = raptor_db::query_scalar(
        "select jsonb_build_object('id', id, 'email', email, 'role', role,
                'display_name', display_name, 'time_zone', time_zone,
                'marketing_opt_in', marketing_opt_in, 'created_at', created_at,
                'updated_at', updated_at)
           from users where id = $1",
    )
    .bind(user_id)
    .fetch_optional(&mut *conn)
    .await
    .context("export user")?;
    let user = user.ok_or(ApiError::NotFound("user"))?;
    let email = user["email"].as_str().unwrap_or_default().to_owned();
    Ok((user, email))
}

/// One section of an export after `user`: one table's rows of the user, each as a JSON value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExportSection {
    pub(crate) name: &'static str,
    /// A single object (or `null`), or an array of rows.
    pub(crate) many: bool,
    by: By,
    sql: &'static str,
}

const fn section(name: &'static str, many: bool, by: By, sql: &'static str) -> ExportSection {
    ExportSection {
        name,
        many,
        by,
        sql,
    }
}

/// Everything stored about a user after the `user` section, for access and portability
/// requests: the profile, paper account, orders with legs, fills, positions, audit rows,
/// sessions, sign-in links, outbox messages, waitlist rows and the billing mirror (the
/// idempotency keys follow, from the idempotency crate). Rows keyed by address (waitlist,
/// links, outbox) match the user's email case-insensitively. Credentials are left out: token
/// hashes, and the outbox bodies (they carry sign-in links).
pub(crate) const EXPORT_SECTIONS: &[ExportSection] = &[
    section("profile", false, By::User, "select jsonb_build_object('user_id', id, 'email', email,
            'display_name', display_name, 'time_zone', time_zone,
            'marketing_opt_in', marketing_opt_in, 'updated_at', updated_at)
       from users where id = $1"),
    section("account", true, By::User, "select to_jsonb(a) from paper_accounts a where user_id = $1"),
    section("orders", true, By::User, "select to_jsonb(o) from paper_orders o where user_id = $1
      order by o.created_at, o.id"),
    section("order_legs", true, By::User, "select to_jsonb(l) from paper_order_legs l
       join paper_orders o on o.id = l.order_id where o.user_id = $1
      order by o.created_at, o.id, l.leg_index"),
    section("fills", true, By::User, "select to_jsonb(f) from paper_fills f where user_id = $1 order by f.id"),
    // `open_expiry_date` is the expiry index's key (`expiry_date` while the position is open),
    // not data of the user's.
    section("positions", true, By::User, "select to_jsonb(p) - 'open_expiry_date'
       from paper_positions p where user_id = $1 order by p.symbol"),
    section("audit_log", true, By::User, "select to_jsonb(a) from audit_log a where user_id = $1 order by a.id"),
    section("sessions", true, By::User, "select jsonb_build_object('id', id, 'kind', kind,
            'created_at', created_at, 'expires_at', expires_at)
       from api_tokens where user_id = $1 order by id"),
    section("sign_in_links", true, By::UserOrAddress, "select jsonb_build_object('id', id,
            'purpose', purpose, 'email', email, 'created_at', created_at,
            'expires_at', expires_at, 'used_at', used_at)
       from auth_link_tokens where user_id = $1 or lower(email) = lower($2) order by id"),
    section("email_outbox", true, By::UserOrAddress, "select jsonb_build_object('id', id,
            'kind', kind, 'email', email, 'subject', subject, 'created_at', created_at,
            'sent_at', sent_at)
       from email_outbox where user_id = $1 or lower(email) = lower($2) order by id"),
    section("waitlist", true, By::Address, "select to_jsonb(w) from waitlist_signups w
      where lower(email) = lower($1) order by w.id"),
    section("billing_customer", false, By::User, "select to_jsonb(c) from billing_customers c where user_id = $1"),
    section("billing_subscriptions", true, By::User, "select to_jsonb(s) from billing_subscriptions s
      where s.user_id = $1
         or s.stripe_customer_id in (select stripe_customer_id from billing_customers where user_id = $1)
      order by s.created_at, s.stripe_subscription_id"),
];

/// The rows of `section` for `user_id` (known by `email` too), one at a time.
pub(crate) fn export_rows<'a>(
    conn: &'a mut PgConnection,
    section: &ExportSection,
    user_id: i32,
    email: &'a str,
) -> futures_util::stream::BoxStream<'a, Result<Value, sqlx::Error>> {
    let query = raptor_db::query_scalar(section.sql);
    let query = match section.by {
        By::User => query.bind(user_id),
        By::Address => query.bind(email),
        By::UserOrAddress => query.bind(user_id).bind(email),
    };
    query.fetch(conn)
}

/// What a GDPR statement matches the user's rows by: `$1` the user id, `$1` the address, or
/// `$1` the id and `$2` the address. Rows written before sign-up (waitlist, the first link and
/// its message) are known only by address.
#[derive(Debug, Clone, Copy)]
enum By {
    User,
    Address,
    UserOrAddress,
}

/// The erasure sweep, in the caller's one transaction: deletes the user's idempotency keys,
/// audit rows, sign-in links and outbox messages (by user and by address), waitlist rows (by
/// address), billing mirror rows, and the user (its sessions, paper account, orders, legs,
/// fills and positions cascade); clears the user from operator-owned rows (`quotes`,
/// `feature_flags`). Returns what was deleted; the `user.erased` audit row holds only counts.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub async fn erase(conn: &mut PgConnection, user_id: i32) -> ApiResult<Value> {
    // The account first, as every order path does: an order of this user still in flight
    // finishes (and completes its key) before the sweep touches the key rows, instead of the
    // two deadlocking on key row versus account row.
    raptor_db::query("select 1 from paper_accounts where user_id = $1 for update")
        .bind(user_id)
        .execute(&mut *conn)
        .await
        .context("lock account for erasure")?;
    // The address never changes (no route edits it), so it is read without a lock.
    let email: String = raptor_db::query_scalar("select email from users where id = $1")
        .bind(user_id)
        .fetch_optional(&mut *conn)
        .await
        .context("read user for erasure")?
        .ok_or(ApiError::NotFound("user"))?;
    // A running subscription would go on charging a person we no longer know: it is canceled
    // first (the billing portal, or `POST /api/billing/subscription/cancel`).
    let running: Option<String> = raptor_db::query_scalar(
        "select stripe_subscription_id from billing_subscriptions
          where user_id = $1 and status in ('active', 'trialing', 'past_due', 'unpaid', 'paused')
            and not cancel_at_period_end
          limit 1",
    )
    .bind(user_id)
    .fetch_optional(&mut *conn)
    .await
    .context("read subscriptions for erasure")?;
    if let Some(subscription) = running {
        return Err(ApiError::Conflict {
            code: ErrorCode::SubscriptionActive,
            message: format!(
                "subscription {subscription} is still running; cancel it before erasing the account"
            ),
        });
    }
    let mut counts = serde_json::Map::new();
    // Sign-in links before the user row: a link verification locks its link, then (inserting
    // the session) the user row, so taking them in the other order could deadlock with it.
    sweep(
        conn,
        user_id,
        &email,
        &mut counts,
        &[
            (
                "sign_in_links",
                By::UserOrAddress,
                "delete from auth_link_tokens where user_id = $1 or lower(email) = lower($2)",
            ),
            (
                "email_outbox",
                By::UserOrAddress,
                "delete from email_outbox where user_id = $1 or lower(email) = lower($2)",
            ),
        ],
    )
    .await?;
    // Then the user row (a profile patch locks only this one): sign-ins and patches that start
    // now wait for the sweep, and find no user after it.
    raptor_db::query("select 1 from users where id = $1 for update")
        .bind(user_id)
        .execute(&mut *conn)
        .await
        .context("lock user for erasure")?;
    let keys = raptor_idempotency::cleanup::delete_for_user(conn, user_id)
        .await
        .context("erase idempotency keys")?;
    counts.insert("idempotency_keys".into(), json!(keys));
    // Before the billing rows go: Stripe keeps the customer and may send events about it.
    crate::billing::store::remember_erased_customers(conn, user_id).await?;
    sweep(conn, user_id, &email, &mut counts, &[
        ("audit_rows", By::User, "delete from audit_log where user_id = $1"),
        ("quotes_cleared", By::User, "update quotes set updated_by = null where updated_by = $1"),
        ("flags_cleared", By::User, "update feature_flags set updated_by = null where updated_by = $1"),
        ("waitlist", By::Address, "delete from waitlist_signups where lower(email) = lower($1)"),
        // Subscriptions first: the customer row is how a subscription without a user id
        // (mirrored before the customer was linked) is found.
        ("billing_subscriptions", By::User, "delete from billing_subscriptions
          where user_id = $1
             or stripe_customer_id in (select stripe_customer_id from billing_customers where user_id = $1)"),
        ("billing_customers", By::User, "delete from billing_customers where user_id = $1"),
        ("fills", By::User, "delete from paper_fills where user_id = $1"),
        ("sessions", By::User, "delete from api_tokens where user_id = $1"),
    ])
    .await?;
    raptor_db::query("delete from users where id = $1")
        .bind(user_id)
        .execute(&mut *conn)
        .await
        .context("erase user")?;
    // The erasure itself is recorded without the user's id or address: only that it happened
    // and how much it removed.
    audit::record(
        conn,
        AuditEvent::new(None, AuditAction::UserErased, Value::Object(counts.clone())),
    )
    .await
    .context("audit erasure")?;
    let mut erased = counts;
    erased.insert("user_id".into(), json!(user_id));
    Ok(Value::Object(erased))
}

/// Runs each `(name, by, sql)` erasure statement, recording its affected rows under `name`.
async fn sweep(
    conn: &mut PgConnection,
    user_id: i32,
    email: &str,
    counts: &mut serde_json::Map<String, Value>,
    statements: &[(&'static str, By, &'static str)],
) -> ApiResult<()> {
    for &(name, by, sql) in statements {
        let query = raptor_db::query(sql);
        let query = match by {
            By::User => query.bind(user_id),
            By::Address => query.bind(email),
            By::UserOrAddress => query.bind(user_id).bind(email),
        };
        let affected = query
            .execute(&mut *conn)
            .await
            .context("erase section")?
            .rows_affected();
        counts.insert(name.into(), json!(affected));
    }
    Ok(())
}
