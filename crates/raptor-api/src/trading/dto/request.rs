//! What clients send: the request bodies and the list query, with the strict decimal and
//! not-null deserialisers the document promises.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::enums::{OrderClassDto, OrderTypeDto, PositionIntentDto, SideDto, TimeInForceDto};

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
    /// Multi-leg orders: 2-4 legs (fewer or more is `422 invalid_order`; a simple order sends
    /// none).
    #[schema(min_items = 2, max_items = 4)]
    pub legs: Option<Vec<LegRequest>>,
    /// Unique per account; derived from the account and the Idempotency-Key when absent.
    #[schema(min_length = 1, max_length = 128)]
    pub client_order_id: Option<String>,
}

/// One leg of a multi-leg order.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LegRequest {
    /// OCC option symbol.
    pub symbol: String,
    /// Contracts per strategy unit (default 1).
    #[schema(minimum = 1)]
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

/// `PUT /api/admin/quotes/{symbol}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetQuoteRequest {
    /// Bid (no minus sign, not even on zero).
    #[schema(value_type = String, format = "decimal", example = "1.20")]
    #[serde(deserialize_with = "unsigned_decimal")]
    pub bid: Decimal,
    /// Ask (no minus sign, not even on zero).
    #[schema(value_type = String, format = "decimal", example = "1.25")]
    #[serde(deserialize_with = "unsigned_decimal")]
    pub ask: Decimal,
}

/// A decimal in a request, as the document types it: a JSON string matching
/// `openapi::DECIMAL_PATTERN` (at most 20 integer and 12 fraction digits). A number, `"1e3"`,
/// `"+1"`, `".5"` or `" 1"` is refused like any other wrong type (`422 invalid_body`).
fn decimal<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Decimal, D::Error> {
    let text = String::deserialize(deserializer)?;
    parse_decimal(&text).map_err(serde::de::Error::custom)
}

/// [`decimal`] without a minus sign (`openapi::UNSIGNED_DECIMAL_PATTERN`): `"-0.00"` too is
/// refused, though its value is zero.
fn unsigned_decimal<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Decimal, D::Error> {
    let text = String::deserialize(deserializer)?;
    if text.starts_with('-') {
        return Err(serde::de::Error::custom(format!(
            "{text:?} is negative (no minus sign here)"
        )));
    }
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

/// `GET /api/trading/orders` query.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListOrdersQuery {
    /// `open`, `closed` or `all` (default).
    pub status: Option<OrderListStatus>,
    /// At most this many, newest first (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The previous page's `next_cursor`, as it is.
    #[param(min_length = 1, max_length = 200)]
    pub cursor: Option<String>,
    /// Only orders with a leg on this symbol.
    #[param(min_length = 1, max_length = 64)]
    pub symbol: Option<String>,
    /// Only orders created strictly after this time (RFC 3339).
    pub after: Option<DateTime<Utc>>,
    /// Only orders created strictly before this time (RFC 3339).
    pub until: Option<DateTime<Utc>>,
}

/// `GET /api/trading/activities` query.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListActivitiesQuery {
    /// At most this many, newest first (default 50).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
    /// The previous page's `next_cursor`, as it is.
    #[param(min_length = 1, max_length = 200)]
    pub cursor: Option<String>,
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
        for signed in ["-0.00", "-1.20"] {
            let body = format!(r#"{{"bid": "{signed}", "ask": "1.25"}}"#);
            let quote: Result<SetQuoteRequest, _> = serde_json::from_str(&body);
            assert!(quote.is_err(), "{signed} is a quote's price");
        }
        let close: ClosePositionRequest = serde_json::from_str(r#"{"qty": null}"#).expect("null");
        assert!(close.qty.is_none());
        let order: Result<CreateOrderRequest, _> =
            serde_json::from_str(r#"{"qty": "1", "type": "market", "side": null}"#);
        assert!(order.is_err(), "side may be absent, not null");
    }
}
