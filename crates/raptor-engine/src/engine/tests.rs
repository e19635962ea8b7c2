//! Unit tests for the engine: fills, money, risk checks and the LCC worked example.
#![expect(clippy::unwrap_used, reason = "a test reports a failure by panicking")]

use super::*;
use crate::account::OpenOrder;
use crate::order::{LegSpec, TimeInForce};
use crate::symbol::Instrument;

const LEAPS: &str = "XYZ280121C00050000";
const SHORT: &str = "XYZ261218C00065000";
const NEXT: &str = "XYZ270115C00067500";

fn d(s: &str) -> Decimal {
    s.parse().unwrap()
}

/// 15:00 UTC (10:00 New York, in the regular session) on that date.
fn morning(y: i32, m: u32, day: u32) -> DateTime<Utc> {
    use chrono::TimeZone;
    Utc.with_ymd_and_hms(y, m, day, 15, 0, 0).single().unwrap()
}

fn today() -> DateTime<Utc> {
    morning(2026, 12, 1)
}

fn inst(s: &str) -> Instrument {
    Instrument::parse(s).unwrap()
}

fn quotes(entries: &[(&str, &str, &str)]) -> BTreeMap<String, Quote> {
    entries
        .iter()
        .map(|(s, bid, ask)| {
            let quote = Quote {
                bid: d(bid),
                ask: d(ask),
            };
            ((*s).to_owned(), quote)
        })
        .collect()
}

fn market(symbol: &str, intent: PositionIntent, qty: &str) -> OrderSpec {
    OrderSpec::simple(
        inst(symbol),
        intent,
        d(qty),
        OrderType::Market,
        None,
        TimeInForce::Day,
    )
}

fn limit(symbol: &str, intent: PositionIntent, qty: &str, price: &str) -> OrderSpec {
    OrderSpec::simple(
        inst(symbol),
        intent,
        d(qty),
        OrderType::Limit,
        Some(d(price)),
        TimeInForce::Gtc,
    )
}

fn leg(symbol: &str, intent: PositionIntent, ratio: u32) -> LegSpec {
    LegSpec {
        instrument: inst(symbol),
        side: intent.side(),
        ratio_qty: ratio,
        position_intent: intent,
    }
}

fn mleg(qty: &str, limit_price: Option<&str>, legs: Vec<LegSpec>) -> OrderSpec {
    OrderSpec {
        class: OrderClass::Mleg,
        order_type: if limit_price.is_some() {
            OrderType::Limit
        } else {
            OrderType::Market
        },
        time_in_force: TimeInForce::Day,
        qty: d(qty),
        limit_price: limit_price.map(d),
        legs,
    }
}

fn roll(qty: &str, from: &str, to: &str, limit_price: Option<&str>) -> OrderSpec {
    mleg(
        qty,
        limit_price,
        vec![
            leg(from, PositionIntent::BuyToClose, 1),
            leg(to, PositionIntent::SellToOpen, 1),
        ],
    )
}

fn account(cash: &str, positions: &[(&str, &str, &str)]) -> AccountState {
    let mut a = AccountState::with_cash(d(cash));
    for (symbol, qty, avg) in positions {
        let p = Position {
            symbol: (*symbol).to_owned(),
            qty: d(qty),
            avg_entry_price: d(avg),
            realized_pnl: Decimal::ZERO,
        };
        a.positions.insert((*symbol).to_owned(), p);
    }
    a
}

fn filled(decision: Decision) -> Execution {
    match decision {
        Decision::Filled(e) => e,
        Decision::Rest { .. } => panic!("expected a fill, got {decision:?}"),
    }
}

fn resting(spec: OrderSpec, reserved: &str) -> OpenOrder {
    OpenOrder {
        spec,
        reserved_cash: d(reserved),
    }
}

/// Submits and applies; panics unless the order fills.
fn trade(
    engine: &Engine,
    account: &mut AccountState,
    spec: &OrderSpec,
    q: &BTreeMap<String, Quote>,
) -> Execution {
    let e = filled(engine.submit(account, spec, q, today()).unwrap());
    engine.apply(account, &e);
    e
}

#[test]
fn lcc_worked_example() {
    let engine = Engine::default();
    let mut acct = account("100000.00", &[]);

    let leaps = trade(
        &engine,
        &mut acct,
        &market(LEAPS, PositionIntent::BuyToOpen, "1"),
        &quotes(&[(LEAPS, "12.10", "12.40")]),
    );
    assert_eq!(leaps.cash_delta, d("-1240.00"));
    assert_eq!(leaps.fills[0].price, d("12.40"));
    assert_eq!(acct.cash, d("98760.00"));

    let short = trade(
        &engine,
        &mut acct,
        &market(SHORT, PositionIntent::SellToOpen, "1"),
        &quotes(&[(SHORT, "1.20", "1.25")]),
    );
    assert_eq!(short.cash_delta, d("120.00"));
    assert_eq!(acct.cash, d("98880.00"));
    assert_eq!(acct.qty(SHORT), d("-1"));

    let q = quotes(&[(SHORT, "0.40", "0.45"), (NEXT, "1.30", "1.35")]);
    let before = acct.clone();

    // Rejected rolls leave nothing behind (the engine is pure; the account is untouched).
    let too_late = "XYZ280317C00070000"; // expires after the LEAPS
    let q_late = quotes(&[(SHORT, "0.40", "0.45"), (too_late, "2.00", "2.10")]);
    assert_eq!(
        engine.submit(&acct, &roll("1", SHORT, too_late, None), &q_late, today()),
        Err(OrderRejection::UncoveredShortOption {
            symbol: too_late.to_owned()
        })
    );
    assert_eq!(
        engine.submit(&acct, &roll("2", SHORT, NEXT, None), &q, today()),
        Err(OrderRejection::InsufficientQty {
            symbol: SHORT.to_owned(),
            available: d("1"),
            requested: d("2"),
        })
    );
    assert_eq!(acct, before);

    let rolled = trade(&engine, &mut acct, &roll("1", SHORT, NEXT, None), &q);
    assert_eq!(rolled.net_price, d("-0.85"));
    assert_eq!(rolled.cash_delta, d("85.00"));
    assert_eq!(rolled.fees, d("0"));
    assert_eq!(rolled.realized_pnl, d("75.00"));
    assert_eq!(rolled.fills.len(), 2);
    assert_eq!(
        (rolled.fills[0].symbol.as_str(), rolled.fills[0].price),
        (SHORT, d("0.45"))
    );
    assert_eq!(rolled.fills[0].realized_pnl, d("75.00"));
    assert_eq!(
        (rolled.fills[1].symbol.as_str(), rolled.fills[1].price),
        (NEXT, d("1.30"))
    );
    assert_eq!(acct.cash, d("98965.00"));

    let leaps_pos = &acct.positions[LEAPS];
    assert_eq!(
        (leaps_pos.qty, leaps_pos.avg_entry_price),
        (d("1"), d("12.40"))
    );
    let old = &acct.positions[SHORT];
    assert_eq!(
        (old.qty, old.avg_entry_price, old.realized_pnl),
        (d("0"), d("0"), d("75.00"))
    );
    let new = &acct.positions[NEXT];
    assert_eq!((new.qty, new.avg_entry_price), (d("-1"), d("1.30")));
    assert_eq!(acct.realized_pnl(), d("75.00"));

    // The old contract cannot be traded the day after it expires.
    assert_eq!(
        engine.submit(
            &acct,
            &market(SHORT, PositionIntent::BuyToOpen, "1"),
            &quotes(&[(SHORT, "0.01", "0.02")]),
            morning(2026, 12, 19)
        ),
        Err(OrderRejection::ContractExpired {
            symbol: SHORT.to_owned()
        })
    );
}

#[test]
fn roll_limit_fills_only_at_or_better_than_the_credit() {
    let engine = Engine::default();
    let acct = account("0", &[(LEAPS, "1", "12.40"), (SHORT, "-1", "1.20")]);
    let q = quotes(&[(SHORT, "0.40", "0.45"), (NEXT, "1.30", "1.35")]);
    let e = filled(
        engine
            .submit(&acct, &roll("1", SHORT, NEXT, Some("-0.80")), &q, today())
            .unwrap(),
    );
    assert_eq!(e.cash_delta, d("85.00"));
    // Asking for a 0.90 credit when only 0.85 is available rests, reserving nothing.
    assert_eq!(
        engine.submit(&acct, &roll("1", SHORT, NEXT, Some("-0.90")), &q, today()),
        Ok(Decision::Rest {
            reserved_cash: d("0")
        })
    );
}

#[test]
fn market_orders_fill_at_the_far_side() {
    let engine = Engine::default();
    let q = quotes(&[("AAPL", "190.10", "190.12")]);
    let mut acct = account("10000", &[]);
    let buy = trade(
        &engine,
        &mut acct,
        &market("AAPL", PositionIntent::BuyToOpen, "10"),
        &q,
    );
    assert_eq!(buy.fills[0].price, d("190.12"));
    assert_eq!(buy.net_price, d("190.12"));
    assert_eq!(buy.cash_delta, d("-1901.20"));
    let sell = trade(
        &engine,
        &mut acct,
        &market("AAPL", PositionIntent::SellToClose, "4"),
        &q,
    );
    assert_eq!(sell.fills[0].price, d("190.10"));
    assert_eq!(sell.net_price, d("-190.10"));
    assert_eq!(sell.cash_delta, d("760.40"));
    assert_eq!(sell.realized_pnl, d("-0.08"));
    assert_eq!(acct.cash, d("8859.20"));
    assert_eq!(acct.positions["AAPL"].qty, d("6"));
}

#[test]
fn fractional_shares_round_the_notional_to_cents() {
    let engine = Engine::default();
    let q = quotes(&[("AAPL", "190.10", "190.13")]);
    let acct = account("1000", &[]);
    let e = filled(
        engine
            .submit(
                &acct,
                &market("AAPL", PositionIntent::BuyToOpen, "0.5"),
                &q,
                today(),
            )
            .unwrap(),
    );
    // 0.5 x 190.13 = 95.065 -> 95.06 (half to even)
    assert_eq!(e.cash_delta, d("-95.06"));
}

#[test]
fn fees_are_charged_once_per_order() {
    let engine = Engine::new(FeeSchedule {
        per_contract: d("0.65"),
        per_share: d("0"),
        min_per_order: d("1.00"),
    });
    let acct = account("100000", &[(LEAPS, "1", "12.40"), (SHORT, "-1", "1.20")]);
    let q = quotes(&[(SHORT, "0.40", "0.45"), (NEXT, "1.30", "1.35")]);
    let e = filled(
        engine
            .submit(&acct, &roll("1", SHORT, NEXT, None), &q, today())
            .unwrap(),
    );
    assert_eq!(e.fees, d("1.30"));
    assert_eq!(e.cash_delta, d("83.70"));
    assert_eq!(e.cost(), d("0"));
    let one = filled(
        engine
            .submit(
                &acct,
                &market(LEAPS, PositionIntent::BuyToOpen, "1"),
                &quotes(&[(LEAPS, "12.10", "12.40")]),
                today(),
            )
            .unwrap(),
    );
    assert_eq!(one.fees, d("1.00"));
    assert_eq!(one.cash_delta, d("-1241.00"));
    assert_eq!(one.cost(), d("1241.00"));
}

#[test]
fn a_marketable_limit_fills_at_the_quote_not_the_limit() {
    let engine = Engine::default();
    let acct = account("10000", &[("AAPL", "10", "150")]);
    let q = quotes(&[("AAPL", "190.10", "190.12")]);
    let buy = filled(
        engine
            .submit(
                &acct,
                &limit("AAPL", PositionIntent::BuyToOpen, "1", "195"),
                &q,
                today(),
            )
            .unwrap(),
    );
    assert_eq!(buy.fills[0].price, d("190.12"));
    let sell = filled(
        engine
            .submit(
                &acct,
                &limit("AAPL", PositionIntent::SellToClose, "1", "190.10"),
                &q,
                today(),
            )
            .unwrap(),
    );
    assert_eq!(sell.fills[0].price, d("190.10"));
}

#[test]
fn a_non_marketable_limit_rests_and_reserves_its_cost() {
    let engine = Engine::new(FeeSchedule {
        per_share: d("0.01"),
        ..FeeSchedule::default()
    });
    let acct = account("10000", &[("AAPL", "10", "150")]);
    let q = quotes(&[("AAPL", "190.10", "190.12")]);
    assert_eq!(
        engine.submit(
            &acct,
            &limit("AAPL", PositionIntent::BuyToOpen, "10", "185"),
            &q,
            today()
        ),
        Ok(Decision::Rest {
            reserved_cash: d("1850.10")
        })
    );
    // A sell limit is a credit: it reserves nothing once fees are covered.
    assert_eq!(
        engine.submit(
            &acct,
            &limit("AAPL", PositionIntent::SellToClose, "5", "200"),
            &q,
            today()
        ),
        Ok(Decision::Rest {
            reserved_cash: d("0")
        })
    );
    // An option buy limit reserves limit x qty x 100.
    let q = quotes(&[(LEAPS, "12.10", "12.40")]);
    assert_eq!(
        Engine::default().submit(
            &acct,
            &limit(LEAPS, PositionIntent::BuyToOpen, "2", "12.005"),
            &q,
            today()
        ),
        Ok(Decision::Rest {
            reserved_cash: d("2401.00")
        })
    );
}

#[test]
fn buying_power_counts_reservations() {
    // Alpaca's example: $10,000, an open $3,000 buy leaves $7,000; an $8,000 order fails.
    let engine = Engine::default();
    let mut acct = account("10000", &[]);
    acct.open_orders.push(resting(
        limit("MSFT", PositionIntent::BuyToOpen, "10", "300"),
        "3000",
    ));
    assert_eq!(acct.buying_power(), d("7000"));
    let q = quotes(&[("AAPL", "79.90", "80.00")]);
    assert_eq!(
        engine.submit(
            &acct,
            &market("AAPL", PositionIntent::BuyToOpen, "100"),
            &q,
            today()
        ),
        Err(OrderRejection::InsufficientBuyingPower {
            buying_power: d("7000"),
            cost_basis: d("8000.00"),
        })
    );
    // The same check applies to a resting order's reservation.
    assert_eq!(
        engine.submit(
            &acct,
            &limit("AAPL", PositionIntent::BuyToOpen, "100", "75"),
            &q,
            today()
        ),
        Err(OrderRejection::InsufficientBuyingPower {
            buying_power: d("7000"),
            cost_basis: d("7500.00"),
        })
    );
    // Exactly the buying power is fine.
    assert!(engine
        .submit(
            &acct,
            &limit("AAPL", PositionIntent::BuyToOpen, "100", "70"),
            &q,
            today()
        )
        .is_ok());
    let q = quotes(&[("AAPL", "69.90", "70.00")]);
    assert!(engine
        .submit(
            &acct,
            &market("AAPL", PositionIntent::BuyToOpen, "100"),
            &q,
            today()
        )
        .is_ok());
}

#[test]
fn credit_orders_need_no_buying_power() {
    let engine = Engine::default();
    let mut acct = account("0", &[(LEAPS, "1", "12.40")]);
    acct.open_orders.push(resting(
        limit("MSFT", PositionIntent::BuyToOpen, "1", "300"),
        "300",
    ));
    assert!(acct.buying_power() < Decimal::ZERO);
    let e = filled(
        engine
            .submit(
                &acct,
                &market(SHORT, PositionIntent::SellToOpen, "1"),
                &quotes(&[(SHORT, "1.20", "1.25")]),
                today(),
            )
            .unwrap(),
    );
    assert_eq!(e.cash_delta, d("120.00"));
}

#[test]
fn closing_needs_the_position_net_of_held_qty() {
    let engine = Engine::default();
    let q = quotes(&[
        ("AAPL", "190", "191"),
        ("MSFT", "400", "401"),
        (SHORT, "1.00", "1.10"),
    ]);
    let mut acct = account("100000", &[("AAPL", "10", "150"), (SHORT, "-2", "1.20")]);
    let insufficient = |symbol: &str, available: &str, requested: &str| {
        Err(OrderRejection::InsufficientQty {
            symbol: symbol.to_owned(),
            available: d(available),
            requested: d(requested),
        })
    };
    assert_eq!(
        engine.submit(
            &acct,
            &market("AAPL", PositionIntent::SellToClose, "11"),
            &q,
            today()
        ),
        insufficient("AAPL", "10", "11")
    );
    // Closing the wrong side: nothing is available.
    assert_eq!(
        engine.submit(
            &acct,
            &market("AAPL", PositionIntent::BuyToClose, "1"),
            &q,
            today()
        ),
        insufficient("AAPL", "0", "1")
    );
    assert_eq!(
        engine.submit(
            &acct,
            &market(SHORT, PositionIntent::SellToClose, "1"),
            &q,
            today()
        ),
        insufficient(SHORT, "0", "1")
    );
    assert_eq!(
        engine.submit(
            &acct,
            &market("MSFT", PositionIntent::SellToClose, "1"),
            &q,
            today()
        ),
        insufficient("MSFT", "0", "1")
    );
    // Other open closing orders hold quantity; opening orders do not.
    acct.open_orders.push(resting(
        limit("AAPL", PositionIntent::SellToClose, "7", "250"),
        "0",
    ));
    acct.open_orders.push(resting(
        limit("AAPL", PositionIntent::BuyToOpen, "5", "100"),
        "500",
    ));
    acct.open_orders.push(resting(
        limit(SHORT, PositionIntent::BuyToClose, "1", "0.50"),
        "50",
    ));
    assert_eq!(acct.held_qty("AAPL", PositionIntent::SellToClose), d("7"));
    assert_eq!(
        engine.submit(
            &acct,
            &market("AAPL", PositionIntent::SellToClose, "4"),
            &q,
            today()
        ),
        insufficient("AAPL", "3", "4")
    );
    assert!(engine
        .submit(
            &acct,
            &market("AAPL", PositionIntent::SellToClose, "3"),
            &q,
            today()
        )
        .is_ok());
    assert_eq!(
        engine.submit(
            &acct,
            &market(SHORT, PositionIntent::BuyToClose, "2"),
            &q,
            today()
        ),
        insufficient(SHORT, "1", "2")
    );
    assert!(engine
        .submit(
            &acct,
            &market(SHORT, PositionIntent::BuyToClose, "1"),
            &q,
            today()
        )
        .is_ok());
}

#[test]
fn opening_against_a_position_or_shorting_stock_is_refused() {
    let engine = Engine::default();
    let q = quotes(&[
        ("AAPL", "190", "191"),
        (SHORT, "1.00", "1.10"),
        (LEAPS, "12", "13"),
    ]);
    let acct = account(
        "100000",
        &[
            ("AAPL", "10", "150"),
            (SHORT, "-1", "1.20"),
            (LEAPS, "2", "12"),
        ],
    );
    assert_eq!(
        engine
            .submit(
                &acct,
                &market("AAPL", PositionIntent::SellToOpen, "1"),
                &q,
                today()
            )
            .unwrap_err()
            .code(),
        "invalid_order"
    );
    assert_eq!(
        engine
            .submit(
                &acct,
                &market(SHORT, PositionIntent::BuyToOpen, "1"),
                &q,
                today()
            )
            .unwrap_err()
            .code(),
        "invalid_order"
    );
    assert_eq!(
        engine.submit(
            &acct,
            &market("TSLA", PositionIntent::SellToOpen, "1"),
            &quotes(&[("TSLA", "1", "2")]),
            today()
        ),
        Err(OrderRejection::InsufficientQty {
            symbol: "TSLA".to_owned(),
            available: d("0"),
            requested: d("1"),
        })
    );
}

#[test]
fn short_calls_need_long_calls_expiring_no_earlier() {
    let engine = Engine::default();
    let uncovered = |s: &str| {
        Err(OrderRejection::UncoveredShortOption {
            symbol: s.to_owned(),
        })
    };
    let sto = |s: &str, qty: &str| market(s, PositionIntent::SellToOpen, qty);
    let q = quotes(&[
        (SHORT, "1.20", "1.25"),
        (NEXT, "1.30", "1.35"),
        ("XYZ280317C00070000", "2", "2.10"),
        ("XYZ261218P00060000", "1", "1.10"),
        ("ABC261218C00010000", "1", "1.10"),
        (LEAPS, "12.10", "12.40"),
    ]);

    let naked = account("100000", &[]);
    assert_eq!(
        engine.submit(&naked, &sto(SHORT, "1"), &q, today()),
        uncovered(SHORT)
    );

    let one_leaps = account("100000", &[(LEAPS, "1", "12.40")]);
    assert!(engine
        .submit(&one_leaps, &sto(SHORT, "1"), &q, today())
        .is_ok());
    assert_eq!(
        engine.submit(&one_leaps, &sto(SHORT, "2"), &q, today()),
        uncovered(SHORT)
    );
    // Same expiry as the long is fine; later is not.
    assert!(engine
        .submit(&one_leaps, &sto(LEAPS, "1"), &q, today())
        .is_err()); // sell_to_open on a long: invalid, not a coverage question
    assert_eq!(
        engine.submit(&one_leaps, &sto("XYZ280317C00070000", "1"), &q, today()),
        uncovered("XYZ280317C00070000")
    );
    // Another underlying's long does not cover.
    assert_eq!(
        engine.submit(&one_leaps, &sto("ABC261218C00010000", "1"), &q, today()),
        uncovered("ABC261218C00010000")
    );
    // Short puts are never allowed.
    assert_eq!(
        engine.submit(&one_leaps, &sto("XYZ261218P00060000", "1"), &q, today()),
        uncovered("XYZ261218P00060000")
    );
    // Existing shorts consume coverage.
    let covered = account("100000", &[(LEAPS, "1", "12.40"), (SHORT, "-1", "1.20")]);
    assert_eq!(
        engine.submit(&covered, &sto(NEXT, "1"), &q, today()),
        uncovered(NEXT)
    );
    // Selling the cover is checked too.
    assert_eq!(
        engine.submit(
            &covered,
            &market(LEAPS, PositionIntent::SellToClose, "1"),
            &q,
            today()
        ),
        uncovered(SHORT)
    );
    // Buying the cover and selling the call together, as one mleg, is covered.
    let diagonal = mleg(
        "1",
        None,
        vec![
            leg(LEAPS, PositionIntent::BuyToOpen, 1),
            leg(SHORT, PositionIntent::SellToOpen, 1),
        ],
    );
    assert!(engine.submit(&naked, &diagonal, &q, today()).is_ok());
}

#[test]
fn coverage_matching_is_optimal_not_first_fit() {
    // Longs expiring Jan-27 and Mar-27; shorts Dec-26 and Feb-27. Matching the Dec short to the
    // Mar long would strand the Feb short; the right matching covers both.
    let engine = Engine::default();
    let acct = account(
        "100000",
        &[
            ("XYZ270319C00050000", "1", "10"),
            ("XYZ270115C00050000", "1", "9"),
            ("XYZ261218C00070000", "-1", "1"),
        ],
    );
    let q = quotes(&[("XYZ270219C00070000", "1", "1.10")]);
    let sto = market("XYZ270219C00070000", PositionIntent::SellToOpen, "1");
    assert!(engine.submit(&acct, &sto, &q, today()).is_ok());
    let q = quotes(&[("XYZ270416C00070000", "1", "1.10")]);
    let too_late = market("XYZ270416C00070000", PositionIntent::SellToOpen, "1");
    assert_eq!(
        engine.submit(&acct, &too_late, &q, today()),
        Err(OrderRejection::UncoveredShortOption {
            symbol: "XYZ270416C00070000".to_owned()
        })
    );
}

#[test]
fn pending_orders_count_against_coverage() {
    let engine = Engine::default();
    let q = quotes(&[
        (SHORT, "1.20", "1.25"),
        (NEXT, "1.30", "1.35"),
        (LEAPS, "12", "12.40"),
    ]);
    let mut acct = account("100000", &[(LEAPS, "1", "12.40")]);
    acct.open_orders.push(resting(
        limit(SHORT, PositionIntent::SellToOpen, "1", "2.00"),
        "0",
    ));
    assert_eq!(
        engine.submit(
            &acct,
            &market(NEXT, PositionIntent::SellToOpen, "1"),
            &q,
            today()
        ),
        Err(OrderRejection::UncoveredShortOption {
            symbol: NEXT.to_owned()
        })
    );
    let mut acct = account("100000", &[(LEAPS, "1", "12.40")]);
    acct.open_orders.push(resting(
        limit(LEAPS, PositionIntent::SellToClose, "1", "20"),
        "0",
    ));
    assert_eq!(
        engine.submit(
            &acct,
            &market(SHORT, PositionIntent::SellToOpen, "1"),
            &q,
            today()
        ),
        Err(OrderRejection::UncoveredShortOption {
            symbol: SHORT.to_owned()
        })
    );
}

#[test]
fn buying_is_never_blocked_by_an_old_coverage_problem() {
    let engine = Engine::default();
    // An uncovered short that predates the rules (e.g. seeded data).
    let acct = account("100000", &[(SHORT, "-1", "1.20")]);
    let q = quotes(&[(SHORT, "1.00", "1.10"), (LEAPS, "12", "12.40")]);
    assert!(engine
        .submit(
            &acct,
            &market(SHORT, PositionIntent::BuyToClose, "1"),
            &q,
            today()
        )
        .is_ok());
    assert!(engine
        .submit(
            &acct,
            &market(LEAPS, PositionIntent::BuyToOpen, "1"),
            &q,
            today()
        )
        .is_ok());
}

#[test]
fn quotes_must_be_usable() {
    let engine = Engine::default();
    let acct = account("100000", &[("AAPL", "10", "150")]);
    let unavailable = || {
        Err(OrderRejection::QuoteUnavailable {
            symbol: "AAPL".to_owned(),
        })
    };
    let buy = market("AAPL", PositionIntent::BuyToOpen, "1");
    let sell = market("AAPL", PositionIntent::SellToClose, "1");
    assert_eq!(
        engine.submit(&acct, &buy, &quotes(&[]), today()),
        unavailable()
    );
    assert_eq!(
        engine.submit(&acct, &buy, &quotes(&[("MSFT", "1", "2")]), today()),
        unavailable()
    );
    let crossed = quotes(&[("AAPL", "191", "190")]);
    assert_eq!(engine.submit(&acct, &buy, &crossed, today()), unavailable());
    assert_eq!(
        engine.submit(&acct, &sell, &crossed, today()),
        unavailable()
    );
    let no_bid = quotes(&[("AAPL", "0", "190")]);
    assert!(engine.submit(&acct, &buy, &no_bid, today()).is_ok());
    assert_eq!(engine.submit(&acct, &sell, &no_bid, today()), unavailable());
    let no_ask = quotes(&[("AAPL", "0", "0")]);
    assert_eq!(engine.submit(&acct, &buy, &no_ask, today()), unavailable());
    let negative = quotes(&[("AAPL", "-1", "190")]);
    assert_eq!(
        engine.submit(&acct, &buy, &negative, today()),
        unavailable()
    );
    // Resting limits need a quote too.
    assert_eq!(
        engine.submit(
            &acct,
            &limit("AAPL", PositionIntent::BuyToOpen, "1", "1"),
            &quotes(&[]),
            today()
        ),
        unavailable()
    );
    // An mleg reports the first leg without a quote.
    let acct = account("100000", &[(LEAPS, "1", "12.40"), (SHORT, "-1", "1.20")]);
    assert_eq!(
        engine.submit(
            &acct,
            &roll("1", SHORT, NEXT, None),
            &quotes(&[(SHORT, "1", "1.1")]),
            today()
        ),
        Err(OrderRejection::QuoteUnavailable {
            symbol: NEXT.to_owned()
        })
    );
}

#[test]
fn structural_validation() {
    let engine = Engine::default();
    let check = |spec: &OrderSpec| engine.validate(spec, today());
    let invalid = |spec: &OrderSpec| {
        let err = check(spec).unwrap_err();
        assert_eq!(err.code(), "invalid_order", "{spec:?} -> {err}");
    };
    assert!(check(&market("AAPL", PositionIntent::BuyToOpen, "1")).is_ok());
    assert!(check(&market("AAPL", PositionIntent::BuyToOpen, "0.123456789")).is_ok());
    invalid(&market("AAPL", PositionIntent::BuyToOpen, "0"));
    invalid(&market("AAPL", PositionIntent::BuyToOpen, "-1"));
    invalid(&market("AAPL", PositionIntent::BuyToOpen, "0.0000000001"));
    invalid(&market("AAPL", PositionIntent::BuyToOpen, "10000001"));
    invalid(&market(LEAPS, PositionIntent::BuyToOpen, "1.5"));
    // Absurd sizes are rejected, never overflow.
    invalid(&market(
        "AAPL",
        PositionIntent::BuyToOpen,
        "79228162514264337593543950335",
    ));
    let mut huge = roll("79228162514264337593543950335", SHORT, NEXT, None);
    huge.legs[1].ratio_qty = u32::MAX;
    invalid(&huge);
    let mut wide = roll("10", SHORT, NEXT, None);
    wide.legs[1].ratio_qty = 2_000_000;
    invalid(&wide);
    assert!(check(&market(LEAPS, PositionIntent::BuyToOpen, "2.000")).is_ok());

    let mut wrong_side = market("AAPL", PositionIntent::BuyToOpen, "1");
    wrong_side.legs[0].side = Side::Sell;
    invalid(&wrong_side);
    let mut ratio = market("AAPL", PositionIntent::BuyToOpen, "1");
    ratio.legs[0].ratio_qty = 2;
    invalid(&ratio);
    let mut no_legs = market("AAPL", PositionIntent::BuyToOpen, "1");
    no_legs.legs.clear();
    invalid(&no_legs);
    let mut two_legs = market("AAPL", PositionIntent::BuyToOpen, "1");
    two_legs
        .legs
        .push(leg("MSFT", PositionIntent::BuyToOpen, 1));
    invalid(&two_legs);

    let mut market_with_limit = market("AAPL", PositionIntent::BuyToOpen, "1");
    market_with_limit.limit_price = Some(d("1"));
    invalid(&market_with_limit);
    let mut limit_without = limit("AAPL", PositionIntent::BuyToOpen, "1", "1");
    limit_without.limit_price = None;
    invalid(&limit_without);
    invalid(&limit("AAPL", PositionIntent::BuyToOpen, "1", "0"));
    invalid(&limit("AAPL", PositionIntent::BuyToOpen, "1", "-1"));
    invalid(&limit("AAPL", PositionIntent::BuyToOpen, "1", "1000000001"));

    // Multi-leg shapes.
    assert!(check(&roll("1", SHORT, NEXT, Some("-0.80"))).is_ok());
    assert!(check(&roll("1", SHORT, NEXT, Some("0"))).is_ok());
    invalid(&roll("1.5", SHORT, NEXT, None));
    invalid(&roll("1", SHORT, SHORT, None));
    invalid(&roll("1", SHORT, "ABC270115C00067500", None));
    invalid(&mleg(
        "1",
        None,
        vec![leg(SHORT, PositionIntent::BuyToClose, 1)],
    ));
    let five = [
        "XYZ270115C00010000",
        "XYZ270115C00020000",
        "XYZ270115C00030000",
        "XYZ270115C00040000",
        "XYZ270115C00050000",
    ]
    .iter()
    .map(|s| leg(s, PositionIntent::BuyToOpen, 1))
    .collect::<Vec<_>>();
    assert!(check(&mleg("1", None, five[..4].to_vec())).is_ok());
    invalid(&mleg("1", None, five));
    invalid(&mleg(
        "1",
        None,
        vec![
            leg("XYZ", PositionIntent::BuyToOpen, 100),
            leg(SHORT, PositionIntent::SellToOpen, 1),
        ],
    ));
    let ratios = |a: u32, b: u32| {
        mleg(
            "1",
            None,
            vec![
                leg(LEAPS, PositionIntent::BuyToOpen, a),
                leg(SHORT, PositionIntent::SellToOpen, b),
            ],
        )
    };
    assert!(check(&ratios(1, 2)).is_ok());
    invalid(&ratios(2, 2));
    invalid(&ratios(0, 1));

    // Expiry is checked per leg, after the shape.
    assert_eq!(
        engine.validate(&roll("1", SHORT, NEXT, None), morning(2026, 12, 19)),
        Err(OrderRejection::ContractExpired {
            symbol: SHORT.to_owned()
        })
    );
    assert!(engine
        .validate(&roll("1", SHORT, NEXT, None), morning(2026, 12, 18))
        .is_ok());
    assert_eq!(
        engine
            .validate(&roll("0", SHORT, NEXT, None), morning(2026, 12, 19))
            .unwrap_err()
            .code(),
        "invalid_order"
    );
}

#[test]
fn resting_simple_limits_fill_at_their_limit() {
    let engine = Engine::default();
    let acct = account("10000", &[("AAPL", "10", "150")]);
    let buy = limit("AAPL", PositionIntent::BuyToOpen, "10", "185");
    let sell = limit("AAPL", PositionIntent::SellToClose, "5", "200");

    let q = quotes(&[("AAPL", "186", "186.50")]);
    assert_eq!(engine.evaluate_resting(&acct, &buy, &q, today()), Ok(None));
    assert_eq!(engine.evaluate_resting(&acct, &sell, &q, today()), Ok(None));
    assert_eq!(
        engine.evaluate_resting(&acct, &buy, &quotes(&[]), today()),
        Ok(None)
    );
    assert_eq!(
        engine.evaluate_resting(&acct, &buy, &quotes(&[("AAPL", "185", "184")]), today()),
        Ok(None)
    );

    let q = quotes(&[("AAPL", "183", "184.50")]);
    let e = engine
        .evaluate_resting(&acct, &buy, &q, today())
        .unwrap()
        .unwrap();
    assert_eq!(e.fills[0].price, d("185"));
    assert_eq!(e.cash_delta, d("-1850"));

    let q = quotes(&[("AAPL", "201", "202")]);
    let e = engine
        .evaluate_resting(&acct, &sell, &q, today())
        .unwrap()
        .unwrap();
    assert_eq!(e.fills[0].price, d("200"));
    assert_eq!(e.realized_pnl, d("250"));
    assert_eq!(e.positions[0].qty, d("5"));
}

#[test]
fn resting_mleg_fills_at_current_quotes() {
    let engine = Engine::default();
    let acct = account("0", &[(LEAPS, "1", "12.40"), (SHORT, "-1", "1.20")]);
    let order = roll("1", SHORT, NEXT, Some("-0.80"));
    let q = quotes(&[(SHORT, "0.50", "0.55"), (NEXT, "1.30", "1.35")]);
    assert_eq!(
        engine.evaluate_resting(&acct, &order, &q, today()),
        Ok(None)
    );
    let q = quotes(&[(SHORT, "0.40", "0.45"), (NEXT, "1.30", "1.35")]);
    let e = engine
        .evaluate_resting(&acct, &order, &q, today())
        .unwrap()
        .unwrap();
    assert_eq!(e.net_price, d("-0.85"));
    assert_eq!(e.cash_delta, d("85.00"));
}

#[test]
fn resting_orders_rerun_the_risk_checks() {
    let engine = Engine::default();
    // The position shrank since the sell was accepted.
    let acct = account("10000", &[("AAPL", "3", "150")]);
    let sell = limit("AAPL", PositionIntent::SellToClose, "5", "200");
    let q = quotes(&[("AAPL", "201", "202")]);
    assert_eq!(
        engine.evaluate_resting(&acct, &sell, &q, today()),
        Err(OrderRejection::InsufficientQty {
            symbol: "AAPL".to_owned(),
            available: d("3"),
            requested: d("5"),
        })
    );
    // Cash fell below the cost.
    let poor = account("100", &[]);
    let buy = limit("AAPL", PositionIntent::BuyToOpen, "1", "190");
    assert_eq!(
        // Not marketable at an ask of 202, so buying power is not looked at.
        engine.evaluate_resting(&poor, &buy, &q, today()),
        Ok(None)
    );
    let q = quotes(&[("AAPL", "188", "189")]);
    assert_eq!(
        engine.evaluate_resting(&poor, &buy, &q, today()),
        Err(OrderRejection::InsufficientBuyingPower {
            buying_power: d("100"),
            cost_basis: d("190"),
        })
    );
    // The cover was sold.
    let naked = account("10000", &[]);
    let sto = limit(SHORT, PositionIntent::SellToOpen, "1", "1.00");
    assert_eq!(
        engine.evaluate_resting(&naked, &sto, &quotes(&[(SHORT, "1.20", "1.25")]), today()),
        Err(OrderRejection::UncoveredShortOption {
            symbol: SHORT.to_owned()
        })
    );
    // The contract expired while resting.
    assert_eq!(
        engine.evaluate_resting(
            &naked,
            &sto,
            &quotes(&[(SHORT, "1.20", "1.25")]),
            morning(2027, 1, 1)
        ),
        Err(OrderRejection::ContractExpired {
            symbol: SHORT.to_owned()
        })
    );
}

#[test]
fn apply_keeps_flat_positions() {
    let engine = Engine::default();
    let q = quotes(&[("AAPL", "200", "201")]);
    let mut acct = account("0", &[("AAPL", "2", "150")]);
    let e = trade(
        &engine,
        &mut acct,
        &market("AAPL", PositionIntent::SellToClose, "2"),
        &q,
    );
    assert_eq!(e.positions.len(), 1);
    let p = &acct.positions["AAPL"];
    assert_eq!(
        (p.qty, p.avg_entry_price, p.realized_pnl),
        (d("0"), d("0"), d("100"))
    );
    assert_eq!(acct.cash, d("400"));
    // Reopening keeps the cumulative realized P&L.
    trade(
        &engine,
        &mut acct,
        &market("AAPL", PositionIntent::BuyToOpen, "1"),
        &q,
    );
    let p = &acct.positions["AAPL"];
    assert_eq!(
        (p.qty, p.avg_entry_price, p.realized_pnl),
        (d("1"), d("201"), d("100"))
    );
}

#[test]
fn same_inputs_same_decision() {
    let engine = Engine::new(FeeSchedule {
        per_contract: d("0.65"),
        ..FeeSchedule::default()
    });
    let acct = account("5000", &[(LEAPS, "1", "12.40"), (SHORT, "-1", "1.20")]);
    let q = quotes(&[(SHORT, "0.40", "0.45"), (NEXT, "1.30", "1.35")]);
    let spec = roll("1", SHORT, NEXT, None);
    let first = engine.submit(&acct, &spec, &q, today());
    for _ in 0..10 {
        assert_eq!(engine.submit(&acct, &spec, &q, today()), first);
    }
}

/// The review's reproduction: 1,000 short call spreads (short the 100 call, long the 110) on a
/// $100,000 account. The credit used to become buying power ($500,000, then $416,000 of stock
/// bought with it); the spread's maximum loss of $1,000,000 less its $400,000 credit does not
/// fit, and one spread that fits leaves buying power below the cash held.
#[test]
fn a_credit_spread_reserves_its_maximum_loss() {
    const SHORT_100: &str = "XYZ261218C00100000";
    const LONG_110: &str = "XYZ261218C00110000";
    let engine = Engine::default();
    let acct = account("100000", &[]);
    let q = quotes(&[
        (SHORT_100, "5.00", "5.10"),
        (LONG_110, "0.90", "1.00"),
        ("XYZ", "99.90", "100.00"),
    ]);
    let spread = |qty: &str| {
        mleg(
            qty,
            None,
            vec![
                leg(SHORT_100, PositionIntent::SellToOpen, 1),
                leg(LONG_110, PositionIntent::BuyToOpen, 1),
            ],
        )
    };
    // Credit 4.00 a spread: the order needs (10.00 - 4.00) x 100 x 1,000 = $600,000.
    assert_eq!(
        engine.submit(&acct, &spread("1000"), &q, today()),
        Err(OrderRejection::InsufficientBuyingPower {
            buying_power: d("100000"),
            cost_basis: d("600000.00"),
        })
    );
    // Ten spreads take $6,000 of buying power, although the account's cash grew by $4,000.
    let mut acct = acct;
    trade(&engine, &mut acct, &spread("10"), &q);
    assert_eq!(acct.cash, d("104000.00"));
    assert_eq!(acct.spread_requirement(), d("10000"));
    assert_eq!(acct.buying_power(), d("94000.00"));
    // The stock the credit used to buy is refused beyond what is left.
    assert_eq!(
        engine.submit(
            &acct,
            &market("XYZ", PositionIntent::BuyToOpen, "1000"),
            &q,
            today()
        ),
        Err(OrderRejection::InsufficientBuyingPower {
            buying_power: d("94000.00"),
            cost_basis: d("100000.00"),
        })
    );
    // Closing the spread gives the reservation back.
    let close = mleg(
        "10",
        None,
        vec![
            leg(SHORT_100, PositionIntent::BuyToClose, 1),
            leg(LONG_110, PositionIntent::SellToClose, 1),
        ],
    );
    trade(&engine, &mut acct, &close, &q);
    assert_eq!(acct.spread_requirement(), Decimal::ZERO);
    assert_eq!(acct.buying_power(), acct.cash);
}

/// A resting credit spread reserves its maximum loss less its credit at the limit.
#[test]
fn a_resting_credit_spread_reserves_its_width_less_the_credit() {
    const SHORT_100: &str = "XYZ261218C00100000";
    const LONG_110: &str = "XYZ261218C00110000";
    let engine = Engine::default();
    let acct = account("100000", &[]);
    let q = quotes(&[(SHORT_100, "3.00", "3.10"), (LONG_110, "0.90", "1.00")]);
    let spread = mleg(
        "10",
        Some("-4.00"),
        vec![
            leg(SHORT_100, PositionIntent::SellToOpen, 1),
            leg(LONG_110, PositionIntent::BuyToOpen, 1),
        ],
    );
    assert_eq!(
        engine.submit(&acct, &spread, &q, today()),
        Ok(Decision::Rest {
            reserved_cash: d("6000.00")
        })
    );
}

mod solvency {
    //! Property: whatever sequence of orders a cash account sends (calls on one root at four
    //! strikes and two expiries, singly or as spreads, the stock, market or limit, resting
    //! orders filled by later quotes), buying power never exceeds the cash less its
    //! reservations and never goes below zero, and the account can always pay what its
    //! options could cost it: valued at expiry at any underlying price, cash plus the options'
    //! intrinsic values is never negative.
    use super::*;
    use crate::symbol::OPTION_MULTIPLIER;
    use proptest::prelude::*;

    const CALLS: [&str; 8] = [
        "XYZ261218C00090000",
        "XYZ261218C00100000",
        "XYZ261218C00110000",
        "XYZ261218C00120000",
        "XYZ270115C00090000",
        "XYZ270115C00100000",
        "XYZ270115C00110000",
        "XYZ270115C00120000",
    ];

    #[derive(Debug, Clone)]
    enum Step {
        /// One call (index into `CALLS`), bought or sold; the intent follows the position.
        Call {
            index: usize,
            buy: bool,
            qty: u32,
            limit: Option<u32>,
        },
        /// A two-leg spread: buy one call, sell another.
        Spread {
            buy: usize,
            sell: usize,
            qty: u32,
            limit: Option<i32>,
        },
        /// The stock.
        Stock { buy: bool, qty: u32 },
        /// New quotes (cents of each call's bid, and the stock's), then the resting orders are
        /// judged against them.
        Quotes { calls: [u32; 8], stock: u32 },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (
                0..8usize,
                any::<bool>(),
                1..50u32,
                proptest::option::of(1..3000u32)
            )
                .prop_map(|(index, buy, qty, limit)| Step::Call {
                    index,
                    buy,
                    qty,
                    limit
                }),
            (
                0..8usize,
                0..8usize,
                1..50u32,
                proptest::option::of(-2000..2000i32)
            )
                .prop_filter("two distinct legs", |(b, s, _, _)| b != s)
                .prop_map(|(buy, sell, qty, limit)| Step::Spread {
                    buy,
                    sell,
                    qty,
                    limit
                }),
            (any::<bool>(), 1..2000u32).prop_map(|(buy, qty)| Step::Stock { buy, qty }),
            (proptest::array::uniform8(1..3000u32), 5000..15000u32)
                .prop_map(|(calls, stock)| Step::Quotes { calls, stock }),
        ]
    }

    fn cents(c: impl Into<i64>) -> Decimal {
        Decimal::new(c.into(), 2)
    }

    fn book(calls: &[u32; 8], stock: u32) -> BTreeMap<String, Quote> {
        let mut q: BTreeMap<String, Quote> = CALLS
            .iter()
            .zip(calls)
            .map(|(s, &bid)| {
                let quote = Quote {
                    bid: cents(bid),
                    ask: cents(bid + 10),
                };
                ((*s).to_owned(), quote)
            })
            .collect();
        q.insert(
            "XYZ".into(),
            Quote {
                bid: cents(stock),
                ask: cents(stock + 5),
            },
        );
        q
    }

    fn intent(acct: &AccountState, symbol: &str, buy: bool) -> PositionIntent {
        let side = if buy { Side::Buy } else { Side::Sell };
        PositionIntent::infer(side, acct.qty(symbol))
    }

    fn spec(acct: &AccountState, step: &Step) -> Option<OrderSpec> {
        let kind = |limit: bool| {
            if limit {
                OrderType::Limit
            } else {
                OrderType::Market
            }
        };
        match *step {
            Step::Call {
                index,
                buy,
                qty,
                limit,
            } => Some(OrderSpec::simple(
                inst(CALLS[index]),
                intent(acct, CALLS[index], buy),
                Decimal::from(qty),
                kind(limit.is_some()),
                limit.map(cents),
                TimeInForce::Gtc,
            )),
            Step::Spread {
                buy,
                sell,
                qty,
                limit,
            } => Some(OrderSpec {
                class: OrderClass::Mleg,
                order_type: kind(limit.is_some()),
                time_in_force: TimeInForce::Gtc,
                qty: Decimal::from(qty),
                limit_price: limit.map(cents),
                legs: vec![
                    leg(CALLS[buy], intent(acct, CALLS[buy], true), 1),
                    leg(CALLS[sell], intent(acct, CALLS[sell], false), 1),
                ],
            }),
            Step::Stock { buy, qty } => Some(OrderSpec::simple(
                inst("XYZ"),
                intent(acct, "XYZ", buy),
                Decimal::from(qty),
                OrderType::Market,
                None,
                TimeInForce::Gtc,
            )),
            Step::Quotes { .. } => None,
        }
    }

    /// Cash plus every option's intrinsic value with the underlying at `price`.
    fn value_at_expiry(acct: &AccountState, price: Decimal) -> Decimal {
        let options: Decimal = acct
            .positions
            .values()
            .filter_map(|p| {
                let contract = inst(&p.symbol).contract()?.clone();
                Some(p.qty * (price - contract.strike).max(Decimal::ZERO) * OPTION_MULTIPLIER)
            })
            .sum();
        acct.cash + options
    }

    fn check(acct: &AccountState) -> Result<(), TestCaseError> {
        let bp = acct.buying_power();
        prop_assert!(
            bp <= acct.cash - acct.reserved_cash(),
            "buying power {bp} above cash {} less reservations",
            acct.cash
        );
        prop_assert!(bp >= Decimal::ZERO, "buying power {bp} below zero");
        for price in [0, 85, 90, 95, 100, 105, 110, 115, 120, 125, 200, 10_000] {
            let value = value_at_expiry(acct, Decimal::from(price));
            prop_assert!(
                value >= Decimal::ZERO,
                "worth {value} at expiry with the underlying at {price}: {acct:?}"
            );
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
        #[test]
        fn no_sequence_of_orders_creates_buying_power(
            cash in 0..200_000i64,
            steps in proptest::collection::vec(step(), 1..40),
        ) {
            let engine = Engine::default();
            let mut acct = AccountState::with_cash(Decimal::from(cash));
            let mut q = book(&[500, 300, 100, 50, 700, 450, 200, 100], 10_000);
            for step in &steps {
                if let Step::Quotes { calls, stock } = step {
                    q = book(calls, *stock);
                    // Judge every resting order against the new quotes, oldest first.
                    let mut index = 0;
                    while index < acct.open_orders.len() {
                        let order = acct.open_orders.remove(index);
                        match engine.evaluate_resting(&acct, &order.spec, &q, today()) {
                            Ok(Some(execution)) => engine.apply(&mut acct, &execution),
                            _ => {
                                acct.open_orders.insert(index, order);
                                index += 1;
                            }
                        }
                        check(&acct)?;
                    }
                    continue;
                }
                let Some(order) = spec(&acct, step) else { continue };
                match engine.submit(&acct, &order, &q, today()) {
                    Ok(Decision::Filled(execution)) => engine.apply(&mut acct, &execution),
                    Ok(Decision::Rest { reserved_cash }) => acct
                        .open_orders
                        .push(OpenOrder { spec: order, reserved_cash }),
                    Err(_) => {}
                }
                check(&acct)?;
            }
        }
    }
}
