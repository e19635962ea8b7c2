//! Shared state: the pool, typed configuration, the idempotency service and the clock.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef;
use chrono::{DateTime, NaiveDate, Utc};
use raptor_idempotency::{Idempotency, IdempotencyConfig};
use rust_decimal::Decimal;
use sqlx::PgPool;

use crate::audit::ReplayAuditor;

/// API settings. The server builds them from the environment; libraries never read it.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// `MBT_NEW_ORDERS_DISABLED`: refuse new orders, rolls and closes (cancels still work).
    pub new_orders_disabled: bool,
    /// `RAPTOR_PAPER_STARTING_CASH`: a new or reset paper account's cash.
    pub paper_starting_cash: Decimal,
    /// `RAPTOR_REQUEST_TIMEOUT_SECS`.
    pub request_timeout: Duration,
    /// Largest accepted request body (1 MiB by contract).
    pub body_limit: usize,
    /// `RAPTOR_CORS_ORIGINS`.
    pub cors_origins: Vec<String>,
    /// Fees charged by the paper engine (zero by default, like Alpaca paper).
    pub fees: raptor_engine::FeeSchedule,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            new_orders_disabled: false,
            paper_starting_cash: Decimal::new(10_000_000, 2),
            request_timeout: Duration::from_secs(30),
            body_limit: 1024 * 1024,
            cors_origins: Vec::new(),
            fees: raptor_engine::FeeSchedule::default(),
        }
    }
}

/// Where "now" comes from: the system clock in production, a fixed one in tests.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;
    /// Today's date (UTC), used for option expiry.
    fn today(&self) -> NaiveDate {
        self.now().date_naive()
    }
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock stopped at one instant (tests).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub DateTime<Utc>);

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        self.0
    }
}

/// Cheap-to-clone handle on everything a handler needs.
#[derive(Clone)]
pub struct ApiState(Arc<ApiInner>);

/// The contents of [`ApiState`].
pub struct ApiInner {
    /// The pool.
    pub db: PgPool,
    /// Settings.
    pub config: ApiConfig,
    /// The idempotency service.
    pub idempotency: Idempotency,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The paper fill engine.
    pub engine: raptor_engine::Engine,
}

impl ApiState {
    /// Builds the state; the idempotency service records replays through [`crate::audit`].
    pub fn new(
        db: PgPool,
        config: ApiConfig,
        idempotency: IdempotencyConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let idempotency = Idempotency::new(db.clone(), idempotency, Some(Arc::new(ReplayAuditor)));
        let engine = raptor_engine::Engine {
            fees: config.fees.clone(),
        };
        Self(Arc::new(ApiInner {
            db,
            config,
            idempotency,
            clock,
            engine,
        }))
    }
}

impl Deref for ApiState {
    type Target = ApiInner;

    fn deref(&self) -> &ApiInner {
        &self.0
    }
}

impl FromRef<ApiState> for Idempotency {
    fn from_ref(state: &ApiState) -> Self {
        state.idempotency.clone()
    }
}
