//! Requests parsed at the boundary: the book receives validated domain values, once (a
//! parsed symbol, a storable price, a well-formed `client_order_id`).

use raptor_engine as engine;
use rust_decimal::Decimal;

use super::dto::{ClosePositionRequest, CreateOrderRequest, OrderClassDto, RollRequest};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult};

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
        // `legs`, when sent, holds 2 to 4 legs (the document's minItems and maxItems); a simple
        // order sends none.
        let sent = self.legs.is_some();
        let legs = self.legs.unwrap_or_default();
        if (sent || matches!(self.order_class, Some(OrderClassDto::Mleg)))
            && !engine::MLEG_LEGS.contains(&legs.len())
        {
            return Err(invalid_order(format!(
                "a multi-leg order has {} to {} legs, got {}",
                engine::MLEG_LEGS.start(),
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
