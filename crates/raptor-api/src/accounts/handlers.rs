//! `GET /api/account/export`, `POST /api/account/erasure`.

use axum::extract::State;
use axum::Json;
use serde_json::Value;

use crate::auth::AuthUser;
use crate::error::{ApiResult, ErrorBody, ResultExt};
use crate::state::ApiState;

use super::store;

/// Everything stored about the caller (GDPR access and portability), including idempotency keys.
#[utoipa::path(get, path = "/api/account/export", tag = "account",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "the caller's data", body = Object),
        (status = 401, description = "unauthenticated", body = ErrorBody),
    ))]
pub(crate) async fn export_account(
    State(state): State<ApiState>,
    user: AuthUser,
) -> ApiResult<Json<Value>> {
    let mut tx = state.db.begin().await.context("begin")?;
    let data = store::export(&mut tx, user.id).await?;
    tx.commit().await.context("commit")?;
    Ok(Json(data))
}

/// Erase the caller (GDPR): idempotency keys, audit rows, orders, positions, account, tokens.
#[utoipa::path(post, path = "/api/account/erasure", tag = "account",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "erased; counts of deleted rows", body = Object),
        (status = 401, description = "unauthenticated", body = ErrorBody),
    ))]
pub(crate) async fn erase_account(
    State(state): State<ApiState>,
    user: AuthUser,
) -> ApiResult<Json<Value>> {
    let mut tx = state.db.begin().await.context("begin")?;
    let erased = store::erase(&mut tx, user.id).await?;
    tx.commit().await.context("commit")?;
    Ok(Json(erased))
}
