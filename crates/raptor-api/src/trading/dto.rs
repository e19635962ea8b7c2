//! Wire types of the trading routes (Alpaca's shapes; decimals as strings).

use chrono::{DateTime, Utc};
use raptor_engine as engine;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::store::{OrderRecord, PositionRow};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult};

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident => $engine:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        #[schema(as = $engine)]
        pub enum $name { $(#[allow(missing_docs)] $variant),+ }

        impl From<$name> for engine::$engine {
            fn from(value: $name) -> Self {
                match value { $($name::$variant => engine::$engine::$variant),+ }
            }
        }

        impl From<engine::$engine> for $name {
            fn from(value: engine::$engine) -> Self {
                match value { $(engine::$engine::$variant => $name::$variant),+ }
            }
        }
    };
}

/// A stored column's text as the wire enum `T` (the same snake-case names): a value the
/// column's CHECK constraint admits but `T` does not know is a bug, never a client's fault.
pub(crate) fn stored<T: serde::de::DeserializeOwned>(text: &str, column: &str) -> ApiResult<T> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| ApiError::Internal(anyhow::anyhow!("unexpected stored {column}: {text:?}")))
}

wire_enum!(
    /// `buy` or `sell`.
    SideDto => Side { Buy, Sell }
);
wire_enum!(
    /// Opening or closing, long or short.
    PositionIntentDto => PositionIntent { BuyToOpen, BuyToClose, SellToOpen, SellToClose }
);
wire_enum!(
    /// `market` or `limit`.
    OrderTypeDto => OrderType { Market, Limit }
);
wire_enum!(
    /// `day` or `gtc`.
    TimeInForceDto => TimeInForce { Day, Gtc }
);
wire_enum!(
    /// `simple` or `mleg` (2-4 legs, all or none).
    OrderClassDto => OrderClass { Simple, Mleg }
);

/// Response-only enums: the values a stored column can hold (its CHECK constraint), typed in
/// the OpenAPI document so that clients can switch on them exhaustively.
macro_rules! schema_enum {
    ($(#[$doc:meta])* $name:ident as $schema:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        #[schema(as = $schema)]
        pub enum $name { $(#[allow(missing_docs)] $variant),+ }
    };
}

impl From<engine::OrderStatus> for OrderStatusDto {
    fn from(status: engine::OrderStatus) -> Self {
        match status {
            engine::OrderStatus::New => Self::New,
            engine::OrderStatus::Filled => Self::Filled,
            engine::OrderStatus::Canceled => Self::Canceled,
            engine::OrderStatus::Expired => Self::Expired,
        }
    }
}

schema_enum!(
    /// An order's status: `new` (open, resting), `filled`, `canceled`, `expired`.
    OrderStatusDto as OrderStatus { New, Filled, Canceled, Expired }
);
schema_enum!(
    /// What placed the order: `POST /orders`, a roll or a close.
    OrderPurposeDto as OrderPurpose { Order, Roll, Close }
);
schema_enum!(
    /// A position's side: `long` (qty > 0) or `short` (qty < 0).
    PositionSideDto as PositionSide { Long, Short }
);
schema_enum!(
    /// The account's mode (only `paper` accounts trade here).
    AccountModeDto as AccountMode { Paper, Live }
);

/// The account's currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = Currency)]
pub enum CurrencyDto {
    /// US dollars.
    #[serde(rename = "USD")]
    Usd,
}

/// `POST /api/trading/orders`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateOrderRequest {
    /// Simple orders: the equity or OCC option symbol.
    #[schema(example = "AAPL260918C00065000")]
    pub symbol: Option<String>,
    /// Shares or contracts (simple) or strategy units (mleg).
    #[schema(value_type = String, format = "decimal", example = "1")]
    #[serde(deserialize_with = "decimal")]
    pub qty: Decimal,
    /// Simple orders: `buy` or `sell` (may be implied by `position_intent`).
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    pub side: Option<SideDto>,
    /// `market` or `limit`.
    #[serde(rename = "type")]
    pub order_type: OrderTypeDto,
    /// Defaults to `day`.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    pub time_in_force: Option<TimeInForceDto>,
    /// Limit orders: per share (simple) or net per unit, positive = debit (mleg).
    #[schema(value_type = Option<String>, format = "decimal", example = "1.25")]
    #[serde(default, deserialize_with = "optional_decimal")]
    pub limit_price: Option<Decimal>,
    /// Simple orders: inferred from the position when absent.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    pub position_intent: Option<PositionIntentDto>,
    /// Defaults to `simple`.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    pub order_class: Option<OrderClassDto>,
    /// Multi-leg orders: 2-4 legs.
    pub legs: Option<Vec<LegRequest>>,
    /// Unique per account; derived from the account and the Idempotency-Key when absent.
    pub client_order_id: Option<String>,
}

/// One leg of a multi-leg order.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LegRequest {
    /// OCC option symbol.
    pub symbol: String,
    /// Contracts per strategy unit (default 1).
    pub ratio_qty: Option<u32>,
    /// `buy` or `sell` (may be implied by `position_intent`).
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    pub side: Option<SideDto>,
    /// Inferred from the position when absent.
    #[serde(default, deserialize_with = "not_null")]
    #[schema(nullable = false)]
    pub position_intent: Option<PositionIntentDto>,
}

/// `POST /api/trading/positions/{symbol}/roll`: buy-to-close `{symbol}` and sell-to-open
/// `to_symbol` as one all-or-none order.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollRequest {
    /// The new short call.
    #[schema(example = "XYZ270115C00067500")]
    pub to_symbol: String,
    /// Contracts to roll.
    #[schema(value_type = String, format = "decimal", example = "1")]
    #[serde(deserialize_with = "decimal")]
    pub qty: Decimal,
    /// Net limit per unit (negative = credit); market when absent.
    #[schema(value_type = Option<String>, format = "decimal", example = "-0.80")]
    #[serde(default, deserialize_with = "optional_decimal")]
    pub limit_price: Option<Decimal>,
}

/// `POST /api/trading/positions/{symbol}/close`: `{}` closes everything.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClosePositionRequest {
    /// Partial close.
    #[schema(value_type = Option<String>, format = "decimal")]
    #[serde(default, deserialize_with = "optional_decimal")]
    pub qty: Option<Decimal>,
}

/// `POST /api/trading/account/reset` takes `{}`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetAccountRequest {}

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
    #[schema(value_type = Option<String>, format = "decimal")]
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
    #[schema(value_type = Option<String>, format = "decimal")]
    pub filled_avg_price: Option<Decimal>,
    /// Limit.
    #[schema(value_type = Option<String>, format = "decimal")]
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
    pub filled_at: Option<DateTime<Utc>>,
    /// Canceled.
    pub canceled_at: Option<DateTime<Utc>>,
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
    /// Cash minus the reservations of open orders.
    #[schema(value_type = String, format = "decimal")]
    pub buying_power: Decimal,
    /// Reserved by open orders.
    #[schema(value_type = String, format = "decimal")]
    pub reserved_cash: Decimal,
    /// Cumulative realized P&L.
    #[schema(value_type = String, format = "decimal")]
    pub realized_pnl: Decimal,
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

/// `PUT /api/admin/quotes/{symbol}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetQuoteRequest {
    /// Bid.
    #[schema(value_type = String, format = "decimal", example = "1.20")]
    #[serde(deserialize_with = "decimal")]
    pub bid: Decimal,
    /// Ask.
    #[schema(value_type = String, format = "decimal", example = "1.25")]
    #[serde(deserialize_with = "decimal")]
    pub ask: Decimal,
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
    /// Resting orders this quote filled.
    pub filled_order_ids: Vec<Uuid>,
}

/// A decimal in a request, as the document types it: a JSON string matching
/// `openapi::DECIMAL_PATTERN` (at most 20 integer and 12 fraction digits). A number, `"1e3"`,
/// `"+1"`, `".5"` or `" 1"` is refused like any other wrong type (`422 invalid_body`).
fn decimal<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Decimal, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_decimal(&text).map_err(serde::de::Error::custom)
}

/// [`decimal`] for an optional field (`null` or absent is `None`).
fn optional_decimal<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Decimal>, D::Error> {
    Option::<String>::deserialize(deserializer)?
        .map(|text| parse_decimal(&text).map_err(serde::de::Error::custom))
        .transpose()
}

fn parse_decimal(text: &str) -> Result<Decimal, String> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (int, fraction) = unsigned.split_once('.').unwrap_or((unsigned, "1"));
    let digits = |part: &str, max: usize| {
        (1..=max).contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit())
    };
    if !digits(int, 20) || !digits(fraction, 12) {
        return Err(format!(
            "{text:?} is not a decimal string (digits, an optional '-' and '.')"
        ));
    }
    text.parse::<Decimal>()
        .map_err(|_| format!("{text:?} is out of range"))
}

/// An optional field that may be absent but not `null` (the document types it without `null`,
/// so a client never needs to send one, and a `null` is refused like any other wrong type).
fn not_null<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Which orders `GET /api/trading/orders` lists.
#[derive(Debug, Clone, Copy, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OrderListStatus {
    /// Resting (`new`).
    Open,
    /// `filled`, `canceled` or `expired`.
    Closed,
    /// Every order.
    #[default]
    All,
}

impl OrderListStatus {
    /// The order statuses it selects.
    pub fn statuses(self) -> &'static [&'static str] {
        match self {
            Self::Open => &["new"],
            Self::Closed => &["filled", "canceled", "expired"],
            Self::All => &["new", "filled", "canceled", "expired"],
        }
    }
}

/// The bounds of `limit`.
pub const LIST_LIMIT: std::ops::RangeInclusive<i64> = 1..=500;

/// `GET /api/trading/orders` query.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListOrdersQuery {
    /// `open`, `closed` or `all` (default).
    pub status: Option<OrderListStatus>,
    /// At most this many, newest first (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
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
pub(crate) fn order_response(order: &super::store::NewOrder<'_>) -> OrderResponse {
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
        filled_avg_price: execution.map(|e| price(super::store::filled_price(spec, e))),
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

// ---------------------------------------------------------------------------------------------
// Requests parsed at the boundary: the book receives validated domain values, once.

/// The longest symbol accepted (OCC option symbols are 21 characters).
const MAX_SYMBOL_LEN: usize = 32;
/// Prices are stored as `numeric(20,6)`: more decimals would be rounded away silently.
pub(crate) const PRICE_SCALE: u32 = 6;

/// `422 invalid_order` with `reason`.
pub(crate) fn invalid_order(reason: impl Into<String>) -> ApiError {
    ApiError::invalid(ErrorCode::InvalidOrder, reason)
}

/// A symbol parsed into the engine's instrument (`422 invalid_symbol` otherwise).
pub(crate) fn instrument(symbol: &str) -> ApiResult<engine::Instrument> {
    if symbol.len() > MAX_SYMBOL_LEN {
        return Err(ApiError::invalid(
            ErrorCode::InvalidSymbol,
            format!(
                "symbol of {} bytes is longer than {MAX_SYMBOL_LEN}",
                symbol.len()
            ),
        ));
    }
    engine::Instrument::parse(symbol)
        .map_err(|err| ApiError::invalid(ErrorCode::InvalidSymbol, err.to_string()))
}

/// A limit price the book can store: at most 6 decimals (the engine judges its range and
/// sign; a multi-leg credit is negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Price(Decimal);

impl Price {
    pub(crate) fn parse(value: Decimal) -> ApiResult<Self> {
        if value.scale() > PRICE_SCALE {
            return Err(invalid_order("limit_price has more than 6 decimal places"));
        }
        Ok(Self(value))
    }

    pub(crate) fn get(self) -> Decimal {
        self.0
    }
}

/// One leg as requested, its symbol parsed (side and intent are settled against the positions
/// by the book).
#[derive(Debug, Clone)]
pub(crate) struct LegDraft {
    pub(crate) instrument: engine::Instrument,
    pub(crate) side: Option<engine::Side>,
    pub(crate) intent: Option<engine::PositionIntent>,
    pub(crate) ratio_qty: u32,
}

/// `POST /orders`, parsed: the class's legs (one for a simple order), a storable price, a
/// well-formed `client_order_id`.
#[derive(Debug, Clone)]
pub(crate) struct OrderDraft {
    pub(crate) class: engine::OrderClass,
    pub(crate) order_type: engine::OrderType,
    pub(crate) time_in_force: engine::TimeInForce,
    pub(crate) qty: Decimal,
    pub(crate) limit_price: Option<Price>,
    pub(crate) legs: Vec<LegDraft>,
    pub(crate) client_order_id: Option<String>,
}

impl CreateOrderRequest {
    /// Parses and checks the request's shape before any lock or audit write, so a huge body is
    /// refused for the price of reading it.
    pub(crate) fn parse(self) -> ApiResult<OrderDraft> {
        let legs = self.legs.unwrap_or_default();
        if legs.len() > *engine::MLEG_LEGS.end() {
            return Err(invalid_order(format!(
                "an order has at most {} legs, got {}",
                engine::MLEG_LEGS.end(),
                legs.len()
            )));
        }
        let symbol = self.symbol.as_deref().map(instrument).transpose()?;
        let parsed_legs = legs
            .iter()
            .map(|leg| {
                Ok(LegDraft {
                    instrument: instrument(&leg.symbol)?,
                    side: leg.side.map(Into::into),
                    intent: leg.position_intent.map(Into::into),
                    ratio_qty: leg.ratio_qty.unwrap_or(1),
                })
            })
            .collect::<ApiResult<Vec<_>>>()?;
        let class = self.order_class.unwrap_or(OrderClassDto::Simple);
        let legs = match class {
            OrderClassDto::Simple => {
                if !parsed_legs.is_empty() {
                    return Err(invalid_order("legs are only allowed with order_class mleg"));
                }
                let instrument = symbol.ok_or_else(|| invalid_order("symbol is required"))?;
                vec![LegDraft {
                    instrument,
                    side: self.side.map(Into::into),
                    intent: self.position_intent.map(Into::into),
                    ratio_qty: 1,
                }]
            }
            OrderClassDto::Mleg => {
                if symbol.is_some() || self.side.is_some() {
                    return Err(invalid_order("mleg orders take symbol and side per leg"));
                }
                parsed_legs
            }
        };
        let client_order_id = match self.client_order_id {
            Some(id)
                if id.trim().is_empty() || id.len() > 128 || id.chars().any(char::is_control) =>
            {
                return Err(invalid_order(
                    "client_order_id must be 1 to 128 characters, without control characters",
                ))
            }
            other => other,
        };
        Ok(OrderDraft {
            class: class.into(),
            order_type: self.order_type.into(),
            time_in_force: self
                .time_in_force
                .map_or(engine::TimeInForce::Day, Into::into),
            qty: self.qty,
            limit_price: self.limit_price.map(Price::parse).transpose()?,
            legs,
            client_order_id,
        })
    }
}

/// `POST /positions/{symbol}/roll`, parsed.
#[derive(Debug, Clone)]
pub(crate) struct RollDraft {
    pub(crate) from: engine::Instrument,
    pub(crate) to: engine::Instrument,
    pub(crate) qty: Decimal,
    pub(crate) limit_price: Option<Price>,
}

impl RollRequest {
    pub(crate) fn parse(self, from: &str) -> ApiResult<RollDraft> {
        Ok(RollDraft {
            from: instrument(from)?,
            to: instrument(&self.to_symbol)?,
            qty: self.qty,
            limit_price: self.limit_price.map(Price::parse).transpose()?,
        })
    }
}

/// `POST /positions/{symbol}/close`, parsed.
#[derive(Debug, Clone)]
pub(crate) struct CloseDraft {
    pub(crate) instrument: engine::Instrument,
    pub(crate) qty: Option<Decimal>,
}

impl ClosePositionRequest {
    pub(crate) fn parse(self, symbol: &str) -> ApiResult<CloseDraft> {
        Ok(CloseDraft {
            instrument: instrument(symbol)?,
            qty: self.qty,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_decimals_are_plain_decimal_strings() {
        for good in ["1", "0.5", "-0.80", "190.10", "00012.5"] {
            assert!(parse_decimal(good).is_ok(), "{good} refused");
        }
        for bad in [
            "", "-", "1.", ".5", "+1", "1e3", " 1", "1 ", "1,5", "0x1", "１",
        ] {
            assert!(parse_decimal(bad).is_err(), "{bad:?} accepted");
        }
        assert!(
            parse_decimal("123456789012345678901").is_err(),
            "21 integer digits"
        );
        let quote: Result<SetQuoteRequest, _> =
            serde_json::from_str(r#"{"bid": 0, "ask": "1.25"}"#);
        assert!(quote.is_err(), "a JSON number is not a decimal string");
        let close: ClosePositionRequest = serde_json::from_str(r#"{"qty": null}"#).expect("null");
        assert!(close.qty.is_none());
        let order: Result<CreateOrderRequest, _> =
            serde_json::from_str(r#"{"qty": "1", "type": "market", "side": null}"#);
        assert!(order.is_err(), "side may be absent, not null");
    }
}
