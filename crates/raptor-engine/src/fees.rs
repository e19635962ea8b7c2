//! Commission schedule. Alpaca paper charges nothing, so the default is all zero.

use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use crate::order::OrderSpec;
use crate::position::MONEY_DP;

/// Per-order commission: rates per contract and per share, with a per-order minimum.
///
/// Rates are expected to be non-negative; the fee of an order is
/// `per_contract x contracts + per_share x shares`, raised to `min_per_order` when it is
/// positive, then rounded up to the cent. It is charged once per order, however many legs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeeSchedule {
    /// Dollars per option contract, all legs counted.
    pub per_contract: Decimal,
    /// Dollars per share, all legs counted.
    pub per_share: Decimal,
    /// Floor for an order that is charged anything at all.
    pub min_per_order: Decimal,
}

impl FeeSchedule {
    /// The fee for an order trading `contracts` option contracts and `shares` shares in total.
    pub fn fee(&self, contracts: Decimal, shares: Decimal) -> Decimal {
        let raw = self.per_contract * contracts + self.per_share * shares;
        if raw <= Decimal::ZERO {
            return Decimal::ZERO;
        }
        raw.max(self.min_per_order)
            .round_dp_with_strategy(MONEY_DP, RoundingStrategy::ToPositiveInfinity)
    }

    /// The fee for filling `spec` in full (it does not depend on prices).
    pub fn fee_for(&self, spec: &OrderSpec) -> Decimal {
        let (mut contracts, mut shares) = (Decimal::ZERO, Decimal::ZERO);
        for leg in &spec.legs {
            let qty = leg.fill_qty(spec.qty);
            if leg.instrument.is_option() {
                contracts += qty;
            } else {
                shares += qty;
            }
        }
        self.fee(contracts, shares)
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "a test reports a failure by panicking")]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn ibkr_like() -> FeeSchedule {
        FeeSchedule {
            per_contract: d("0.65"),
            per_share: d("0.005"),
            min_per_order: d("1.00"),
        }
    }

    #[test]
    fn default_is_free() {
        let f = FeeSchedule::default();
        assert_eq!(f.fee(d("10"), d("1000")), d("0"));
    }

    #[test]
    fn rates_minimum_and_rounding_up() {
        let f = ibkr_like();
        assert_eq!(f.fee(d("2"), d("0")), d("1.30"));
        assert_eq!(f.fee(d("1"), d("0")), d("1.00")); // minimum
        assert_eq!(f.fee(d("0"), d("301")), d("1.51")); // 1.505 rounds up
        assert_eq!(f.fee(d("0"), d("0")), d("0")); // nothing traded, no minimum
        let tiny = FeeSchedule {
            per_share: d("0.0001"),
            ..FeeSchedule::default()
        };
        assert_eq!(tiny.fee(d("0"), d("1")), d("0.01"));
    }
}
