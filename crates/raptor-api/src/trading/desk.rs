//! What the book needs besides a connection: the clock, the engine and the account limits.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::clock::Clock;

/// The book's context inside a claim: the clock, the paper engine and the account limits. It
/// holds no pool, so code running under a claim can write only through the claim's
/// transaction (a second connection would escape the claim's at-most-once guarantee).
#[derive(Clone)]
pub struct Desk {
    clock: Arc<dyn Clock>,
    engine: Arc<raptor_engine::Engine>,
    limits: TradingLimits,
}

/// The per-account limits of the book.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TradingLimits {
    /// `RAPTOR_MAX_OPEN_ORDERS`: resting orders allowed per account.
    pub(crate) max_open_orders: usize,
    /// `RAPTOR_PAPER_STARTING_CASH`: the cash an account is reset to.
    pub(crate) starting_cash: Decimal,
}

impl Desk {
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        engine: raptor_engine::Engine,
        limits: TradingLimits,
    ) -> Self {
        Self {
            clock,
            engine: Arc::new(engine),
            limits,
        }
    }

    /// The current instant.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The paper fill engine.
    pub(crate) fn engine(&self) -> &raptor_engine::Engine {
        &self.engine
    }

    /// The account limits.
    pub(crate) fn limits(&self) -> TradingLimits {
        self.limits
    }
}
