//! Gates of the order routes, run as extractors before the idempotency claim:
//! authenticate, then the kill switch, then paper/live. So a replay can never bypass a gate.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use sqlx::PgPool;

use super::account_writes::{AccountWrite, AccountWrites};
use crate::auth::{AccountMode, AuthUser};
use crate::error::{ApiError, ApiResult, ResultExt};

/// What the order gates read of the configuration (a sub-state of the API's).
#[derive(Debug, Clone, Copy)]
pub struct OrderGates {
    /// `MBT_NEW_ORDERS_DISABLED`.
    pub new_orders_disabled: bool,
}

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
    PgPool: FromRef<S>,
    OrderGates: FromRef<S>,
{
    let user = AuthUser::from_request_parts(parts, state).await?;
    if new_order && OrderGates::from_ref(state).new_orders_disabled {
        return Err(ApiError::NewOrdersDisabled);
    }
    // Read with the token (one lookup for both); the order transaction re-checks it under the
    // account lock.
    let mode = match parts.extensions.get::<AccountMode>() {
        Some(AccountMode(mode)) => mode.clone(),
        None => {
            let mut conn = raptor_db::conn(&PgPool::from_ref(state)).await?;
            let mode =
                raptor_db::query_scalar("select mode from paper_accounts where user_id = $1")
                    .bind(user.id)
                    .fetch_optional(&mut *conn)
                    .await
                    .context("read account mode")?;
            conn.finish().await?;
            mode
        }
    };
    match mode.as_deref() {
        Some("paper") => Ok(PaperTrader { user_id: user.id }),
        Some(_) => Err(ApiError::LiveTradingUnavailable),
        None => Err(ApiError::Forbidden),
    }
}

impl<S> FromRequestParts<S> for PaperTrader
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    OrderGates: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        paper_trader(parts, state, false).await
    }
}

impl<S> FromRequestParts<S> for NewOrderGate
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    OrderGates: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        paper_trader(parts, state, true).await.map(Self)
    }
}

impl raptor_idempotency::Authenticated for PaperTrader {
    fn scope(&self) -> raptor_idempotency::Scope {
        raptor_idempotency::Scope {
            user_id: Some(self.user_id),
        }
    }
}

/// What a write to a paper account authenticates with before its claim: the gates (`G`: the
/// paper check, and for new orders the kill switch), then a permit to write to the account, in
/// that order, so a refused request waits for no permit and a waiting one holds no connection.
/// The permit is held until the handler ends.
#[derive(Debug)]
pub struct Writer<G> {
    /// The gated principal.
    pub gate: G,
    _permit: AccountWrite,
}

/// A write that opens a new order (place, roll, close).
pub type OrderWriter = Writer<NewOrderGate>;

/// A write to the account that opens no order (reset).
pub type AccountWriter = Writer<PaperTrader>;

impl<G> Writer<G>
where
    G: Copy + Into<PaperTrader>,
{
    /// The trader.
    pub fn trader(&self) -> PaperTrader {
        self.gate.into()
    }
}

impl From<NewOrderGate> for PaperTrader {
    fn from(gate: NewOrderGate) -> Self {
        gate.0
    }
}

impl<S, G> FromRequestParts<S> for Writer<G>
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    Arc<AccountWrites>: FromRef<S>,
    G: FromRequestParts<S, Rejection = ApiError> + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        let gate = G::from_request_parts(parts, state).await?;
        let permit = AccountWrite::from_request_parts(parts, state).await?;
        Ok(Self {
            gate,
            _permit: permit,
        })
    }
}

impl<G> raptor_idempotency::Authenticated for Writer<G>
where
    G: Copy + Into<PaperTrader> + Send,
{
    fn scope(&self) -> raptor_idempotency::Scope {
        raptor_idempotency::Authenticated::scope(&self.trader())
    }
}
