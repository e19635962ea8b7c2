//! SQL for users, their paper account and their data subject rights.

use rust_decimal::Decimal;
use serde_json::{json, Value};
use sqlx::PgConnection;

use crate::audit::{self, AuditEvent};
use crate::auth::{self, Role};
use crate::error::{ApiError, ApiResult, ResultExt};

/// A created user and its first session token (shown once).
#[derive(Debug, Clone)]
pub struct CreatedUser {
    /// `users.id`.
    pub user_id: i32,
    /// The bearer token.
    pub token: String,
}

/// Creates a user, its paper account holding `starting_cash`, and a session token.
pub async fn create_user(
    conn: &mut PgConnection,
    email: &str,
    role: Role,
    starting_cash: Decimal,
) -> ApiResult<CreatedUser> {
    let email = email.trim();
    if email.is_empty() || !email.contains('@') {
        return Err(ApiError::invalid(
            "invalid_email",
            "email must be an address",
        ));
    }
    let user_id: i32 = sqlx::query_scalar(
        "insert into users (email, role) values ($1, $2)
         on conflict ((lower(email))) do nothing returning id",
    )
    .bind(email)
    .bind(role.as_str())
    .fetch_optional(&mut *conn)
    .await
    .context("insert user")?
    .ok_or_else(|| ApiError::Conflict {
        code: "email_taken",
        message: format!("a user with email {email} exists"),
    })?;
    sqlx::query("insert into paper_accounts (user_id, cash) values ($1, $2)")
        .bind(user_id)
        .bind(starting_cash)
        .execute(&mut *conn)
        .await
        .context("insert paper account")?;
    let token = auth::new_token()?;
    auth::insert_session_token(conn, user_id, &token)
        .await
        .context("insert token")?;
    audit::record(
        conn,
        AuditEvent::new(
            Some(user_id),
            "user.created",
            json!({ "role": role.as_str(), "starting_cash": starting_cash.to_string() }),
        ),
    )
    .await
    .context("audit user")?;
    Ok(CreatedUser { user_id, token })
}

/// Creates a service principal's token.
pub async fn create_service_token(conn: &mut PgConnection, name: &str) -> ApiResult<String> {
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::invalid("invalid_name", "name must not be empty"));
    }
    let token = auth::new_token()?;
    auth::insert_service_token(conn, name, &token)
        .await
        .context("insert service token")?;
    audit::record(
        conn,
        AuditEvent::new(None, "service_token.created", json!({ "name": name })),
    )
    .await
    .context("audit service token")?;
    Ok(token)
}

/// Everything stored about `user_id`, for access and portability requests.
pub async fn export(conn: &mut PgConnection, user_id: i32) -> ApiResult<Value> {
    let user: Option<Value> = sqlx::query_scalar(
        "select jsonb_build_object('id', id, 'email', email, 'role', role,
                'display_name', display_name, 'time_zone', time_zone,
                'marketing_opt_in', marketing_opt_in, 'created_at', created_at)
           from users where id = $1",
    )
    .bind(user_id)
    .fetch_optional(&mut *conn)
    .await
    .context("export user")?;
    let user = user.ok_or(ApiError::NotFound("user"))?;
    let mut sections = serde_json::Map::new();
    sections.insert("user".into(), user);
    // Each section is one table's rows for this user, as JSON.
    for (name, sql) in [
        ("account", "select coalesce(jsonb_agg(to_jsonb(a)), '[]') from paper_accounts a where user_id = $1"),
        ("orders", "select coalesce(jsonb_agg(to_jsonb(o) order by o.created_at), '[]') from paper_orders o where user_id = $1"),
        ("positions", "select coalesce(jsonb_agg(to_jsonb(p) order by p.symbol), '[]') from paper_positions p where user_id = $1"),
        ("audit_log", "select coalesce(jsonb_agg(to_jsonb(a) order by a.id), '[]') from audit_log a where user_id = $1"),
    ] {
        let rows: Value = sqlx::query_scalar(sql)
            .bind(user_id)
            .fetch_one(&mut *conn)
            .await
            .context("export section")?;
        sections.insert(name.into(), rows);
    }
    let keys = raptor_idempotency::cleanup::export_for_user(conn, user_id)
        .await
        .context("export idempotency keys")?;
    sections.insert("idempotency_keys".into(), Value::Array(keys));
    Ok(Value::Object(sections))
}

/// The erasure sweep: deletes the user's idempotency keys, audit rows and the user (its
/// tokens, paper account, orders and positions cascade). Returns what was deleted.
pub async fn erase(conn: &mut PgConnection, user_id: i32) -> ApiResult<Value> {
    // The account first, as every order path does: an order of this user still in flight
    // finishes (and completes its key) before the sweep touches the key rows, instead of the
    // two deadlocking on key row versus account row.
    sqlx::query("select 1 from paper_accounts where user_id = $1 for update")
        .bind(user_id)
        .execute(&mut *conn)
        .await
        .context("lock account for erasure")?;
    let keys = raptor_idempotency::cleanup::delete_for_user(conn, user_id)
        .await
        .context("erase idempotency keys")?;
    let audit_rows = sqlx::query("delete from audit_log where user_id = $1")
        .bind(user_id)
        .execute(&mut *conn)
        .await
        .context("erase audit rows")?
        .rows_affected();
    let users = sqlx::query("delete from users where id = $1")
        .bind(user_id)
        .execute(&mut *conn)
        .await
        .context("erase user")?
        .rows_affected();
    if users == 0 {
        return Err(ApiError::NotFound("user"));
    }
    // The erasure itself is recorded without the user's id: only that it happened.
    audit::record(
        conn,
        AuditEvent::new(
            None,
            "user.erased",
            json!({ "idempotency_keys": keys, "audit_rows": audit_rows }),
        ),
    )
    .await
    .context("audit erasure")?;
    Ok(json!({ "user_id": user_id, "idempotency_keys": keys, "audit_rows": audit_rows }))
}
