//! Gates of the order routes, run as extractors before the idempotency claim:
//! authenticate, then the kill switch, then paper/live. So a replay can never bypass a gate.

use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use sqlx::PgPool;

use raptor_db::flag::{RuntimeFlag, READ_TIMEOUT as FLAG_READ_TIMEOUT};
use raptor_idempotency::{Authenticate, Lent, Scope};

use super::account_writes::{AccountWrite, AccountWrites};
use crate::auth::{AccountMode, AuthUser};
use crate::error::{ApiError, ApiResult, ResultExt};

/// The trading halt's name, as the environment variable (its default) and the run-time flag
/// (`feature_flags`, `PUT /api/admin/flags/MBT_NEW_ORDERS_DISABLED`).
pub const MBT_NEW_ORDERS_DISABLED: &str = "MBT_NEW_ORDERS_DISABLED";

/// What the order gates read (a sub-state of the API's): the trading halt, a run-time flag
/// re-read at most every `raptor_db::flag::REFRESH`, so a flip made on any replica reaches
/// this one within a second.
#[derive(Debug, Clone)]
pub struct OrderGates {
    /// `MBT_NEW_ORDERS_DISABLED`, with its run-time override.
    pub halt: Arc<RuntimeFlag>,
    /// The pool the flag is read on (its own, apart from the request pool: a saturated pool
    /// does not hide a halt).
    pub flags: PgPool,
}

impl OrderGates {
    /// Whether new orders are switched off now.
    pub async fn new_orders_disabled(&self) -> bool {
        self.halt.get(&self.flags, FLAG_READ_TIMEOUT).await
    }
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

/// The paper-account gate (and, for `new_order`, the kill switch), with the connection the
/// authentication lent.
async fn paper_trader<S>(
    parts: &mut Parts,
    state: &S,
    new_order: bool,
) -> ApiResult<(PaperTrader, Lent)>
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    OrderGates: FromRef<S>,
{
    let (user, lent) = AuthUser::authenticate(parts, state).await?;
    if new_order && OrderGates::from_ref(state).new_orders_disabled().await {
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
        Some("paper") => Ok((PaperTrader { user_id: user.id }, lent)),
        Some(_) => Err(ApiError::LiveTradingUnavailable),
        None => Err(ApiError::Forbidden),
    }
}

fn trader_scope(user_id: i32) -> Scope {
    Scope {
        user_id: Some(user_id),
    }
}

impl<S> Authenticate<S> for PaperTrader
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    OrderGates: FromRef<S>,
{
    type Rejection = ApiError;

    async fn authenticate(parts: &mut Parts, state: &S) -> ApiResult<(Self, Lent)> {
        paper_trader(parts, state, false).await
    }

    fn scope(&self) -> Scope {
        trader_scope(self.user_id)
    }
}

impl<S> Authenticate<S> for NewOrderGate
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    OrderGates: FromRef<S>,
{
    type Rejection = ApiError;

    async fn authenticate(parts: &mut Parts, state: &S) -> ApiResult<(Self, Lent)> {
        let (trader, lent) = paper_trader(parts, state, true).await?;
        Ok((Self(trader), lent))
    }

    fn scope(&self) -> Scope {
        trader_scope(self.0.user_id)
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
        let (trader, lent) = paper_trader(parts, state, false).await?;
        lent.finish().await?;
        Ok(trader)
    }
}

/// What a write to a paper account authenticates with before its claim: the gates (`G`: the
/// paper check, and for new orders the kill switch), then a permit to write to the account, in
/// that order, so a refused request waits for no permit and a waiting one holds no connection
/// (it is handed the lent connection, and lets go of it before it waits). The permit is held
/// until the handler ends.
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

impl<S, G> Authenticate<S> for Writer<G>
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    Arc<AccountWrites>: FromRef<S>,
    G: Authenticate<S, Rejection = ApiError> + Copy + Into<PaperTrader>,
{
    type Rejection = ApiError;

    async fn authenticate(parts: &mut Parts, state: &S) -> ApiResult<(Self, Lent)> {
        let (gate, mut lent) = G::authenticate(parts, state).await?;
        let user_id = gate.into().user_id;
        // A permit that must wait is waited for without the lent connection.
        let permit = AccountWrite::acquire(state, user_id, &mut lent).await?;
        Ok((
            Self {
                gate,
                _permit: permit,
            },
            lent,
        ))
    }

    fn scope(&self) -> Scope {
        trader_scope(self.trader().user_id)
    }
}
