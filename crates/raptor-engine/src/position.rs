//! Positions: signed quantity, weighted average entry price, cumulative realized P&L, and the
//! engine's two rounding points.

use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use crate::order::Side;

/// Decimal places kept in `avg_entry_price`.
pub const PRICE_DP: u32 = 10;
/// Decimal places kept in money amounts (cash movements, realized P&L).
pub const MONEY_DP: u32 = 2;

/// Rounds a price to [`PRICE_DP`] places, half to even. Applied to every average entry price the
/// engine computes, so storage never has to round implicitly.
pub fn round_price(value: Decimal) -> Decimal {
    value.round_dp_with_strategy(PRICE_DP, RoundingStrategy::MidpointNearestEven)
}

/// Rounds money to cents, half to even. Applied to each fill's notional and to each fill's
/// realized P&L.
pub fn round_money(value: Decimal) -> Decimal {
    value.round_dp_with_strategy(MONEY_DP, RoundingStrategy::MidpointNearestEven)
}

/// A holding in one symbol.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The instrument's symbol.
    pub symbol: String,
    /// Signed quantity: negative when short, zero when flat.
    pub qty: Decimal,
    /// Weighted average entry price per share or contract (positive, also for shorts), fees
    /// excluded; zero when flat.
    pub avg_entry_price: Decimal,
    /// P&L realized by closing fills, cumulative over the position's life, in dollars.
    pub realized_pnl: Decimal,
}

impl Position {
    /// A flat position with no history.
    pub fn flat(symbol: impl Into<String>) -> Position {
        Position {
            symbol: symbol.into(),
            qty: Decimal::ZERO,
            avg_entry_price: Decimal::ZERO,
            realized_pnl: Decimal::ZERO,
        }
    }

    /// True when nothing is held.
    pub fn is_flat(&self) -> bool {
        self.qty.is_zero()
    }

    /// Returns the position after a fill of `qty` (> 0) at `price`, and the P&L this fill
    /// realized.
    ///
    /// - Flat, or adding in the same direction: the average is weighted by quantity.
    /// - Reducing: the average is kept; the closed part realizes
    ///   `(price - avg) x closed x multiplier`, negated for shorts.
    /// - Reaching exactly zero: the average becomes 0; realized P&L stays cumulative.
    /// - Crossing through zero (the engine's intent rules never ask for it, but the arithmetic
    ///   is total): the old side is closed and the remainder opens at `price`.
    ///
    /// A non-positive `qty` leaves the position unchanged and realizes nothing.
    pub fn apply_fill(
        &self,
        side: Side,
        qty: Decimal,
        price: Decimal,
        multiplier: Decimal,
    ) -> (Position, Decimal) {
        if qty <= Decimal::ZERO {
            return (self.clone(), Decimal::ZERO);
        }
        let signed = side.sign() * qty;
        let new_qty = self.qty + signed;
        let same_direction =
            self.qty.is_zero() || self.qty.is_sign_positive() == (side == Side::Buy);

        let (avg, realized) = if same_direction {
            let held = self.qty.abs();
            let avg = round_price((self.avg_entry_price * held + price * qty) / (held + qty));
            (avg, Decimal::ZERO)
        } else {
            let closed = qty.min(self.qty.abs());
            let direction = if self.qty.is_sign_positive() {
                Decimal::ONE
            } else {
                Decimal::NEGATIVE_ONE
            };
            let realized =
                round_money((price - self.avg_entry_price) * closed * multiplier * direction);
            let avg = if new_qty.is_zero() {
                Decimal::ZERO
            } else if new_qty.is_sign_positive() == self.qty.is_sign_positive() {
                self.avg_entry_price
            } else {
                round_price(price)
            };
            (avg, realized)
        };

        let position = Position {
            symbol: self.symbol.clone(),
            qty: new_qty,
            avg_entry_price: avg,
            realized_pnl: self.realized_pnl + realized,
        };
        (position, realized)
    }
}

/// What a position is worth at a price: its market value (signed: negative when short) and
/// the P&L not yet realized, in dollars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// `qty × price × multiplier`.
    pub market_value: Decimal,
    /// `qty × (price − avg_entry_price) × multiplier`.
    pub unrealized_pnl: Decimal,
}

impl Position {
    /// This position marked at `price` (the quote's mid; the average entry price when there is
    /// no quote, which marks it at cost: no unrealized P&L).
    pub fn mark(&self, price: Decimal, multiplier: Decimal) -> Mark {
        Mark {
            market_value: self.qty * price * multiplier,
            unrealized_pnl: self.qty * (price - self.avg_entry_price) * multiplier,
        }
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "a test reports a failure by panicking")]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn fill(p: &Position, side: Side, qty: &str, price: &str, mult: &str) -> (Position, Decimal) {
        p.apply_fill(side, d(qty), d(price), d(mult))
    }

    #[test]
    fn opening_sets_the_average() {
        let (p, r) = fill(&Position::flat("AAPL"), Side::Buy, "10", "190.12", "1");
        assert_eq!(
            (p.qty, p.avg_entry_price, r),
            (d("10"), d("190.12"), d("0"))
        );
        let (s, _) = fill(&Position::flat("X"), Side::Sell, "1", "1.20", "100");
        assert_eq!((s.qty, s.avg_entry_price), (d("-1"), d("1.20")));
    }

    #[test]
    fn adding_weights_the_average() {
        let (p, _) = fill(&Position::flat("A"), Side::Buy, "1", "10", "1");
        let (p, _) = fill(&p, Side::Buy, "3", "14", "1");
        assert_eq!(p.qty, d("4"));
        assert_eq!(p.avg_entry_price, d("13"));
        // Shorts average the same way.
        let (s, _) = fill(&Position::flat("O"), Side::Sell, "1", "1.20", "100");
        let (s, _) = fill(&s, Side::Sell, "1", "1.30", "100");
        assert_eq!((s.qty, s.avg_entry_price), (d("-2"), d("1.25")));
    }

    #[test]
    fn average_is_rounded_to_ten_places_half_even() {
        let (p, _) = fill(&Position::flat("A"), Side::Buy, "1", "1", "1");
        let (p, _) = fill(&p, Side::Buy, "2", "2", "1");
        // 5/3 = 1.6666666666|66... -> 1.6666666667
        assert_eq!(p.avg_entry_price, d("1.6666666667"));
        assert_eq!(p.avg_entry_price.scale(), 10);
        assert_eq!(round_price(d("0.00000000005")), d("0"));
        assert_eq!(round_price(d("0.00000000015")), d("0.0000000002"));
    }

    #[test]
    fn reducing_keeps_the_average_and_realizes() {
        let (p, _) = fill(&Position::flat("A"), Side::Buy, "10", "100", "1");
        let (p, r) = fill(&p, Side::Sell, "4", "103.50", "1");
        assert_eq!((p.qty, p.avg_entry_price), (d("6"), d("100")));
        assert_eq!(r, d("14.00"));
        assert_eq!(p.realized_pnl, d("14.00"));
        let (p, r) = fill(&p, Side::Sell, "6", "99", "1");
        assert_eq!(r, d("-6"));
        assert_eq!(
            (p.qty, p.avg_entry_price, p.realized_pnl),
            (d("0"), d("0"), d("8"))
        );
        assert!(p.is_flat());
    }

    #[test]
    fn closing_a_short_realizes_with_the_sign_flipped() {
        let (s, _) = fill(&Position::flat("O"), Side::Sell, "1", "1.20", "100");
        let (s, r) = fill(&s, Side::Buy, "1", "0.45", "100");
        assert_eq!(r, d("75.00"));
        assert_eq!(
            (s.qty, s.avg_entry_price, s.realized_pnl),
            (d("0"), d("0"), d("75"))
        );
        let (s, _) = fill(&s, Side::Sell, "2", "2", "100");
        let (s, r) = fill(&s, Side::Buy, "1", "2.50", "100");
        assert_eq!(r, d("-50"));
        assert_eq!((s.qty, s.realized_pnl), (d("-1"), d("25")));
    }

    #[test]
    fn realized_pnl_is_rounded_to_cents_half_even() {
        let (p, _) = fill(&Position::flat("A"), Side::Buy, "1", "1", "1");
        let (p, _) = fill(&p, Side::Buy, "2", "2", "1");
        // avg is 1.6666666667; these prices realize exactly half a cent and 1.5 cents.
        let (_, r) = fill(&p, Side::Sell, "1", "1.6716666667", "1");
        assert_eq!(r, d("0.00")); // 0.005 -> 0.00 (half to even)
        let (_, r) = fill(&p, Side::Sell, "1", "1.6816666667", "1");
        assert_eq!(r, d("0.02")); // 0.015 -> 0.02
        assert_eq!(round_money(d("-0.025")), d("-0.02"));
    }

    #[test]
    fn crossing_zero_closes_then_opens_at_the_price() {
        let (p, _) = fill(&Position::flat("A"), Side::Buy, "2", "10", "1");
        let (p, r) = fill(&p, Side::Sell, "5", "12", "1");
        assert_eq!(r, d("4"));
        assert_eq!((p.qty, p.avg_entry_price), (d("-3"), d("12")));
    }

    #[test]
    fn non_positive_qty_is_a_no_op() {
        let (p, _) = fill(&Position::flat("A"), Side::Buy, "2", "10", "1");
        assert_eq!(fill(&p, Side::Sell, "0", "12", "1"), (p.clone(), d("0")));
        assert_eq!(fill(&p, Side::Buy, "-1", "12", "1"), (p.clone(), d("0")));
    }

    #[test]
    fn a_mark_values_longs_and_shorts_at_the_price() {
        let long = Position {
            symbol: "AAPL".into(),
            qty: Decimal::new(2, 0),
            avg_entry_price: Decimal::new(19010, 2),
            realized_pnl: Decimal::ZERO,
        };
        let mark = long.mark(Decimal::new(19100, 2), Decimal::ONE);
        assert_eq!(mark.market_value, Decimal::new(38200, 2));
        assert_eq!(mark.unrealized_pnl, Decimal::new(180, 2));
        let short = Position {
            symbol: "AAPL260918C00065000".into(),
            qty: Decimal::new(-1, 0),
            avg_entry_price: Decimal::new(120, 2),
            realized_pnl: Decimal::ZERO,
        };
        let mark = short.mark(Decimal::new(100, 2), Decimal::new(100, 0));
        assert_eq!(mark.market_value, Decimal::new(-10000, 2));
        assert_eq!(mark.unrealized_pnl, Decimal::new(2000, 2));
        let at_cost = short.mark(short.avg_entry_price, Decimal::new(100, 0));
        assert_eq!(at_cost.unrealized_pnl, Decimal::ZERO);
    }
}
