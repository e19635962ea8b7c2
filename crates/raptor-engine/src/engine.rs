//! The fill engine: structural validation, quote checks, marketability, risk checks, and the
//! executions that move cash and positions.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};

use crate::account::{AccountState, Quote};
use crate::error::OrderRejection;
use crate::fees::FeeSchedule;
use crate::order::{OrderClass, OrderSpec, OrderType, PositionIntent, Side};
use crate::position::{round_money, Position, MONEY_DP};
use crate::risk;

/// Largest quantity one leg may trade (shares or contracts). Bounds every product the engine
/// forms, so decimal arithmetic cannot overflow on client input.
pub const MAX_LEG_QTY: Decimal = Decimal::from_parts(10_000_000, 0, 0, false, 0);
/// Largest absolute price (limit prices and quotes) the engine accepts.
pub const MAX_PRICE: Decimal = Decimal::from_parts(1_000_000_000, 0, 0, false, 0);
/// Most decimal places in a fractional equity quantity (Alpaca's limit).
pub const MAX_QTY_DP: u32 = 9;
/// Leg count bounds of a multi-leg order.
pub const MLEG_LEGS: std::ops::RangeInclusive<usize> = 2..=4;

/// The paper fill engine. Pure: every input, including the current instant, is passed in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Engine {
    /// Commission schedule; zero by default (Alpaca paper).
    pub fees: FeeSchedule,
}

/// What `Engine::submit` decided for an acceptable order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    /// Marketable: filled in full at the quotes.
    Filled(Execution),
    /// Not marketable: rests as `new`, holding this much cash (possibly zero).
    Rest {
        /// The order's cost at its limit price, fees included; see `Engine::reservation`.
        reserved_cash: Decimal,
    },
}

/// A complete, all-legs fill of one order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Execution {
    /// One per leg, in leg order.
    pub fills: Vec<Fill>,
    /// Net price per unit, `sum(sign x ratio x price)`; positive is a debit.
    pub net_price: Decimal,
    /// Signed change of cash, fees included.
    pub cash_delta: Decimal,
    /// Commission charged for the order.
    pub fees: Decimal,
    /// Sum of the fills' realized P&L.
    pub realized_pnl: Decimal,
    /// New state of every position the fills touched, in leg order (qty 0 = now flat).
    pub positions: Vec<Position>,
}

impl Execution {
    /// Cash this execution consumes: `max(-cash_delta, 0)`.
    pub fn cost(&self) -> Decimal {
        (-self.cash_delta).max(Decimal::ZERO)
    }
}

/// The fill of one leg.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fill {
    /// Index of the leg in the order.
    pub leg_index: usize,
    /// The leg's symbol.
    pub symbol: String,
    /// Buy or sell.
    pub side: Side,
    /// The leg's intent.
    pub position_intent: PositionIntent,
    /// Shares or contracts: order qty x ratio.
    pub qty: Decimal,
    /// Price per share or contract.
    pub price: Decimal,
    /// 1 for equities, 100 for options.
    pub multiplier: Decimal,
    /// P&L realized by this fill (zero when it only opens).
    pub realized_pnl: Decimal,
}

impl Engine {
    /// An engine with the given commission schedule.
    pub fn new(fees: FeeSchedule) -> Engine {
        Engine { fees }
    }

    /// Structural validation that needs no account and no quote:
    ///
    /// - `qty > 0`; options trade whole contracts, equities at most [`MAX_QTY_DP`] decimals;
    ///   no leg trades more than [`MAX_LEG_QTY`].
    /// - simple: one leg, ratio 1. mleg: 2-4 legs, distinct symbols, options only, all on
    ///   one root (the OCC root stands for the underlying), ratios >= 1 with no common factor,
    ///   whole strategy units.
    /// - each leg's side matches its intent (`buy_*` is a buy).
    /// - `limit_price` present if and only if the order is a limit; a simple limit is > 0;
    ///   `|limit_price| <= MAX_PRICE`.
    /// - no leg is an expired option (`contract_expired`), checked after the shape.
    pub fn validate(&self, spec: &OrderSpec, now: DateTime<Utc>) -> Result<(), OrderRejection> {
        validate_shape(spec)?;
        if let Some(leg) = spec.legs.iter().find(|l| l.instrument.is_expired(now)) {
            return Err(OrderRejection::ContractExpired {
                symbol: leg.instrument.symbol().to_owned(),
            });
        }
        Ok(())
    }

    /// Decides a new order against `account` (which must not contain it).
    ///
    /// In order: [`validate`](Self::validate); every leg needs a usable quote
    /// (`quote_unavailable` otherwise: missing, bid < 0, ask < bid, ask > `MAX_PRICE`, or a
    /// non-positive far side - ask for a buy, bid for a sell); the intent and held-quantity
    /// checks; short-option coverage after the order; then buying power. A market order, or a
    /// limit whose net at the quotes is `<= limit` (signed, see `OrderSpec::signed_limit`), fills
    /// at the quotes (buys at the ask, sells at the bid) and must cost no more than buying
    /// power. Any other limit rests and must be able to reserve its cost at the limit.
    pub fn submit(
        &self,
        account: &AccountState,
        spec: &OrderSpec,
        quotes: &BTreeMap<String, Quote>,
        now: DateTime<Utc>,
    ) -> Result<Decision, OrderRejection> {
        self.validate(spec, now)?;
        let prices = taker_prices(spec, quotes)
            .map_err(|symbol| OrderRejection::QuoteUnavailable { symbol })?;
        risk::check_positions(account, spec)?;
        risk::check_coverage(account, spec)?;
        if is_marketable(spec, &prices) {
            let execution = self.execute(account, spec, &prices);
            check_buying_power(account, needed(account, &execution))?;
            Ok(Decision::Filled(execution))
        } else {
            let reserved_cash = self.reservation(account, spec);
            check_buying_power(account, reserved_cash)?;
            Ok(Decision::Rest { reserved_cash })
        }
    }

    /// Re-evaluates one resting order after a quote change; `account` must not list `order`
    /// among its open orders (its own reservation is released by filling).
    ///
    /// `Ok(None)` when a leg's quote is missing or unusable, or the order is not marketable.
    /// When marketable, a simple limit fills at its limit price, anything else at the current
    /// quotes; the intent, held-quantity, coverage and buying-power checks are re-run, and a
    /// failure is returned as `Err` so the caller can leave the order resting and audit why.
    /// A structurally invalid or expired order is also an `Err`.
    pub fn evaluate_resting(
        &self,
        account: &AccountState,
        order: &OrderSpec,
        quotes: &BTreeMap<String, Quote>,
        now: DateTime<Utc>,
    ) -> Result<Option<Execution>, OrderRejection> {
        self.validate(order, now)?;
        let Ok(quoted) = taker_prices(order, quotes) else {
            return Ok(None);
        };
        if !is_marketable(order, &quoted) {
            return Ok(None);
        }
        risk::check_positions(account, order)?;
        risk::check_coverage(account, order)?;
        let prices = match (order.class, order.order_type, order.limit_price) {
            // A resting simple limit is the maker: it fills at its own price.
            (OrderClass::Simple, OrderType::Limit, Some(limit)) => vec![limit],
            _ => quoted,
        };
        let execution = self.execute(account, order, &prices);
        check_buying_power(account, needed(account, &execution))?;
        Ok(Some(execution))
    }

    /// Applies an execution: `cash += cash_delta` and each touched position is replaced by its
    /// new state. Flat positions are kept with qty 0 so their cumulative realized P&L survives.
    /// Open orders are the caller's to maintain (remove the order that filled).
    pub fn apply(&self, account: &mut AccountState, execution: &Execution) {
        account.cash += execution.cash_delta;
        for position in &execution.positions {
            account
                .positions
                .insert(position.symbol.clone(), position.clone());
        }
    }

    /// Cash a resting limit order sets aside when it is accepted on `account`: its cost at the
    /// limit price, `limit x qty x multiplier` rounded up to the cent, plus fees, with the limit
    /// signed (a simple sell is a credit), plus what the order would add to the account's
    /// spread requirement once filled ([`AccountState::spread_requirement`]); never below zero.
    /// A credit spread therefore reserves its maximum loss less its credit, and a plain credit
    /// (a covered call) reserves nothing unless fees exceed it. Zero for market orders, which
    /// never rest. The fill re-checks buying power against the account as it is then.
    pub fn reservation(&self, account: &AccountState, spec: &OrderSpec) -> Decimal {
        let (Some(limit), Some(leg)) = (spec.signed_limit(), spec.legs.first()) else {
            return Decimal::ZERO;
        };
        // Multi-leg orders are options only, so the first leg's multiplier is every leg's.
        let notional = (limit * spec.qty * leg.instrument.multiplier())
            .round_dp_with_strategy(MONEY_DP, RoundingStrategy::ToPositiveInfinity);
        let added = requirement_added(
            account,
            spec.legs.iter().map(|leg| {
                let symbol = leg.instrument.symbol();
                let qty = account.qty(symbol) + leg.side.sign() * leg.fill_qty(spec.qty);
                (symbol, qty)
            }),
        );
        (notional + self.fees.fee_for(spec) + added).max(Decimal::ZERO)
    }

    /// Fills every leg of `spec` at `prices` (one per leg) against `account`'s positions.
    fn execute(&self, account: &AccountState, spec: &OrderSpec, prices: &[Decimal]) -> Execution {
        let mut fills = Vec::with_capacity(spec.legs.len());
        let mut positions = Vec::with_capacity(spec.legs.len());
        let (mut net_price, mut debit, mut realized_total) =
            (Decimal::ZERO, Decimal::ZERO, Decimal::ZERO);
        for (leg_index, (leg, &price)) in spec.legs.iter().zip(prices).enumerate() {
            let symbol = leg.instrument.symbol();
            let qty = leg.fill_qty(spec.qty);
            let multiplier = leg.instrument.multiplier();
            let sign = leg.side.sign();
            let before = account
                .positions
                .get(symbol)
                .cloned()
                .unwrap_or_else(|| Position::flat(symbol));
            let (after, realized_pnl) = before.apply_fill(leg.side, qty, price, multiplier);

            net_price += sign * Decimal::from(leg.ratio_qty) * price;
            // Each fill's notional is rounded to the cent (exact for whole contracts at
            // penny prices; only fractional shares or sub-penny prices ever round).
            debit += sign * round_money(qty * price * multiplier);
            realized_total += realized_pnl;
            fills.push(Fill {
                leg_index,
                symbol: symbol.to_owned(),
                side: leg.side,
                position_intent: leg.position_intent,
                qty,
                price,
                multiplier,
                realized_pnl,
            });
            positions.push(after);
        }
        let fees = self.fees.fee_for(spec);
        Execution {
            fills,
            net_price,
            cash_delta: -debit - fees,
            fees,
            realized_pnl: realized_total,
            positions,
        }
    }
}

fn validate_shape(spec: &OrderSpec) -> Result<(), OrderRejection> {
    let invalid = |reason: &str| Err(OrderRejection::invalid(reason));
    if spec.qty <= Decimal::ZERO {
        return invalid("qty must be positive");
    }
    match spec.class {
        OrderClass::Simple => {
            if spec.legs.len() != 1 {
                return invalid("a simple order has exactly one leg");
            }
            if spec.legs.iter().any(|l| l.ratio_qty != 1) {
                return invalid("a simple order's leg has ratio_qty 1");
            }
        }
        OrderClass::Mleg => validate_mleg_legs(spec)?,
    }
    for leg in &spec.legs {
        let symbol = leg.instrument.symbol();
        if leg.ratio_qty == 0 {
            return Err(OrderRejection::invalid(format!(
                "leg {symbol}: ratio_qty must be at least 1"
            )));
        }
        if leg.side != leg.position_intent.side() {
            return Err(OrderRejection::invalid(format!(
                "leg {symbol}: side {} contradicts position_intent {}",
                leg.side, leg.position_intent
            )));
        }
        let qty = leg.fill_qty(spec.qty);
        if qty > MAX_LEG_QTY {
            return Err(OrderRejection::invalid(format!(
                "leg {symbol}: qty {qty} exceeds the maximum of {MAX_LEG_QTY}"
            )));
        }
        if leg.instrument.is_option() && !qty.is_integer() {
            return Err(OrderRejection::invalid(format!(
                "leg {symbol}: options trade in whole contracts"
            )));
        }
        if qty.normalize().scale() > MAX_QTY_DP {
            return Err(OrderRejection::invalid(format!(
                "leg {symbol}: qty has more than {MAX_QTY_DP} decimal places"
            )));
        }
    }
    match (spec.order_type, spec.limit_price) {
        (OrderType::Market, None) => {}
        (OrderType::Market, Some(_)) => return invalid("a market order takes no limit_price"),
        (OrderType::Limit, None) => return invalid("a limit order needs a limit_price"),
        (OrderType::Limit, Some(limit)) => {
            if spec.class == OrderClass::Simple && limit <= Decimal::ZERO {
                return invalid("limit_price must be positive");
            }
            if limit.abs() > MAX_PRICE {
                return invalid("limit_price is out of range");
            }
        }
    }
    Ok(())
}

fn validate_mleg_legs(spec: &OrderSpec) -> Result<(), OrderRejection> {
    let invalid = |reason: &str| Err(OrderRejection::invalid(reason));
    if !MLEG_LEGS.contains(&spec.legs.len()) {
        return invalid("a multi-leg order has 2 to 4 legs");
    }
    if !spec.qty.is_integer() {
        return invalid("a multi-leg order trades whole strategy units");
    }
    if spec.legs.iter().any(|l| !l.instrument.is_option()) {
        return invalid("multi-leg orders trade options only");
    }
    for (i, leg) in spec.legs.iter().enumerate() {
        let symbol = leg.instrument.symbol();
        if spec.legs[..i]
            .iter()
            .any(|l| l.instrument.symbol() == symbol)
        {
            return Err(OrderRejection::invalid(format!(
                "leg symbols must be distinct; {symbol} repeats"
            )));
        }
    }
    let underlying = spec.legs.first().map(|l| l.instrument.underlying());
    if spec
        .legs
        .iter()
        .any(|l| Some(l.instrument.underlying()) != underlying)
    {
        return invalid("all legs of a multi-leg order must share one underlying");
    }
    // Alpaca requires ratios in simplest form: 2:2 is 1:1 with twice the qty.
    if spec.legs.iter().map(|l| l.ratio_qty).fold(0, gcd) > 1 {
        return invalid("leg ratios must have no common factor; scale qty instead");
    }
    Ok(())
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Each leg's taker price (ask for a buy, bid for a sell), or the symbol of the first leg
/// whose quote is missing or unusable.
fn taker_prices(
    spec: &OrderSpec,
    quotes: &BTreeMap<String, Quote>,
) -> Result<Vec<Decimal>, String> {
    spec.legs
        .iter()
        .map(|leg| {
            let symbol = leg.instrument.symbol();
            let price = quotes.get(symbol).and_then(|q| {
                let sane = q.bid >= Decimal::ZERO && q.ask >= q.bid && q.ask <= MAX_PRICE;
                let price = match leg.side {
                    Side::Buy => q.ask,
                    Side::Sell => q.bid,
                };
                (sane && price > Decimal::ZERO).then_some(price)
            });
            price.ok_or_else(|| symbol.to_owned())
        })
        .collect()
}

/// Market orders always; limits when the net at `prices` is at or below the signed limit.
fn is_marketable(spec: &OrderSpec, prices: &[Decimal]) -> bool {
    match (spec.order_type, spec.signed_limit()) {
        (OrderType::Market, _) => true,
        (OrderType::Limit, Some(limit)) => {
            let net: Decimal = spec
                .legs
                .iter()
                .zip(prices)
                .map(|(leg, &price)| leg.side.sign() * Decimal::from(leg.ratio_qty) * price)
                .sum();
            net <= limit
        }
        // Unreachable after validation: a limit order without a limit price.
        (OrderType::Limit, None) => false,
    }
}

/// The buying power `execution` takes from `account`: the cash it pays (fees included; a
/// credit counts against) plus what it adds to the spread requirement. A credit spread takes
/// its maximum loss less its credit; closing one gives its reservation back.
fn needed(account: &AccountState, execution: &Execution) -> Decimal {
    let changes = execution
        .positions
        .iter()
        .map(|p| (p.symbol.as_str(), p.qty));
    requirement_added(account, changes) - execution.cash_delta
}

/// What `account`'s spread requirement grows by once the positions named in `changes` hold the
/// quantities given (signed). Zero at once when none of them is an option (every equity order):
/// only options move the requirement.
fn requirement_added<'a>(
    account: &AccountState,
    changes: impl IntoIterator<Item = (&'a str, Decimal)>,
) -> Decimal {
    let mut after: Option<BTreeMap<String, Position>> = None;
    for (symbol, qty) in changes {
        if !crate::symbol::Instrument::parse(symbol).is_ok_and(|i| i.is_option()) {
            continue;
        }
        let positions = after.get_or_insert_with(|| account.positions.clone());
        positions
            .entry(symbol.to_owned())
            .or_insert_with(|| Position::flat(symbol))
            .qty = qty;
    }
    match after {
        Some(after) => {
            crate::spread::spread_requirement(after.values()) - account.spread_requirement()
        }
        None => Decimal::ZERO,
    }
}

/// Refuses an order that needs more buying power than `account` has (`cost` at or below zero
/// always passes: an order that frees buying power is never blocked by an older shortfall).
fn check_buying_power(account: &AccountState, cost: Decimal) -> Result<(), OrderRejection> {
    let buying_power = account.buying_power();
    if cost > Decimal::ZERO && cost > buying_power {
        return Err(OrderRejection::InsufficientBuyingPower {
            buying_power,
            cost_basis: cost,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
