//! The engine's typed errors. Each carries a stable machine `code()`; none knows about HTTP.

use rust_decimal::Decimal;

/// Why an order was refused. Nothing was applied when one of these is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderRejection {
    /// A leg has no quote, or its quote cannot be traded against (far side not positive, crossed).
    #[error("no usable quote for {symbol}")]
    QuoteUnavailable {
        /// The leg whose quote is missing or unusable.
        symbol: String,
    },
    /// An option leg is past its expiry date.
    #[error("option contract {symbol} has expired")]
    ContractExpired {
        /// The expired contract.
        symbol: String,
    },
    /// The order's cost exceeds cash minus the reservations of open orders.
    #[error("insufficient buying power: {buying_power} available, {cost_basis} required")]
    InsufficientBuyingPower {
        /// Cash minus the open orders' reservations.
        buying_power: Decimal,
        /// What this order would cost, fees included.
        cost_basis: Decimal,
    },
    /// A closing leg asks for more than is held (net of other open closing orders), or an
    /// equity would be sold short.
    #[error(
        "insufficient qty available for {symbol} (requested: {requested}, available: {available})"
    )]
    InsufficientQty {
        /// The leg's symbol.
        symbol: String,
        /// What can still be closed (or sold).
        available: Decimal,
        /// What the leg asked for.
        requested: Decimal,
    },
    /// After the order a short option would not be covered (or a short put would exist).
    #[error("short option {symbol} would be uncovered")]
    UncoveredShortOption {
        /// The first uncovered short, see `Engine::submit`.
        symbol: String,
    },
    /// The order is structurally invalid (shape, quantities, prices, intents).
    #[error("invalid order: {reason}")]
    InvalidOrder {
        /// Human-readable explanation.
        reason: String,
    },
}

impl OrderRejection {
    /// The stable machine code for this rejection.
    pub fn code(&self) -> &'static str {
        match self {
            Self::QuoteUnavailable { .. } => "quote_unavailable",
            Self::ContractExpired { .. } => "contract_expired",
            Self::InsufficientBuyingPower { .. } => "insufficient_buying_power",
            Self::InsufficientQty { .. } => "insufficient_qty",
            Self::UncoveredShortOption { .. } => "uncovered_short_option",
            Self::InvalidOrder { .. } => "invalid_order",
        }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        Self::InvalidOrder {
            reason: reason.into(),
        }
    }
}

/// A symbol that is neither an equity ticker nor a compact OCC option symbol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SymbolError {
    /// The symbol is empty.
    #[error("symbol is empty")]
    Empty,
    /// The symbol contains lower-case letters; symbols are never normalised silently.
    #[error("symbol {symbol:?} must be upper case")]
    NotUppercase {
        /// The rejected input.
        symbol: String,
    },
    /// The symbol does not have the shape of a ticker or an OCC symbol.
    #[error("{symbol:?} is not an equity ticker or an OCC option symbol: {reason}")]
    Malformed {
        /// The rejected input.
        symbol: String,
        /// Which rule it broke.
        reason: &'static str,
    },
    /// The OCC expiry `YYMMDD` is not a calendar date.
    #[error("{symbol:?} has an invalid expiry date")]
    InvalidExpiry {
        /// The rejected input.
        symbol: String,
    },
}

impl SymbolError {
    /// The stable machine code, the same for every variant.
    pub fn code(&self) -> &'static str {
        "invalid_symbol"
    }
}

/// A string that names none of an enum's variants (see the `FromStr` impls in `order`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}")]
pub struct UnknownVariant {
    /// Which enum was being parsed, e.g. `order status`.
    pub kind: &'static str,
    /// The rejected input.
    pub value: String,
}
