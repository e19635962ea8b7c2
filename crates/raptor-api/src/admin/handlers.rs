//! `PUT /api/admin/flags/{name}`, `GET /api/admin/audit`.

use axum::extract::State;
use axum::Json;
use raptor_idempotency::FLAG_IDEMPOTENCY_MIDDLEWARE;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::IntoParams;
use utoipa::ToSchema;

use crate::audit::{self, AuditAction, AuditEvent};
use crate::auth::Operator;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::trading::dto::{list_limit, paginate, Cursor};

use super::support::{self, Actor, AuditEntry};
use crate::state::ApiState;
use crate::trading::MBT_NEW_ORDERS_DISABLED;

/// New value of a flag.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetFlagRequest {
    /// On or off.
    pub enabled: bool,
}

/// A flag's value.
#[derive(Debug, Serialize, ToSchema)]
pub struct FlagResponse {
    /// The flag's name.
    pub name: String,
    /// Its value now.
    pub enabled: bool,
}

/// The run-time flags an operator can set.
#[derive(Debug, Clone, Copy)]
enum Flag {
    IdempotencyMiddleware,
    NewOrdersDisabled,
}

/// Set a run-time flag (operators)
///
/// Turns a run-time flag on or off: `FLAG_IDEMPOTENCY_MIDDLEWARE` (the idempotency kill switch) or
/// `MBT_NEW_ORDERS_DISABLED` (the trading halt; on, new orders answer `503 new_orders_disabled`).
/// `404 not_found` for any other name. Audited; reaches every server process within one second.
#[utoipa::path(put, path = "/api/admin/flags/{name}", tag = "admin",
    security(("bearer" = [])),
    params(("name" = String, Path, description = "Flag name: FLAG_IDEMPOTENCY_MIDDLEWARE or MBT_NEW_ORDERS_DISABLED", example = "MBT_NEW_ORDERS_DISABLED")),
    request_body = SetFlagRequest,
    responses(
        (status = 200, description = "stored", body = FlagResponse),
    ))]
pub(crate) async fn set_flag(
    State(state): State<ApiState>,
    operator: Operator,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<SetFlagRequest>,
) -> ApiResult<Json<FlagResponse>> {
    let flag = match name.as_str() {
        FLAG_IDEMPOTENCY_MIDDLEWARE => Flag::IdempotencyMiddleware,
        MBT_NEW_ORDERS_DISABLED => Flag::NewOrdersDisabled,
        _ => return Err(ApiError::NotFound("flag")),
    };
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    match flag {
        Flag::IdempotencyMiddleware => {
            state
                .idempotency
                .store_enabled(&mut tx, request.enabled, Some(operator.id))
                .await
        }
        Flag::NewOrdersDisabled => {
            state
                .new_orders_halt
                .store(&mut tx, request.enabled, Some(operator.id))
                .await
        }
    }
    .context("store flag")?;
    audit::record(
        &mut tx,
        AuditEvent::new(
            Some(operator.id),
            AuditAction::FlagSet,
            json!({ "name": name, "enabled": request.enabled }),
        ),
    )
    .await
    .context("audit flag")?;
    tx.commit().await.context("commit flag")?;
    // Only a committed flip applies here; the other processes read it within a second.
    match flag {
        Flag::IdempotencyMiddleware => state.idempotency.apply_enabled(request.enabled),
        Flag::NewOrdersDisabled => state.new_orders_halt.set_local(request.enabled),
    }
    Ok(Json(FlagResponse {
        name,
        enabled: request.enabled,
    }))
}

/// `GET /api/admin/audit` query.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditListQuery {
    /// The user whose trail to read (`users.id`).
    pub user_id: i32,
    /// At most this many, newest first (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The previous page's `next_cursor`, as it is.
    #[param(min_length = 1, max_length = 200)]
    pub cursor: Option<String>,
}

/// A page of a user's audit trail, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuditListResponse {
    /// The rows of this page.
    pub data: Vec<AuditEntry>,
    /// Whether older rows follow.
    pub has_more: bool,
    /// The `cursor` of the next page (`null` on the last one).
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// Read a user's audit trail (operators)
///
/// Everything the audit log holds for a user (orders, sessions, billing, support actions), newest
/// first, a page at a time: pass `next_cursor` back as `cursor`. Reading it is itself audited on
/// the same trail (`audit.read`). `400 invalid_query` for a bad parameter or cursor.
#[utoipa::path(get, path = "/api/admin/audit", tag = "admin",
    security(("bearer" = [])),
    params(AuditListQuery),
    responses(
        (status = 200, description = "a page of the user's audit trail", body = AuditListResponse),
    ))]
pub(crate) async fn list_audit(
    State(state): State<ApiState>,
    operator: Operator,
    ApiQuery(query): ApiQuery<AuditListQuery>,
) -> ApiResult<Json<AuditListResponse>> {
    let limit = list_limit(query.limit)?;
    let before = query
        .cursor
        .as_deref()
        .map(|text| {
            let cursor = Cursor::decode(text)?;
            let id = cursor.id.parse::<i64>().map_err(|_| {
                ApiError::bad_request(
                    crate::codes::ErrorCode::InvalidQuery,
                    "cursor is not an audit cursor",
                )
            })?;
            Ok::<_, ApiError>((cursor.at, id))
        })
        .transpose()?;
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    let rows = support::audit_trail(
        &mut tx,
        query.user_id,
        before,
        limit + 1,
        &Actor::Operator(operator.id),
    )
    .await?;
    tx.commit().await.context("commit audit read")?;
    let (data, has_more, next_cursor) = paginate(rows, limit, |row| Cursor {
        at: row.created_at,
        id: row.id.to_string(),
    });
    Ok(Json(AuditListResponse {
        data,
        has_more,
        next_cursor,
    }))
}
