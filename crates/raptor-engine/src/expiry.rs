//! Option expiry: what the open positions in contracts past their last close settle to, and the
//! short calls an account holds without a long call to cover them.
//!
//! A paper simplification of exercise and assignment: at the close of its last trading day an
//! option position is closed at its intrinsic value, computed from the underlying's mid quote,
//! and settled in cash (long receives, short pays). Out of the money the intrinsic value is zero
//! and the position expires worthless. No fees are charged.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::account::{AccountState, Quote};
use crate::order::Side;
use crate::position::{round_money, Position};
use crate::symbol::{Instrument, OptionContract, Right};

/// How an expired position settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettlementOutcome {
    /// Out of the money (call: mid <= strike; put: mid >= strike): nothing changes hands.
    Worthless,
    /// In the money: settled in cash at the intrinsic value.
    Cash,
}

impl SettlementOutcome {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Worthless => "worthless",
            Self::Cash => "cash",
        }
    }
}

/// The settlement of one expired option position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settlement {
    /// The option's symbol.
    pub symbol: String,
    /// The signed quantity settled (negative for a short), the whole position.
    pub qty: Decimal,
    /// The average entry price the position had.
    pub avg_entry_price: Decimal,
    /// The underlying (the OCC root).
    pub underlying: String,
    /// The underlying's mid quote it was judged at, `(bid + ask) / 2`.
    pub underlying_mid: Decimal,
    /// Intrinsic value per share, never negative: the settlement price.
    pub intrinsic: Decimal,
    /// Worthless or cash.
    pub outcome: SettlementOutcome,
    /// Signed change of cash: `qty x intrinsic x multiplier`, rounded to the cent.
    pub cash_delta: Decimal,
    /// P&L this settlement realized: `(intrinsic - avg) x qty x multiplier`, to the cent.
    pub realized_pnl: Decimal,
    /// The position afterwards: flat, its cumulative realized P&L carried on.
    pub position: Position,
}

/// What one expiry pass over an account found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpiryRun {
    /// The positions that settle, by symbol.
    pub settlements: Vec<Settlement>,
    /// Expired positions whose underlying has no quote: they stay open, to be retried.
    pub awaiting_quote: Vec<String>,
}

/// The mid of a quote, `(bid + ask) / 2`.
pub fn mid(quote: Quote) -> Decimal {
    (quote.bid + quote.ask) / Decimal::TWO
}

/// Intrinsic value per share of `contract` with the underlying at `underlying_mid`: `mid -
/// strike` for a call, `strike - mid` for a put, floored at zero.
pub fn intrinsic_value(contract: &OptionContract, underlying_mid: Decimal) -> Decimal {
    let value = match contract.right {
        Right::Call => underlying_mid - contract.strike,
        Right::Put => contract.strike - underlying_mid,
    };
    value.max(Decimal::ZERO)
}

/// Settles `position` (non-flat) in `contract` against the underlying's `quote`: a closing fill
/// of the whole position at the intrinsic value, so the realized P&L follows the same
/// arithmetic as any other closing fill (the premium kept by a short that expires worthless,
/// the premium lost by a long).
pub fn settle_position(position: &Position, contract: &OptionContract, quote: Quote) -> Settlement {
    let multiplier = crate::symbol::OPTION_MULTIPLIER;
    let underlying_mid = mid(quote);
    let intrinsic = intrinsic_value(contract, underlying_mid);
    let closing = if position.qty.is_sign_negative() {
        Side::Buy
    } else {
        Side::Sell
    };
    let (after, realized_pnl) =
        position.apply_fill(closing, position.qty.abs(), intrinsic, multiplier);
    let outcome = if intrinsic.is_zero() {
        SettlementOutcome::Worthless
    } else {
        SettlementOutcome::Cash
    };
    Settlement {
        symbol: position.symbol.clone(),
        qty: position.qty,
        avg_entry_price: position.avg_entry_price,
        underlying: contract.root.clone(),
        underlying_mid,
        intrinsic,
        outcome,
        cash_delta: round_money(position.qty * intrinsic * multiplier),
        realized_pnl,
        position: after,
    }
}

/// The latest expiration date whose options have stopped trading at `now`: every option
/// expiring on or before it is past its last close ([`Instrument::is_expired`]). The last
/// trading close is non-decreasing in the expiration date, so this is a cut-off a store can
/// filter positions by.
pub fn expired_through(now: DateTime<Utc>) -> NaiveDate {
    let today = now.date_naive();
    // A date more than two weeks out always has a session after `now` before it; a date two
    // weeks back always closed before `now`.
    let ceiling = today + chrono::Duration::days(16);
    let floor = today - chrono::Duration::days(16);
    let closed = |date: NaiveDate| {
        crate::calendar::last_trading_close(date).map_or(date < today, |c| c <= now)
    };
    // `closed` holds up to the answer and not after it (the last close is non-decreasing in
    // the date), and the answer is within a few days of today: walk from today, up while the
    // next date has closed, or down until one has (every order placed asks this, so it looks
    // at two or three dates instead of the whole month).
    let mut date = today;
    if closed(date) {
        while date < ceiling && closed(date + chrono::Duration::days(1)) {
            date += chrono::Duration::days(1);
        }
        return date;
    }
    while date > floor {
        date -= chrono::Duration::days(1);
        if closed(date) {
            return date;
        }
    }
    floor
}

/// Settles every non-flat option position of `account` whose contract is past its last close
/// at `now`, judged against `quotes` (keyed by symbol; the underlyings' are used). Positions
/// whose underlying has no quote are listed in `awaiting_quote` and left alone. Pure: apply
/// the result with [`apply_settlements`].
pub fn settle_expired(
    account: &AccountState,
    quotes: &BTreeMap<String, Quote>,
    now: DateTime<Utc>,
) -> ExpiryRun {
    let mut run = ExpiryRun::default();
    for (symbol, position) in &account.positions {
        if position.is_flat() {
            continue;
        }
        let Ok(instrument) = Instrument::parse(symbol) else {
            continue;
        };
        let Some(contract) = instrument.contract() else {
            continue;
        };
        if !instrument.is_expired(now) {
            continue;
        }
        match quotes.get(&contract.root) {
            Some(&quote) => run
                .settlements
                .push(settle_position(position, contract, quote)),
            None => run.awaiting_quote.push(symbol.clone()),
        }
    }
    run
}

/// Applies settlements: `cash += cash_delta` and each settled position becomes flat.
pub fn apply_settlements(account: &mut AccountState, run: &ExpiryRun) {
    for settlement in &run.settlements {
        account.cash += settlement.cash_delta;
        account
            .positions
            .insert(settlement.symbol.clone(), settlement.position.clone());
    }
}

/// The short calls in `positions` that no long call on the same root expiring no earlier
/// covers (every short put is listed too), by symbol. Shorts are matched latest expiry first
/// against the longs eligible for them, contract for contract, as the order check does; a
/// short partly covered is listed.
pub fn uncovered_short_options<'a>(
    positions: impl IntoIterator<Item = &'a Position>,
) -> Vec<String> {
    let mut by_root: BTreeMap<String, Vec<(OptionContract, &'a Position)>> = BTreeMap::new();
    for position in positions {
        if position.is_flat() {
            continue;
        }
        if let Ok(Instrument::Option { contract, .. }) = Instrument::parse(&position.symbol) {
            by_root
                .entry(contract.root.clone())
                .or_default()
                .push((contract, position));
        }
    }
    let mut uncovered = Vec::new();
    for holdings in by_root.values() {
        let mut shorts: Vec<(NaiveDate, &str, Decimal)> = Vec::new();
        let mut longs: Vec<(NaiveDate, Decimal)> = Vec::new();
        for (contract, position) in holdings {
            if position.qty.is_sign_negative() {
                if contract.right == Right::Put {
                    uncovered.push(position.symbol.clone());
                } else {
                    shorts.push((contract.expiry, &position.symbol, -position.qty));
                }
            } else if contract.right == Right::Call {
                longs.push((contract.expiry, position.qty));
            }
        }
        uncovered.extend(
            crate::risk::uncovered_short_calls(shorts, longs)
                .into_iter()
                .map(str::to_owned),
        );
    }
    uncovered.sort();
    uncovered
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "a test reports a failure by panicking")]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    /// `expired_through` as a scan of the whole window, from its top down.
    fn expired_through_by_scan(now: DateTime<Utc>) -> NaiveDate {
        let today = now.date_naive();
        let floor = today - chrono::Duration::days(16);
        let mut date = today + chrono::Duration::days(16);
        while date > floor {
            let closed =
                crate::calendar::last_trading_close(date).map_or(date < today, |c| c <= now);
            if closed {
                return date;
            }
            date -= chrono::Duration::days(1);
        }
        floor
    }

    proptest! {
        /// The walk from today finds what the scan of the whole window finds, at any minute
        /// of any day from 2024 to 2030 (weekends, holidays, early closes, both sides of
        /// each close).
        #[test]
        fn expired_through_agrees_with_the_scan(minutes in 0i64..(7 * 366 * 24 * 60)) {
            let now = utc(2024, 1, 1, 0, 0) + chrono::Duration::minutes(minutes);
            prop_assert_eq!(expired_through(now), expired_through_by_scan(now));
        }
    }

    #[test]
    fn expired_through_agrees_with_the_scan_around_every_close_of_2026() {
        let mut now = utc(2026, 1, 1, 0, 0);
        while now < utc(2027, 1, 1, 0, 0) {
            assert_eq!(
                expired_through(now),
                expired_through_by_scan(now),
                "at {now}"
            );
            now += chrono::Duration::minutes(30);
        }
    }

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn utc(y: i32, m: u32, day: u32, h: u32, min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, day, h, min, 0).single().unwrap()
    }

    fn position(symbol: &str, qty: &str, avg: &str) -> Position {
        Position {
            symbol: symbol.to_owned(),
            qty: d(qty),
            avg_entry_price: d(avg),
            realized_pnl: Decimal::ZERO,
        }
    }

    fn quote(bid: &str, ask: &str) -> Quote {
        Quote {
            bid: d(bid),
            ask: d(ask),
        }
    }

    fn contract(symbol: &str) -> OptionContract {
        Instrument::parse(symbol)
            .unwrap()
            .contract()
            .unwrap()
            .clone()
    }

    const CALL: &str = "XYZ261218C00065000";
    const PUT: &str = "XYZ261218P00065000";

    #[test]
    fn out_of_the_money_expires_worthless_booking_the_premium() {
        let short = settle_position(
            &position(CALL, "-2", "1.20"),
            &contract(CALL),
            quote("64.00", "65.00"),
        );
        assert_eq!(short.outcome, SettlementOutcome::Worthless);
        assert_eq!(
            (short.cash_delta, short.realized_pnl),
            (d("0"), d("240.00"))
        );
        assert!(short.position.is_flat());
        let long = settle_position(
            &position(PUT, "1", "0.80"),
            &contract(PUT),
            quote("65.00", "65.10"),
        );
        assert_eq!(long.outcome, SettlementOutcome::Worthless);
        assert_eq!((long.cash_delta, long.realized_pnl), (d("0"), d("-80.00")));
        // Exactly at the strike is out of the money.
        let at = settle_position(
            &position(CALL, "1", "1"),
            &contract(CALL),
            quote("64.90", "65.10"),
        );
        assert_eq!(at.outcome, SettlementOutcome::Worthless);
    }

    #[test]
    fn in_the_money_settles_in_cash_at_intrinsic_value() {
        // Mid 70.05: a call is worth 5.05 a share.
        let long = settle_position(
            &position(CALL, "2", "3.00"),
            &contract(CALL),
            quote("70.00", "70.10"),
        );
        assert_eq!(long.outcome, SettlementOutcome::Cash);
        assert_eq!(long.intrinsic, d("5.05"));
        assert_eq!(
            (long.cash_delta, long.realized_pnl),
            (d("1010.00"), d("410.00"))
        );
        let short = settle_position(
            &position(CALL, "-1", "3.00"),
            &contract(CALL),
            quote("70.00", "70.10"),
        );
        assert_eq!(
            (short.cash_delta, short.realized_pnl),
            (d("-505.00"), d("-205.00"))
        );
        let put = settle_position(
            &position(PUT, "1", "1.00"),
            &contract(PUT),
            quote("60.00", "60.00"),
        );
        assert_eq!(
            (put.cash_delta, put.realized_pnl),
            (d("500.00"), d("400.00"))
        );
    }

    #[test]
    fn only_contracts_past_their_close_settle_and_a_missing_quote_waits() {
        let mut account = AccountState::with_cash(d("1000"));
        for p in [
            position(CALL, "-1", "1.00"),
            position("ABC261218C00010000", "1", "1.00"),
            position("XYZ270115C00050000", "1", "9.00"),
            position("XYZ", "10", "60"),
        ] {
            account.positions.insert(p.symbol.clone(), p);
        }
        let quotes = BTreeMap::from([("XYZ".to_owned(), quote("60", "61"))]);
        // 15:59 New York on the expiration day: nothing yet.
        let before = settle_expired(&account, &quotes, utc(2026, 12, 18, 20, 59));
        assert_eq!(before, ExpiryRun::default());
        let run = settle_expired(&account, &quotes, utc(2026, 12, 18, 21, 0));
        assert_eq!(run.settlements.len(), 1);
        assert_eq!(run.settlements[0].symbol, CALL);
        assert_eq!(run.awaiting_quote, vec!["ABC261218C00010000".to_owned()]);
        apply_settlements(&mut account, &run);
        assert!(account.positions[CALL].is_flat());
        assert_eq!(account.realized_pnl(), d("100.00"));
        assert_eq!(
            settle_expired(&account, &quotes, utc(2026, 12, 18, 21, 0)).settlements,
            vec![]
        );
    }

    #[test]
    fn the_cut_off_follows_the_calendar() {
        // Tuesday 2026-12-01 10:00 New York: the last expired date is Monday.
        assert_eq!(
            expired_through(utc(2026, 12, 1, 15, 0)),
            NaiveDate::from_ymd_opt(2026, 11, 30).unwrap()
        );
        // At Tuesday's close: Tuesday.
        assert_eq!(
            expired_through(utc(2026, 12, 1, 21, 0)),
            NaiveDate::from_ymd_opt(2026, 12, 1).unwrap()
        );
        // Friday after the close: the weekend's dates too (they trade until Friday's close).
        assert_eq!(
            expired_through(utc(2026, 12, 4, 21, 30)),
            NaiveDate::from_ymd_opt(2026, 12, 6).unwrap()
        );
        // Christmas Eve (Thursday) after its 13:00 close: through Sunday (the 25th is a holiday).
        assert_eq!(
            expired_through(utc(2026, 12, 24, 18, 30)),
            NaiveDate::from_ymd_opt(2026, 12, 27).unwrap()
        );
        assert_eq!(
            expired_through(utc(2026, 12, 24, 17, 59)),
            NaiveDate::from_ymd_opt(2026, 12, 23).unwrap()
        );
    }

    #[test]
    fn a_short_call_without_a_long_expiring_no_earlier_is_uncovered() {
        let leaps = position("XYZ280121C00060000", "1", "10");
        let near = position("XYZ261218C00065000", "-1", "1");
        let far = position("XYZ290119C00070000", "-1", "1");
        assert!(uncovered_short_options([&leaps, &near]).is_empty());
        assert_eq!(
            uncovered_short_options([&leaps, &far]),
            vec![far.symbol.clone()]
        );
        assert_eq!(uncovered_short_options([&near]), vec![near.symbol.clone()]);
        let put = position(PUT, "-1", "1");
        assert_eq!(
            uncovered_short_options([&leaps, &put]),
            vec![put.symbol.clone()]
        );
        let flat_leaps = position("XYZ280121C00060000", "0", "0");
        assert_eq!(
            uncovered_short_options([&flat_leaps, &near]),
            vec![near.symbol.clone()]
        );
    }
}
