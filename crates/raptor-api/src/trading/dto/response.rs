//! What clients get back: orders, the account, positions and quotes, built from what was
//! written or read back (money with two decimals, quantities and prices without trailing
//! zeros).

use chrono::{DateTime, Utc};
use raptor_engine as engine;
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::enums::*;
use crate::error::{ApiError, ApiResult};
use crate::trading::store::{ActivityRow, NewOrder, OrderRecord, PositionRow, QuoteRow};

/// One leg of an order.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LegResponse {
    /// Symbol.
    pub symbol: String,
    /// `buy` or `sell`.
    pub side: SideDto,
    /// Intent.
    pub position_intent: PositionIntentDto,
    /// Ratio.
    pub ratio_qty: i32,
    /// Contracts.
    #[schema(value_type = String, format = "decimal")]
    pub qty: Decimal,
    /// Filled contracts.
    #[schema(value_type = String, format = "decimal")]
    pub filled_qty: Decimal,
    /// Fill price.
    #[schema(required = true, value_type = Option<String>, format = "decimal")]
    pub filled_avg_price: Option<Decimal>,
    /// The parent's status.
    pub status: OrderStatusDto,
}

/// An order.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OrderResponse {
    /// Order id.
    pub id: Uuid,
    /// Client order id.
    pub client_order_id: String,
    /// `order`, `roll` or `close`.
    pub purpose: OrderPurposeDto,
    /// `simple` or `mleg`.
    pub order_class: OrderClassDto,
    /// `market` or `limit`.
    #[serde(rename = "type")]
    pub order_type: OrderTypeDto,
    /// `day` or `gtc`.
    pub time_in_force: TimeInForceDto,
    /// Simple orders: symbol.
    #[schema(required = true)]
    pub symbol: Option<String>,
    /// Simple orders: side.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = SideDto, required = false)]
    pub side: Option<SideDto>,
    /// Simple orders: intent.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = PositionIntentDto, required = false)]
    pub position_intent: Option<PositionIntentDto>,
    /// Quantity.
    #[schema(value_type = String, format = "decimal")]
    pub qty: Decimal,
    /// Filled quantity.
    #[schema(value_type = String, format = "decimal")]
    pub filled_qty: Decimal,
    /// Average fill price (net per unit for mleg).
    #[schema(required = true, value_type = Option<String>, format = "decimal")]
    pub filled_avg_price: Option<Decimal>,
    /// Limit.
    #[schema(required = true, value_type = Option<String>, format = "decimal")]
    pub limit_price: Option<Decimal>,
    /// `new`, `filled`, `canceled` or `expired`.
    pub status: OrderStatusDto,
    /// Fees charged.
    #[schema(value_type = String, format = "decimal")]
    pub fees: Decimal,
    /// Legs (every order has at least one).
    pub legs: Vec<LegResponse>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Updated.
    pub updated_at: DateTime<Utc>,
    /// Filled.
    #[schema(required = true)]
    pub filled_at: Option<DateTime<Utc>>,
    /// Canceled.
    #[schema(required = true)]
    pub canceled_at: Option<DateTime<Utc>>,
}

/// A page of the account's orders, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OrderListResponse {
    /// The orders of this page.
    pub data: Vec<OrderResponse>,
    /// Whether older orders follow.
    pub has_more: bool,
    /// The `cursor` of the next page (`null` on the last one).
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

/// The paper account.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AccountResponse {
    /// `paper` or `live`.
    pub mode: AccountModeDto,
    /// Always `USD`.
    pub currency: CurrencyDto,
    /// Settled cash.
    #[schema(value_type = String, format = "decimal", example = "100000.00")]
    pub cash: Decimal,
    /// Cash minus the reservations of open orders and of the option spreads held
    /// (`reserved_cash + spread_requirement`): a cash account has no leverage, so it never
    /// exceeds `cash` (a credit received raises cash and buying power only beyond what its
    /// spread can lose).
    #[schema(value_type = String, format = "decimal")]
    pub buying_power: Decimal,
    /// Reserved by open orders.
    #[schema(value_type = String, format = "decimal")]
    pub reserved_cash: Decimal,
    /// Reserved against the maximum loss of the short calls held: each is paired with a long
    /// call on the same underlying expiring no earlier, and a pair whose long strike is above
    /// the short's can lose the strike difference x 100 per contract (a vertical credit
    /// spread's width).
    #[schema(value_type = String, format = "decimal", example = "0.00")]
    pub spread_requirement: Decimal,
    /// Cumulative realized P&L.
    #[schema(value_type = String, format = "decimal")]
    pub realized_pnl: Decimal,
    /// The positions' value at the quotes' mid (shorts count negative; a position without a
    /// quote at its average entry price: see `marked_at_cost`).
    #[schema(value_type = String, format = "decimal", example = "1240.00")]
    pub market_value: Decimal,
    /// `cash + market_value`.
    #[schema(value_type = String, format = "decimal", example = "101240.00")]
    pub equity: Decimal,
    /// The positions' P&L at the same marks, not yet realized.
    #[schema(value_type = String, format = "decimal", example = "0.00")]
    pub unrealized_pnl: Decimal,
    /// The symbols of the positions without a quote, marked at their average entry price (no
    /// unrealized P&L counted for them); empty when every position has a quote.
    pub marked_at_cost: Vec<String>,
    /// Short options held without a long call on the same underlying expiring no earlier to
    /// cover them, by symbol (every short put; a short call whose covering long expired first).
    /// Empty when every short is covered.
    #[schema(example = json!([]))]
    pub uncovered_short_options: Vec<String>,
}

/// A position.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PositionResponse {
    /// Symbol.
    pub symbol: String,
    /// Signed quantity (negative when short).
    #[schema(value_type = String, format = "decimal")]
    pub qty: Decimal,
    /// Weighted average entry price.
    #[schema(value_type = String, format = "decimal")]
    pub avg_entry_price: Decimal,
    /// Cumulative realized P&L on this symbol.
    #[schema(value_type = String, format = "decimal")]
    pub realized_pnl: Decimal,
    /// `long` or `short` (flat positions are not listed).
    pub side: PositionSideDto,
}

/// A quote and what it filled.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QuoteResponse {
    /// Symbol.
    pub symbol: String,
    /// Bid.
    #[schema(value_type = String, format = "decimal")]
    pub bid: Decimal,
    /// Ask.
    #[schema(value_type = String, format = "decimal")]
    pub ask: Decimal,
    /// The quote event's sequence number (the fills it causes name it in their audit rows).
    pub sequence: i64,
    /// Resting orders this request's sweep filled. Accounts it did not reach in time are swept
    /// right after, by the server's sweepers (`pending_accounts`).
    pub filled_order_ids: Vec<Uuid>,
    /// Accounts with resting orders on the symbol still to be swept for this event (0 when the
    /// request swept them all).
    pub pending_accounts: i64,
}

/// One entry of the activity feed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ActivityResponse {
    /// Unique in the feed.
    pub id: String,
    /// What happened.
    #[serde(rename = "type")]
    pub activity_type: ActivityTypeDto,
    /// The order it belongs to (`null` for a reset).
    #[schema(required = true)]
    pub order_id: Option<Uuid>,
    /// The symbol (`null` for a reset and a multi-leg order's cancel).
    #[schema(required = true)]
    pub symbol: Option<String>,
    /// `buy` or `sell` (`null` when not a trade).
    #[schema(required = true)]
    pub side: Option<SideDto>,
    /// Quantity filled, or left open when canceled.
    #[schema(value_type = Option<String>, format = "decimal", required = true)]
    pub qty: Option<Decimal>,
    /// Fill price, or the canceled order's limit.
    #[schema(value_type = Option<String>, format = "decimal", required = true)]
    pub price: Option<Decimal>,
    /// What it did to cash, fees included (negative: paid).
    #[schema(value_type = String, format = "decimal")]
    pub cash_delta: Decimal,
    /// When.
    pub occurred_at: DateTime<Utc>,
}

/// A page of the activity feed, newest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ActivityListResponse {
    /// The activities of this page.
    pub data: Vec<ActivityResponse>,
    /// Whether older activities follow.
    pub has_more: bool,
    /// The `cursor` of the next page (`null` on the last one).
    #[schema(required = true)]
    pub next_cursor: Option<String>,
}

impl TryFrom<ActivityRow> for ActivityResponse {
    type Error = ApiError;

    fn try_from(row: ActivityRow) -> ApiResult<Self> {
        Ok(ActivityResponse {
            activity_type: stored(&row.kind, "activity type")?,
            side: row.side.as_deref().map(|s| stored(s, "side")).transpose()?,
            id: row.id,
            order_id: row.order_id,
            symbol: row.symbol,
            qty: row.qty.map(qty),
            price: row.price.map(price),
            cash_delta: money(row.cash_delta),
            occurred_at: row.occurred_at,
        })
    }
}

/// A symbol's current quote (`GET /api/trading/quotes/{symbol}`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MarketQuoteResponse {
    /// Symbol.
    pub symbol: String,
    /// Bid.
    #[schema(value_type = String, format = "decimal", example = "189.90")]
    pub bid: Decimal,
    /// Ask.
    #[schema(value_type = String, format = "decimal", example = "190.10")]
    pub ask: Decimal,
    /// When an operator last set it.
    pub updated_at: DateTime<Utc>,
    /// The quote event's sequence number (grows with every update of the symbol).
    pub sequence: i64,
}

impl From<QuoteRow> for MarketQuoteResponse {
    fn from(row: QuoteRow) -> Self {
        MarketQuoteResponse {
            symbol: row.symbol,
            bid: price(row.bid),
            ask: price(row.ask),
            updated_at: row.updated_at,
            sequence: row.sequence,
        }
    }
}

/// Money: two decimal places.
pub(crate) fn money(value: Decimal) -> Decimal {
    let mut value = engine::round_money(value);
    value.rescale(2);
    value
}

/// Quantities and prices: no trailing zeros beyond what the value needs (prices keep two).
pub(crate) fn qty(value: Decimal) -> Decimal {
    value.normalize()
}

pub(crate) fn price(value: Decimal) -> Decimal {
    let mut value = value.normalize();
    if value.scale() < 2 {
        value.rescale(2);
    }
    value
}

/// The answer to a placed order, built from what was written (the same values a read of the
/// rows returns: prices at most 6 decimals, times in microseconds, as stored).
pub(crate) fn order_response(order: &NewOrder<'_>) -> OrderResponse {
    let spec = order.spec;
    let simple = (spec.class == engine::OrderClass::Simple)
        .then(|| spec.legs.first())
        .flatten();
    let execution = order.execution;
    let fill_of =
        |index: usize| execution.and_then(|e| e.fills.iter().find(|f| f.leg_index == index));
    let status = OrderStatusDto::from(order.status);
    OrderResponse {
        id: order.id,
        client_order_id: order.client_order_id.clone(),
        purpose: match order.purpose {
            "roll" => OrderPurposeDto::Roll,
            "close" => OrderPurposeDto::Close,
            _ => OrderPurposeDto::Order,
        },
        order_class: spec.class.into(),
        order_type: spec.order_type.into(),
        time_in_force: spec.time_in_force.into(),
        symbol: simple.map(|l| l.instrument.symbol().to_owned()),
        side: simple.map(|l| l.side.into()),
        position_intent: simple.map(|l| l.position_intent.into()),
        qty: qty(spec.qty),
        filled_qty: qty(if execution.is_some() {
            spec.qty
        } else {
            Decimal::ZERO
        }),
        filled_avg_price: execution.map(|e| price(crate::trading::store::filled_price(spec, e))),
        limit_price: spec.limit_price.map(price),
        fees: money(execution.map_or(Decimal::ZERO, |e| e.fees)),
        legs: spec
            .legs
            .iter()
            .enumerate()
            .map(|(index, leg)| LegResponse {
                symbol: leg.instrument.symbol().to_owned(),
                side: leg.side.into(),
                position_intent: leg.position_intent.into(),
                ratio_qty: i32::try_from(leg.ratio_qty).unwrap_or(i32::MAX),
                qty: qty(leg.fill_qty(spec.qty)),
                filled_qty: qty(fill_of(index).map_or(Decimal::ZERO, |f| f.qty)),
                filled_avg_price: fill_of(index).map(|f| price(f.price)),
                status,
            })
            .collect(),
        status,
        created_at: order.at,
        updated_at: order.at,
        filled_at: execution.map(|_| order.at),
        canceled_at: None,
    }
}

/// A stored order, rendered: its columns' texts parsed into the wire enums.
impl TryFrom<OrderRecord> for OrderResponse {
    type Error = ApiError;

    fn try_from(OrderRecord { row, legs }: OrderRecord) -> ApiResult<Self> {
        let status: OrderStatusDto = stored(&row.status, "status")?;
        Ok(OrderResponse {
            id: row.id,
            client_order_id: row.client_order_id,
            purpose: stored(&row.purpose, "purpose")?,
            order_class: stored(&row.order_class, "order_class")?,
            order_type: stored(&row.order_type, "order_type")?,
            time_in_force: stored(&row.time_in_force, "time_in_force")?,
            symbol: row.symbol,
            side: row.side.as_deref().map(|s| stored(s, "side")).transpose()?,
            position_intent: row
                .position_intent
                .as_deref()
                .map(|s| stored(s, "position_intent"))
                .transpose()?,
            qty: qty(row.qty),
            filled_qty: qty(row.filled_qty),
            filled_avg_price: row.filled_avg_price.map(price),
            limit_price: row.limit_price.map(price),
            fees: money(row.fees),
            legs: legs
                .iter()
                .map(|leg| {
                    Ok(LegResponse {
                        symbol: leg.symbol.clone(),
                        side: stored(&leg.side, "side")?,
                        position_intent: stored(&leg.position_intent, "position_intent")?,
                        ratio_qty: leg.ratio_qty,
                        qty: qty(leg.qty),
                        filled_qty: qty(leg.filled_qty),
                        filled_avg_price: leg.filled_avg_price.map(price),
                        status,
                    })
                })
                .collect::<ApiResult<_>>()?,
            status,
            created_at: row.created_at,
            updated_at: row.updated_at,
            filled_at: row.filled_at,
            canceled_at: row.canceled_at,
        })
    }
}

/// A stored position, rendered (`side` from the sign of `qty`).
impl From<PositionRow> for PositionResponse {
    fn from(r: PositionRow) -> Self {
        PositionResponse {
            side: if r.qty.is_sign_negative() {
                PositionSideDto::Short
            } else {
                PositionSideDto::Long
            },
            symbol: r.symbol,
            qty: qty(r.qty),
            avg_entry_price: price(r.avg_entry_price),
            realized_pnl: money(r.realized_pnl),
        }
    }
}
