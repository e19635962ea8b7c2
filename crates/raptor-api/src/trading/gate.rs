//! Gates of the order routes, run as extractors before the idempotency claim (CONTRACT §5):
//! authenticate, then the kill switch, then paper/live. So a replay can never bypass a gate.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;

use crate::auth::AuthUser;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::state::ApiState;

/// An authenticated user whose account is a paper account.
#[derive(Debug, Clone, Copy)]
pub struct PaperTrader {
    /// `users.id` (= the account's key).
    pub user_id: i32,
}

/// [`PaperTrader`] on a route that opens new orders: also refused while
/// `MBT_NEW_ORDERS_DISABLED` is on.
#[derive(Debug, Clone, Copy)]
pub struct NewOrderGate(pub PaperTrader);

async fn paper_trader<S>(parts: &mut Parts, state: &S, new_order: bool) -> ApiResult<PaperTrader>
where
    S: Send + Sync,
    ApiState: FromRef<S>,
{
    let user = AuthUser::from_request_parts(parts, state).await?;
    let state = ApiState::from_ref(state);
    if new_order && state.config.new_orders_disabled {
        return Err(ApiError::NewOrdersDisabled);
    }
    let mode: Option<String> =
        sqlx::query_scalar("select mode from paper_accounts where user_id = $1")
            .bind(user.id)
            .fetch_optional(&state.db)
            .await
            .context("read account mode")?;
    match mode.as_deref() {
        Some("paper") => Ok(PaperTrader { user_id: user.id }),
        Some(_) => Err(ApiError::LiveTradingUnavailable),
        None => Err(ApiError::Forbidden),
    }
}

impl<S> FromRequestParts<S> for PaperTrader
where
    S: Send + Sync,
    ApiState: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        paper_trader(parts, state, false).await
    }
}

impl<S> FromRequestParts<S> for NewOrderGate
where
    S: Send + Sync,
    ApiState: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        paper_trader(parts, state, true).await.map(Self)
    }
}
