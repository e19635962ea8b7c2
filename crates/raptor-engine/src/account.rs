//! The inputs the engine decides against: an account snapshot and top-of-book quotes.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::order::{OrderSpec, PositionIntent};
use crate::position::Position;

/// The latest bid and ask for one symbol, set by operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quote {
    /// Best price a seller receives.
    pub bid: Decimal,
    /// Best price a buyer pays.
    pub ask: Decimal,
}

/// An accepted order that has not filled, as far as the engine cares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenOrder {
    /// The order.
    pub spec: OrderSpec,
    /// Cash set aside for it when it was accepted (`Decision::Rest`).
    pub reserved_cash: Decimal,
}

/// A paper cash account (no margin) at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccountState {
    /// Settled cash in dollars.
    pub cash: Decimal,
    /// Positions keyed by symbol. `Engine::apply` keeps flat positions (qty 0) so their
    /// cumulative realized P&L survives.
    pub positions: BTreeMap<String, Position>,
    /// Resting orders: they hold cash (reservations) and closing quantity. A caller may list
    /// only the orders that can matter to one decision (those on its symbols and underlyings)
    /// and carry the others' reservations in `reserved_elsewhere`.
    pub open_orders: Vec<OpenOrder>,
    /// Cash reserved by open orders that are not in `open_orders`.
    pub reserved_elsewhere: Decimal,
}

impl AccountState {
    /// An account holding only cash.
    pub fn with_cash(cash: Decimal) -> AccountState {
        AccountState {
            cash,
            ..AccountState::default()
        }
    }

    /// Cash minus the reservations of open orders and the maximum loss of the option spreads
    /// held ([`AccountState::spread_requirement`]): a cash account has no leverage, so buying
    /// power never exceeds the cash it holds less what that cash is promised to.
    pub fn buying_power(&self) -> Decimal {
        self.cash - self.reserved_cash() - self.spread_requirement()
    }

    /// The cash held against the maximum loss of the account's short calls, each paired with a
    /// long call that limits it ([`crate::spread::spread_requirement`]).
    pub fn spread_requirement(&self) -> Decimal {
        crate::spread::spread_requirement(self.positions.values())
    }

    /// Sum of the open orders' reservations (listed or not).
    pub fn reserved_cash(&self) -> Decimal {
        self.open_orders
            .iter()
            .map(|o| o.reserved_cash)
            .sum::<Decimal>()
            + self.reserved_elsewhere
    }

    /// Realized P&L summed over all positions, flat ones included.
    pub fn realized_pnl(&self) -> Decimal {
        self.positions.values().map(|p| p.realized_pnl).sum()
    }

    /// Signed quantity held in `symbol` (zero if there is no position).
    pub fn qty(&self, symbol: &str) -> Decimal {
        self.positions.get(symbol).map_or(Decimal::ZERO, |p| p.qty)
    }

    /// Quantity of `symbol` that open orders with `intent` would trade if they filled
    /// (Alpaca's `held_for_orders`).
    pub fn held_qty(&self, symbol: &str, intent: PositionIntent) -> Decimal {
        self.open_orders
            .iter()
            .flat_map(|o| {
                o.spec
                    .legs
                    .iter()
                    .filter(|leg| {
                        leg.position_intent == intent && leg.instrument.symbol() == symbol
                    })
                    .map(|leg| leg.fill_qty(o.spec.qty))
            })
            .sum()
    }
}
