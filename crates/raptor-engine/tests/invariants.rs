//! Property tests: cash conservation, holdings the rules allow, average price and realized P&L
//! against an independent integer reference, and determinism.
#![expect(clippy::unwrap_used, reason = "a test reports a failure by panicking")]

use std::collections::BTreeMap;

use chrono::NaiveDate;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use raptor_engine::{
    AccountState, Decision, Engine, Execution, Instrument, LegSpec, OpenOrder, OrderClass,
    OrderRejection, OrderSpec, OrderType, Position, PositionIntent, Quote, Right, Side,
    TimeInForce,
};
use rust_decimal::Decimal;

/// Two equities and, on XYZ, three calls with increasing expiries and one put.
const SYMBOLS: [&str; 6] = [
    "XYZ",
    "ABC",
    "XYZ270115C00050000",
    "XYZ270618C00055000",
    "XYZ280121C00060000",
    "XYZ270115P00045000",
];
const OPTIONS: std::ops::Range<usize> = 2..6;

/// 2026-12-01 10:00 New York, in the regular session.
fn today() -> chrono::DateTime<chrono::Utc> {
    use chrono::TimeZone;
    chrono::Utc
        .with_ymd_and_hms(2026, 12, 1, 15, 0, 0)
        .single()
        .unwrap()
}

fn cents(c: i64) -> Decimal {
    Decimal::new(c, 2)
}

/// Biased towards opening longs so that closing and covered-short orders have something to
/// work with.
fn intent() -> impl Strategy<Value = PositionIntent> {
    prop_oneof![
        3 => Just(PositionIntent::BuyToOpen),
        2 => Just(PositionIntent::SellToOpen),
        2 => Just(PositionIntent::SellToClose),
        1 => Just(PositionIntent::BuyToClose),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    /// A simple order; a limit is placed `offset` cents from the far side.
    Simple {
        symbol: usize,
        intent: PositionIntent,
        qty: u32,
        limit_offset: Option<i64>,
    },
    /// Any two distinct option legs with random intents, as one mleg.
    Mleg {
        legs: [(usize, PositionIntent, u32); 2],
        qty: u32,
        limit_net: Option<i64>,
    },
    /// New quotes for every symbol (bid cents, spread cents), then every resting order is
    /// re-evaluated.
    Requote { quotes: Vec<(i64, i64)> },
    /// Cancel the n-th open order (modulo their number).
    Cancel { index: usize },
}

fn quotes_strategy() -> impl Strategy<Value = Vec<(i64, i64)>> {
    prop::collection::vec((1i64..3000, 0i64..60), SYMBOLS.len())
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..SYMBOLS.len(), intent(), 1u32..6, prop::option::of(-40i64..40)).prop_map(
            |(symbol, intent, qty, limit_offset)| Step::Simple { symbol, intent, qty, limit_offset }
        ),
        2 => (
            (OPTIONS, intent(), 1u32..3),
            (OPTIONS, intent(), 1u32..3),
            1u32..3,
            prop::option::of(-400i64..400),
        )
            .prop_map(|(a, b, qty, limit_net)| Step::Mleg { legs: [a, b], qty, limit_net }),
        2 => quotes_strategy().prop_map(|quotes| Step::Requote { quotes }),
        1 => any::<usize>().prop_map(|index| Step::Cancel { index }),
    ]
}

fn quote_map(raw: &[(i64, i64)]) -> BTreeMap<String, Quote> {
    SYMBOLS
        .iter()
        .zip(raw)
        .map(|(s, &(bid, spread))| {
            let quote = Quote {
                bid: cents(bid),
                ask: cents(bid + spread),
            };
            ((*s).to_owned(), quote)
        })
        .collect()
}

fn leg(symbol: usize, intent: PositionIntent, ratio_qty: u32) -> LegSpec {
    LegSpec {
        instrument: Instrument::parse(SYMBOLS[symbol]).unwrap(),
        side: intent.side(),
        ratio_qty,
        position_intent: intent,
    }
}

/// Builds the order a step describes against the current quotes, or `None` when the step
/// cannot form a well-shaped order (those are covered by the unit tests).
fn order(step: &Step, quotes: &BTreeMap<String, Quote>) -> Option<OrderSpec> {
    match step {
        Step::Simple {
            symbol,
            intent,
            qty,
            limit_offset,
        } => {
            let q = quotes[SYMBOLS[*symbol]];
            let far = match intent.side() {
                Side::Buy => q.ask,
                Side::Sell => q.bid,
            };
            let limit_price = limit_offset.map(|o| (far + cents(o)).max(cents(1)));
            Some(OrderSpec::simple(
                Instrument::parse(SYMBOLS[*symbol]).unwrap(),
                *intent,
                Decimal::from(*qty),
                if limit_price.is_some() {
                    OrderType::Limit
                } else {
                    OrderType::Market
                },
                limit_price,
                TimeInForce::Gtc,
            ))
        }
        Step::Mleg {
            legs,
            qty,
            limit_net,
        } => {
            let [(a, ia, ra), (b, ib, rb)] = *legs;
            if a == b {
                return None;
            }
            // Ratios in lowest terms, as validation requires.
            let (ra, rb) = if ra == rb { (1, 1) } else { (ra, rb) };
            Some(OrderSpec {
                class: OrderClass::Mleg,
                order_type: if limit_net.is_some() {
                    OrderType::Limit
                } else {
                    OrderType::Market
                },
                time_in_force: TimeInForce::Day,
                qty: Decimal::from(*qty),
                limit_price: limit_net.map(cents),
                legs: vec![leg(a, ia, ra), leg(b, ib, rb)],
            })
        }
        Step::Requote { .. } | Step::Cancel { .. } => None,
    }
}

/// Everything observable a run produced, for the determinism property.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Submitted(Result<Decision, OrderRejection>),
    Evaluated(Result<Option<Execution>, OrderRejection>),
    Canceled(usize),
}

fn market_value(account: &AccountState, marks: &[(String, Decimal, Decimal)]) -> Decimal {
    marks
        .iter()
        .map(|(symbol, mark, mult)| account.qty(symbol) * *mark * *mult)
        .sum()
}

/// With zero fees, cash plus the touched positions marked at their fill prices is unchanged.
fn check_conserved(
    before: &AccountState,
    after: &AccountState,
    execution: &Execution,
) -> Result<(), TestCaseError> {
    let marks: Vec<_> = execution
        .fills
        .iter()
        .map(|f| (f.symbol.clone(), f.price, f.multiplier))
        .collect();
    prop_assert_eq!(execution.fees, Decimal::ZERO);
    prop_assert_eq!(
        before.cash + market_value(before, &marks),
        after.cash + market_value(after, &marks),
        "value not conserved by {:?}",
        execution
    );
    let realized: Decimal = execution.fills.iter().map(|f| f.realized_pnl).sum();
    prop_assert_eq!(realized, execution.realized_pnl);
    prop_assert_eq!(after.realized_pnl() - before.realized_pnl(), realized);
    Ok(())
}

/// Only covered short calls may be negative, checked by Hall's condition rather than by
/// matching: for every short expiry t, shorts expiring at or after t never outnumber longs
/// expiring at or after t. A cash account also never commits more cash than it has.
fn check_holdings(account: &AccountState) -> Result<(), TestCaseError> {
    let mut calls: BTreeMap<String, Vec<(NaiveDate, Decimal)>> = BTreeMap::new();
    for position in account.positions.values() {
        let instrument = Instrument::parse(&position.symbol).unwrap();
        match instrument.contract() {
            Some(c) if c.right == Right::Call => {
                calls
                    .entry(c.root.clone())
                    .or_default()
                    .push((c.expiry, position.qty));
            }
            _ => prop_assert!(
                position.qty >= Decimal::ZERO,
                "short {} is not allowed",
                position.symbol
            ),
        }
        if position.qty.is_zero() {
            prop_assert_eq!(position.avg_entry_price, Decimal::ZERO);
        } else {
            prop_assert!(position.avg_entry_price > Decimal::ZERO);
        }
    }
    for holdings in calls.values() {
        for &(t, qty) in holdings {
            if qty >= Decimal::ZERO {
                continue;
            }
            let at_or_after = |short: bool| -> Decimal {
                holdings
                    .iter()
                    .filter(|(e, q)| *e >= t && (*q < Decimal::ZERO) == short)
                    .map(|(_, q)| q.abs())
                    .sum()
            };
            prop_assert!(
                at_or_after(true) <= at_or_after(false),
                "uncovered short calls in {:?}",
                holdings
            );
        }
    }
    prop_assert!(account.buying_power() >= Decimal::ZERO);
    prop_assert!(account
        .open_orders
        .iter()
        .all(|o| o.reserved_cash >= Decimal::ZERO));
    Ok(())
}

/// Runs a scenario, checking conservation, holdings and open-order order independence at every
/// step; returns the final account and every engine answer.
fn run(
    cash: i64,
    initial: &[(i64, i64)],
    steps: &[Step],
) -> Result<(AccountState, Vec<Event>), TestCaseError> {
    let engine = Engine::default();
    let mut account = AccountState::with_cash(Decimal::from(cash));
    let mut quotes = quote_map(initial);
    let mut events = Vec::new();
    for step in steps {
        match step {
            Step::Requote { quotes: raw } => {
                quotes = quote_map(raw);
                let mut i = 0;
                while i < account.open_orders.len() {
                    let mut others = account.clone();
                    let order = others.open_orders.remove(i);
                    let result = engine.evaluate_resting(&others, &order.spec, &quotes, today());
                    events.push(Event::Evaluated(result.clone()));
                    match result {
                        Ok(Some(execution)) => {
                            let before = others.clone();
                            engine.apply(&mut others, &execution);
                            check_conserved(&before, &others, &execution)?;
                            account = others;
                        }
                        _ => i += 1,
                    }
                }
            }
            Step::Cancel { index } => {
                if !account.open_orders.is_empty() {
                    let i = index % account.open_orders.len();
                    account.open_orders.remove(i);
                    events.push(Event::Canceled(i));
                }
            }
            Step::Simple { .. } | Step::Mleg { .. } => {
                let Some(spec) = order(step, &quotes) else {
                    continue;
                };
                let decision = engine.submit(&account, &spec, &quotes, today());
                // The decision cannot depend on the order in which open orders are listed.
                let mut shuffled = account.clone();
                shuffled.open_orders.reverse();
                if !shuffled.open_orders.is_empty() {
                    shuffled.open_orders.rotate_left(1);
                }
                prop_assert_eq!(
                    &engine.submit(&shuffled, &spec, &quotes, today()),
                    &decision
                );
                match &decision {
                    Ok(Decision::Filled(execution)) => {
                        let before = account.clone();
                        engine.apply(&mut account, execution);
                        check_conserved(&before, &account, execution)?;
                    }
                    Ok(Decision::Rest { reserved_cash }) => account.open_orders.push(OpenOrder {
                        spec,
                        reserved_cash: *reserved_cash,
                    }),
                    Err(_) => {}
                }
                events.push(Event::Submitted(decision));
            }
        }
        check_holdings(&account)?;
    }
    Ok((account, events))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Invariants (1), (2) and (4): conservation at every fill, allowed holdings after every
    /// step, and the same scenario replayed gives the same answers and the same account.
    #[test]
    fn scenarios_conserve_value_respect_holdings_and_replay(
        cash in 0i64..40_000,
        initial in quotes_strategy(),
        steps in prop::collection::vec(step(), 1..60),
    ) {
        let (account, events) = run(cash, &initial, &steps)?;
        let (again, replayed) = run(cash, &initial, &steps)?;
        prop_assert_eq!(account, again);
        prop_assert_eq!(events, replayed);
    }
}

// ---- Invariant (3): average price and realized P&L against an integer reference ----

const E10: i128 = 10_000_000_000;

/// `n / d` rounded half to even, `d > 0`.
fn div_half_even(n: i128, d: i128) -> i128 {
    let (q, r) = (n.div_euclid(d), n.rem_euclid(d));
    match (2 * r).cmp(&d) {
        std::cmp::Ordering::Less => q,
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal => q + (q & 1),
    }
}

/// The same position rules in fixed-point integers: prices in 1e-10 dollars, P&L in cents.
#[derive(Debug, Default)]
struct Reference {
    qty: i128,
    avg_e10: i128,
    realized_cents: i128,
}

impl Reference {
    fn fill(&mut self, buy: bool, qty: i128, price_cents: i128, multiplier: i128) {
        let price = price_cents * (E10 / 100);
        let signed = if buy { qty } else { -qty };
        let new_qty = self.qty + signed;
        if self.qty == 0 || (self.qty > 0) == buy {
            let held = self.qty.abs();
            self.avg_e10 = div_half_even(self.avg_e10 * held + price * qty, held + qty);
        } else {
            let closed = qty.min(self.qty.abs());
            let direction = self.qty.signum();
            let realized_e10 = (price - self.avg_e10) * closed * multiplier * direction;
            self.realized_cents += div_half_even(realized_e10, E10 / 100);
            if new_qty == 0 {
                self.avg_e10 = 0;
            } else if (new_qty > 0) != (self.qty > 0) {
                self.avg_e10 = price;
            }
        }
        self.qty = new_qty;
    }
}

fn fills() -> impl Strategy<Value = Vec<(bool, i64, i64)>> {
    prop::collection::vec((any::<bool>(), 1i64..200, 1i64..100_000), 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Every fill, including ones that cross zero, agrees exactly with the reference.
    #[test]
    fn average_and_realized_match_the_reference(
        fills in fills(),
        option in any::<bool>(),
    ) {
        let multiplier: i64 = if option { 100 } else { 1 };
        let mut position = Position::flat("X");
        let mut reference = Reference::default();
        for (buy, qty, price) in fills {
            let side = if buy { Side::Buy } else { Side::Sell };
            let before = position.realized_pnl;
            let (next, realized) =
                position.apply_fill(side, Decimal::from(qty), cents(price), Decimal::from(multiplier));
            reference.fill(buy, i128::from(qty), i128::from(price), i128::from(multiplier));
            prop_assert_eq!(next.qty, Decimal::from_i128_with_scale(reference.qty, 0));
            prop_assert_eq!(
                next.avg_entry_price,
                Decimal::from_i128_with_scale(reference.avg_e10, 10)
            );
            prop_assert_eq!(
                next.realized_pnl,
                Decimal::from_i128_with_scale(reference.realized_cents, 2)
            );
            prop_assert_eq!(next.realized_pnl - before, realized);
            position = next;
        }
    }

    /// Over a round trip back to flat, realized P&L is the cash the trades made, up to the
    /// per-fill rounding of averages and P&L (well under a cent per fill).
    #[test]
    fn a_round_trip_realizes_its_cash_flow(fills in fills()) {
        let mut position = Position::flat("X");
        let mut cash = Decimal::ZERO;
        let mut count = 0i64;
        let mut trade = |position: &Position, side: Side, qty: Decimal, price: Decimal| {
            cash -= side.sign() * qty * price;
            count += 1;
            position.apply_fill(side, qty, price, Decimal::ONE).0
        };
        for (buy, qty, price) in fills {
            let side = if buy { Side::Buy } else { Side::Sell };
            position = trade(&position, side, Decimal::from(qty), cents(price));
        }
        if !position.is_flat() {
            let side = if position.qty > Decimal::ZERO { Side::Sell } else { Side::Buy };
            let qty = position.qty.abs();
            position = trade(&position, side, qty, cents(5_000));
        }
        prop_assert!(position.is_flat());
        let tolerance = cents(count);
        prop_assert!(
            (position.realized_pnl - cash).abs() <= tolerance,
            "realized {} vs cash {}",
            position.realized_pnl,
            cash
        );
    }
}

/// Expiring option positions on XYZ (calls and puts around a 50.000 strike, all expiring
/// 2026-12-18) and one that has not expired, with random quantities and entry prices.
fn expiring_positions() -> impl Strategy<Value = Vec<(usize, i64, i64)>> {
    prop::collection::vec((0usize..5, -20i64..20, 1i64..5000), 0..8)
}

const EXPIRING: [&str; 5] = [
    "XYZ261218C00050000",
    "XYZ261218P00050000",
    "XYZ261218C00047500",
    "XYZ261218P00052500",
    "XYZ270115C00050000",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Settlement converts each expired position into cash at its intrinsic value: cash plus
    /// the positions' value at the settlement prices is conserved (to the cent per
    /// settlement), the realized P&L of the settlements is exactly what the account's realized
    /// P&L moved by, each one is the cash received minus the position's cost, settled
    /// positions are flat, and a second pass settles nothing.
    #[test]
    fn settlement_conserves_value_and_realizes_the_premium(
        raw in expiring_positions(),
        bid in 0i64..10_000,
        spread in 0i64..100,
        quoted in any::<bool>(),
        cash in 0i64..10_000_000,
    ) {
        use raptor_engine::expiry::{apply_settlements, settle_expired};
        let mut account = AccountState::with_cash(cents(cash));
        for (symbol, qty, avg) in raw {
            let symbol = EXPIRING[symbol];
            account.positions.insert(symbol.to_owned(), Position {
                symbol: symbol.to_owned(),
                qty: Decimal::from(qty),
                avg_entry_price: cents(avg),
                realized_pnl: cents(avg % 7),
            });
        }
        let quotes: BTreeMap<String, Quote> = if quoted {
            BTreeMap::from([("XYZ".to_owned(), Quote { bid: cents(bid), ask: cents(bid + spread) })])
        } else {
            BTreeMap::new()
        };
        use chrono::TimeZone;
        let close = chrono::Utc.with_ymd_and_hms(2026, 12, 18, 21, 0, 0).single().unwrap();
        let before = account.clone();
        let run = settle_expired(&account, &quotes, close);
        apply_settlements(&mut account, &run);

        let expired = |s: &str| s.contains("261218");
        let open_expired = before.positions.values().filter(|p| expired(&p.symbol) && !p.is_flat()).count();
        if quoted {
            prop_assert_eq!(run.settlements.len(), open_expired);
            prop_assert!(run.awaiting_quote.is_empty());
        } else {
            prop_assert!(run.settlements.is_empty());
            prop_assert_eq!(run.awaiting_quote.len(), open_expired);
            prop_assert_eq!(&account, &before);
        }
        let value: Decimal = run.settlements.iter().map(|s| s.qty * s.intrinsic * Decimal::ONE_HUNDRED).sum();
        let slack = cents(1) / Decimal::TWO * Decimal::from(run.settlements.len());
        prop_assert!((account.cash - (before.cash + value)).abs() <= slack);
        prop_assert_eq!(account.cash - before.cash, run.settlements.iter().map(|s| s.cash_delta).sum::<Decimal>());
        prop_assert_eq!(
            account.realized_pnl() - before.realized_pnl(),
            run.settlements.iter().map(|s| s.realized_pnl).sum::<Decimal>()
        );
        for s in &run.settlements {
            prop_assert!(s.intrinsic >= Decimal::ZERO);
            let cost = s.qty * s.avg_entry_price * Decimal::ONE_HUNDRED;
            prop_assert!((s.realized_pnl - (s.cash_delta - cost)).abs() <= cents(1));
            prop_assert!(account.positions[&s.symbol].is_flat());
            prop_assert!(expired(&s.symbol));
        }
        for (symbol, position) in &before.positions {
            if !expired(symbol) {
                prop_assert_eq!(&account.positions[symbol], position);
            }
        }
        prop_assert!(settle_expired(&account, &quotes, close).settlements.is_empty());
    }
}
