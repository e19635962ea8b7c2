//! The wire enumerations: those the engine shares (converted both ways), and the response-only
//! ones typed from the stored columns' CHECK constraints.

use raptor_engine as engine;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident => $engine:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        #[schema(as = $engine)]
        pub enum $name { $($variant),+ }

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
        pub enum $name { $($variant),+ }
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

/// What an activity records. Clients must accept values they do not know yet: new kinds are
/// added without a new version of the API.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[schema(as = ActivityType)]
pub enum ActivityTypeDto {
    /// An order's leg filled.
    Fill,
    /// An open order was canceled (by the trader or by a reset).
    Cancel,
    /// An open order expired unfilled: a `day` order at its session's close, an order on an
    /// option at the contract's last close.
    OrderExpiry,
    /// An option position expired worthless.
    Expiry,
    /// An option position settled in cash.
    Settlement,
    /// The account was reset.
    Reset,
}
