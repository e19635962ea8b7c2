//! `PUT /api/admin/flags/{name}`.

use axum::extract::State;
use axum::Json;
use raptor_idempotency::FLAG_IDEMPOTENCY_MIDDLEWARE;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use crate::audit::{self, AuditAction, AuditEvent};
use crate::auth::Operator;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::extract::{ApiJson, ApiPath};
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
