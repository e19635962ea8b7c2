//! What a cash account holds against its short calls: each short call is paired with long
//! calls on the same root expiring no earlier (the coverage rule of the order checks), and a pair
//! whose long strike is above the short strike can lose the difference. That maximum loss is
//! set aside from buying power for as long as the pair is held, so a credit spread never turns
//! its credit into buying power: a vertical spread short the 100 call and long the 110 call
//! reserves `(110 - 100) x 100` per spread, and its credit only lowers what it takes from
//! buying power.
//!
//! Why the pairing bounds the loss: at the short's expiry it pays `(S - K_short)+`, while its
//! long, alive at least until then, is worth at least `(S - K_long)+`, and
//! `(S - K_short)+ <= (S - K_long)+ + (K_long - K_short)+` for every price `S`. Any pairing
//! that respects the expiries therefore bounds the account's worst case; the one chosen here
//! is exact for a single spread, a calendar and a covered LEAPS, and may overstate (never
//! understate) the loss of unusual combinations.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use crate::position::Position;
use crate::symbol::{Instrument, Right};

/// The cash `positions` must keep against the maximum loss of their short calls (see the
/// module docs). Short calls that no long covers are not counted here: the order checks never
/// let one open (`uncovered_short_option`), and the account read lists any that remain.
pub fn spread_requirement<'a>(positions: impl IntoIterator<Item = &'a Position>) -> Decimal {
    let mut by_root: BTreeMap<String, Calls> = BTreeMap::new();
    for position in positions {
        if position.is_flat() {
            continue;
        }
        let Ok(Instrument::Option { contract, .. }) = Instrument::parse(&position.symbol) else {
            continue;
        };
        if contract.right != Right::Call {
            continue;
        }
        let entry = (contract.expiry, contract.strike, position.qty.abs());
        let calls = by_root.entry(contract.root).or_default();
        if position.qty.is_sign_negative() {
            calls.shorts.push(entry);
        } else {
            calls.longs.push(entry);
        }
    }
    let loss: Decimal = by_root
        .into_values()
        .map(|calls| calls.max_loss() * crate::symbol::OPTION_MULTIPLIER)
        .sum();
    // Exact already (strikes are in tenths of a cent, times 100); at the cent's scale.
    crate::position::round_money(loss)
}

/// The calls held on one root: (expiry, strike, contracts).
#[derive(Default)]
struct Calls {
    shorts: Vec<(NaiveDate, Decimal, Decimal)>,
    longs: Vec<(NaiveDate, Decimal, Decimal)>,
}

impl Calls {
    /// The pairs' summed strike differences per share. Shorts are taken latest expiry first
    /// (so the longs eligible for a short are a pool that only grows), lower strike first among
    /// one expiry; each draws first from the pooled longs at or below its strike, highest first
    /// (no loss, and the lower strikes stay for the shorts below), then from those above it,
    /// lowest first.
    fn max_loss(mut self) -> Decimal {
        self.shorts
            .sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        self.longs.sort_by_key(|l| std::cmp::Reverse(l.0));
        let mut longs = self.longs.into_iter().peekable();
        let mut pool: BTreeMap<Decimal, Decimal> = BTreeMap::new();
        let mut loss = Decimal::ZERO;
        for (expiry, strike, mut short) in self.shorts {
            while let Some((_, long_strike, qty)) = longs.next_if(|l| l.0 >= expiry) {
                *pool.entry(long_strike).or_default() += qty;
            }
            while short > Decimal::ZERO {
                let below = pool.range(..=strike).next_back().map(|(k, q)| (*k, *q));
                let Some((long_strike, available)) =
                    below.or_else(|| pool.range(strike..).next().map(|(k, q)| (*k, *q)))
                else {
                    // Uncovered: not this function's to price.
                    break;
                };
                let drawn = available.min(short);
                loss += (long_strike - strike).max(Decimal::ZERO) * drawn;
                short -= drawn;
                if drawn == available {
                    pool.remove(&long_strike);
                } else if let Some(left) = pool.get_mut(&long_strike) {
                    *left -= drawn;
                }
            }
        }
        loss
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "a test reports a failure by panicking")]
mod tests {
    use super::*;

    fn p(symbol: &str, qty: i64) -> Position {
        Position {
            symbol: symbol.to_owned(),
            qty: Decimal::from(qty),
            avg_entry_price: Decimal::ONE,
            realized_pnl: Decimal::ZERO,
        }
    }

    fn req(positions: &[Position]) -> Decimal {
        spread_requirement(positions)
    }

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn a_short_call_spread_reserves_its_width() {
        // Short the 100 call, long the 110 call: at most $10 a share, $1,000 a spread.
        let positions = [
            p("XYZ261218C00100000", -1000),
            p("XYZ261218C00110000", 1000),
        ];
        assert_eq!(req(&positions), d("1000000"));
    }

    #[test]
    fn a_long_call_spread_and_a_covered_leaps_reserve_nothing() {
        assert_eq!(
            req(&[p("XYZ261218C00100000", 1), p("XYZ261218C00110000", -1)]),
            Decimal::ZERO
        );
        // A deep long LEAPS under a near-term short call (the LCC).
        assert_eq!(
            req(&[p("XYZ280121C00050000", 1), p("XYZ261218C00065000", -1)]),
            Decimal::ZERO
        );
    }

    #[test]
    fn a_long_expiring_before_the_short_does_not_cover_it() {
        // The December 90 call expires before the January 100 short: only the March 150 call
        // covers it, which can lose $50 a share.
        let positions = [
            p("XYZ270115C00100000", -1),
            p("XYZ261218C00090000", 1),
            p("XYZ270319C00150000", 1),
        ];
        assert_eq!(req(&positions), d("5000"));
    }

    #[test]
    fn each_short_takes_the_long_that_costs_least() {
        // The 110 short takes the 105 long (no loss), the 100 short the 95 long (no loss):
        // nothing to reserve, whatever order they are listed in.
        let positions = [
            p("XYZ261218C00110000", -1),
            p("XYZ261218C00100000", -1),
            p("XYZ261218C00105000", 1),
            p("XYZ261218C00095000", 1),
        ];
        assert_eq!(req(&positions), Decimal::ZERO);
        // Two shorts on one long above both: one pairs, the other is uncovered (not priced).
        let positions = [p("XYZ261218C00100000", -2), p("XYZ261218C00120000", 1)];
        assert_eq!(req(&positions), d("2000"));
    }

    #[test]
    fn puts_equities_and_flat_positions_reserve_nothing_here() {
        let positions = [
            p("AAPL", 10),
            p("XYZ261218P00100000", 1),
            p("XYZ261218C00100000", 0),
            p("XYZ261218C00110000", 1),
        ];
        assert_eq!(req(&positions), Decimal::ZERO);
    }
}
