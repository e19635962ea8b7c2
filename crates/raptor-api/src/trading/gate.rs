//! Gates of the order routes, run as extractors before the idempotency claim:
//! authenticate, then the kill switch, then paper/live. So a replay can never bypass a gate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{FromRef, FromRequestParts};
use axum::http::request::Parts;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::auth::{AccountMode, AuthUser};
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
    // Read with the token (one lookup for both); the order transaction re-checks it under the
    // account lock.
    let mode = match parts.extensions.get::<AccountMode>() {
        Some(AccountMode(mode)) => mode.clone(),
        None => {
            let mut conn = raptor_db::conn(&state.db).await?;
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

/// Per-account write concurrency, in this process. Writes on one account serialise on its row
/// lock anyway; without this, many concurrent writes for one account would each hold a pooled
/// connection while they wait for that lock, and starve every other user of connections.
#[derive(Debug)]
pub struct AccountWrites {
    permits: usize,
    wait: Duration,
    accounts: Mutex<HashMap<i32, Arc<Semaphore>>>,
}

impl AccountWrites {
    /// `permits` concurrent writes per account; a write waits at most `wait` for one.
    pub fn new(permits: usize, wait: Duration) -> Self {
        Self {
            permits: permits.max(1),
            wait,
            accounts: Mutex::new(HashMap::new()),
        }
    }

    fn semaphore(&self, user_id: i32) -> Arc<Semaphore> {
        let mut accounts = self
            .accounts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if accounts.len() > 10_000 {
            // Forget idle accounts (only the map holds their semaphore).
            accounts.retain(|_, s| Arc::strong_count(s) > 1);
        }
        accounts
            .entry(user_id)
            .or_insert_with(|| Arc::new(Semaphore::new(self.permits)))
            .clone()
    }

    async fn acquire(&self, user_id: i32) -> ApiResult<OwnedSemaphorePermit> {
        let semaphore = self.semaphore(user_id);
        match tokio::time::timeout(self.wait, semaphore.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_closed)) => Err(ApiError::Internal(anyhow::anyhow!(
                "account write semaphore closed"
            ))),
            Err(_) => {
                tracing::info!(
                    user.id = user_id,
                    "too many concurrent writes on one account"
                );
                Err(ApiError::TooManyRequests {
                    retry_after_secs: 1,
                })
            }
        }
    }
}

/// A permit to write to the caller's account, held until the handler ends. Put it after the
/// gates and before the idempotency claim, so a waiting request holds no connection.
#[derive(Debug)]
pub struct AccountWrite {
    _permit: OwnedSemaphorePermit,
}

impl<S> FromRequestParts<S> for AccountWrite
where
    S: Send + Sync,
    ApiState: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> ApiResult<Self> {
        let user = AuthUser::from_request_parts(parts, state).await?;
        let state = ApiState::from_ref(state);
        let permit = state.account_writes.acquire(user.id).await?;
        Ok(Self { _permit: permit })
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
    ApiState: FromRef<S>,
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
