//! Pre-trade risk checks that depend on the account: intents against positions, quantity held
//! by other orders, and short-option coverage.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use rust_decimal::Decimal;

use crate::account::AccountState;
use crate::error::OrderRejection;
use crate::order::{OrderSpec, PositionIntent, Side};
use crate::symbol::{Instrument, OptionContract, Right};

/// Checks each leg's intent against the current position, in leg order.
///
/// - `buy_to_open` on a short, `sell_to_open` on a long: invalid (no flipping through zero).
/// - `sell_to_open` on an equity: `insufficient_qty` with nothing available (cash account).
/// - `sell_to_open` on a put: `uncovered_short_option` (no short puts in v1).
/// - closing legs: the position must be on the closed side and `|qty|` minus what other open
///   orders with the same closing intent hold must cover the leg.
pub(crate) fn check_positions(
    account: &AccountState,
    spec: &OrderSpec,
) -> Result<(), OrderRejection> {
    for leg in &spec.legs {
        let symbol = leg.instrument.symbol();
        let held = account.qty(symbol);
        let requested = leg.fill_qty(spec.qty);
        match leg.position_intent {
            PositionIntent::BuyToOpen if held < Decimal::ZERO => {
                return Err(OrderRejection::invalid(format!(
                    "buy_to_open on {symbol}, which is held short; use buy_to_close"
                )));
            }
            PositionIntent::SellToOpen if held > Decimal::ZERO => {
                return Err(OrderRejection::invalid(format!(
                    "sell_to_open on {symbol}, which is held long; use sell_to_close"
                )));
            }
            PositionIntent::SellToOpen => match leg.instrument.contract() {
                None => {
                    return Err(OrderRejection::InsufficientQty {
                        symbol: symbol.to_owned(),
                        available: Decimal::ZERO,
                        requested,
                    });
                }
                Some(c) if c.right == Right::Put => {
                    return Err(OrderRejection::UncoveredShortOption {
                        symbol: symbol.to_owned(),
                    });
                }
                Some(_) => {}
            },
            PositionIntent::BuyToClose | PositionIntent::SellToClose => {
                let on_closed_side = match leg.position_intent.side() {
                    Side::Buy => -held,
                    Side::Sell => held,
                };
                let available = (on_closed_side.max(Decimal::ZERO)
                    - account.held_qty(symbol, leg.position_intent))
                .max(Decimal::ZERO);
                if available < requested {
                    return Err(OrderRejection::InsufficientQty {
                        symbol: symbol.to_owned(),
                        available,
                        requested,
                    });
                }
            }
            PositionIntent::BuyToOpen => {}
        }
    }
    Ok(())
}

/// One option symbol's holding in the coverage state.
struct Holding {
    contract: OptionContract,
    long: Decimal,
    short: Decimal,
}

/// Checks short-option coverage for the state after `spec` fills, on every underlying where
/// `spec` sells an option (buying never reduces coverage, so a risk-reducing order is not
/// blocked by an older problem).
///
/// The state counts the account's positions with all of `spec`'s legs applied together (so a
/// roll's new short is checked with the old one already closed), and, conservatively, the other
/// open orders as if they filled their selling legs only: pending `sell_to_open` legs add
/// shorts and pending `sell_to_close` legs remove longs. Pending buys are not credited.
///
/// Every short put is uncovered. Short calls on an underlying are matched contract for contract
/// against long calls expiring no earlier: shorts in descending expiry order draw greedily from
/// the longs eligible for them (eligibility is nested, so greedy is optimal).
///
/// Underlyings are checked in name order, puts (in symbol order) before calls. When the calls
/// of an underlying cannot all be covered, which short is "the uncovered one" is a matter of
/// choice, so the report names the order's own first `sell_to_open` leg on that underlying if
/// it has one, else the first short the matching could not cover.
pub(crate) fn check_coverage(
    account: &AccountState,
    spec: &OrderSpec,
) -> Result<(), OrderRejection> {
    let scope: BTreeSet<&str> = spec
        .legs
        .iter()
        .filter(|leg| leg.side == Side::Sell && leg.instrument.is_option())
        .map(|leg| leg.instrument.underlying())
        .collect();
    if scope.is_empty() {
        return Ok(());
    }
    let in_scope = |instrument: &Instrument| {
        instrument
            .contract()
            .filter(|c| scope.contains(c.root.as_str()))
            .cloned()
    };

    // Post-trade signed quantities: positions plus every leg of this order.
    let mut post: BTreeMap<String, (OptionContract, Decimal)> = BTreeMap::new();
    for (symbol, position) in &account.positions {
        // Positions the engine created always parse; anything else is not an option.
        let Ok(instrument) = Instrument::parse(symbol) else {
            continue;
        };
        if let Some(contract) = in_scope(&instrument) {
            post.insert(symbol.clone(), (contract, position.qty));
        }
    }
    for leg in &spec.legs {
        if let Some(contract) = in_scope(&leg.instrument) {
            let slot = post
                .entry(leg.instrument.symbol().to_owned())
                .or_insert((contract, Decimal::ZERO));
            slot.1 += leg.side.sign() * leg.fill_qty(spec.qty);
        }
    }
    let mut holdings: BTreeMap<String, Holding> = post
        .into_iter()
        .map(|(symbol, (contract, qty))| {
            let holding = Holding {
                contract,
                long: qty.max(Decimal::ZERO),
                short: (-qty).max(Decimal::ZERO),
            };
            (symbol, holding)
        })
        .collect();

    // Other open orders, counted only where they could reduce coverage.
    for order in &account.open_orders {
        for leg in &order.spec.legs {
            let Some(contract) = in_scope(&leg.instrument) else {
                continue;
            };
            let qty = leg.fill_qty(order.spec.qty);
            let holding = holdings
                .entry(leg.instrument.symbol().to_owned())
                .or_insert(Holding {
                    contract,
                    long: Decimal::ZERO,
                    short: Decimal::ZERO,
                });
            match leg.position_intent {
                PositionIntent::SellToOpen => holding.short += qty,
                PositionIntent::SellToClose => {
                    holding.long = (holding.long - qty).max(Decimal::ZERO);
                }
                PositionIntent::BuyToOpen | PositionIntent::BuyToClose => {}
            }
        }
    }

    for root in scope {
        let on_root = || holdings.iter().filter(|(_, h)| h.contract.root == root);
        if let Some((symbol, _)) =
            on_root().find(|(_, h)| h.contract.right == Right::Put && h.short > Decimal::ZERO)
        {
            return Err(uncovered(symbol));
        }
        let calls = || on_root().filter(|(_, h)| h.contract.right == Right::Call);
        let shorts = calls()
            .filter(|(_, h)| h.short > Decimal::ZERO)
            .map(|(symbol, h)| (h.contract.expiry, symbol.as_str(), h.short))
            .collect();
        let longs = calls()
            .filter(|(_, h)| h.long > Decimal::ZERO)
            .map(|(_, h)| (h.contract.expiry, h.long))
            .collect();
        if let Some(symbol) = uncovered_short_calls(shorts, longs).first() {
            let own_short = spec.legs.iter().find(|leg| {
                leg.position_intent == PositionIntent::SellToOpen
                    && leg.instrument.underlying() == root
            });
            return Err(uncovered(
                own_short.map_or(*symbol, |leg| leg.instrument.symbol()),
            ));
        }
    }
    Ok(())
}

fn uncovered(symbol: &str) -> OrderRejection {
    OrderRejection::UncoveredShortOption {
        symbol: symbol.to_owned(),
    }
}

/// The coverage rule for the short calls of one root: `shorts` (expiry, symbol, contracts) are
/// matched latest expiry first (equal expiries by symbol, ascending) against the `longs`
/// (expiry, contracts) expiring no earlier, contract for contract. Returns the shorts left
/// uncovered, in that order; a short partly covered is uncovered and uses up what it found.
/// The order check refuses on the first; the account read lists them all.
pub(crate) fn uncovered_short_calls(
    mut shorts: Vec<(NaiveDate, &str, Decimal)>,
    mut longs: Vec<(NaiveDate, Decimal)>,
) -> Vec<&str> {
    shorts.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    longs.sort_by_key(|&(expiry, _)| Reverse(expiry));
    let mut eligible = longs.into_iter().peekable();
    let mut pool = Decimal::ZERO;
    let mut uncovered = Vec::new();
    for (expiry, symbol, qty) in shorts {
        while let Some((_, long)) = eligible.next_if(|(e, _)| *e >= expiry) {
            pool += long;
        }
        if pool < qty {
            uncovered.push(symbol);
            pool = Decimal::ZERO;
        } else {
            pool -= qty;
        }
    }
    uncovered
}
