//! Order shapes (Alpaca's model: simple or multi-leg) and the order status transition table.

use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use chrono::{DateTime, Utc};

use crate::calendar;
use crate::error::UnknownVariant;
use crate::symbol::Instrument;

/// Gives a fieldless enum `as_str`, `Display` and `FromStr` over the same wire strings that its
/// serde attributes produce (the unit tests check that the two agree).
macro_rules! wire_strings {
    ($ty:ident, $kind:literal, { $($variant:ident => $s:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The wire string.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $s),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownVariant;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($s => Ok($ty::$variant),)+
                    _ => Err(UnknownVariant { kind: $kind, value: s.to_owned() }),
                }
            }
        }
    };
}

/// Buy or sell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Pays cash, increases the position.
    Buy,
    /// Receives cash, decreases the position.
    Sell,
}
wire_strings!(Side, "side", { Buy => "buy", Sell => "sell" });

impl Side {
    /// `+1` for a buy, `-1` for a sell: the sign of the position change and of the debit.
    pub fn sign(self) -> Decimal {
        match self {
            Self::Buy => Decimal::ONE,
            Self::Sell => Decimal::NEGATIVE_ONE,
        }
    }
}

/// Whether a leg opens or closes, and on which side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PositionIntent {
    /// Open or increase a long position.
    BuyToOpen,
    /// Reduce a short position.
    BuyToClose,
    /// Open or increase a short position (options only; calls must be covered).
    SellToOpen,
    /// Reduce a long position.
    SellToClose,
}
wire_strings!(PositionIntent, "position intent", {
    BuyToOpen => "buy_to_open",
    BuyToClose => "buy_to_close",
    SellToOpen => "sell_to_open",
    SellToClose => "sell_to_close",
});

impl PositionIntent {
    /// The side this intent implies (`buy_*` is a buy).
    pub fn side(self) -> Side {
        match self {
            Self::BuyToOpen | Self::BuyToClose => Side::Buy,
            Self::SellToOpen | Self::SellToClose => Side::Sell,
        }
    }

    /// True for `buy_to_close` and `sell_to_close`.
    pub fn is_closing(self) -> bool {
        matches!(self, Self::BuyToClose | Self::SellToClose)
    }

    /// The intent a request that only gave a `side` most plausibly means, given the signed
    /// quantity currently held: a buy against a short closes it, a sell against a long closes
    /// it, anything else opens.
    pub fn infer(side: Side, current_qty: Decimal) -> PositionIntent {
        match side {
            Side::Buy if current_qty < Decimal::ZERO => Self::BuyToClose,
            Side::Buy => Self::BuyToOpen,
            Side::Sell if current_qty > Decimal::ZERO => Self::SellToClose,
            Side::Sell => Self::SellToOpen,
        }
    }
}

/// Market or limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderType {
    /// Fills at the quote.
    Market,
    /// Fills only at `limit_price` or better.
    Limit,
}
wire_strings!(OrderType, "order type", { Market => "market", Limit => "limit" });

/// How long an unfilled order rests. Expiry of `day` orders is the caller's job (an `Expire`
/// event); the engine does not read a clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeInForce {
    /// Until the end of the session.
    Day,
    /// Until canceled.
    Gtc,
}
wire_strings!(TimeInForce, "time in force", { Day => "day", Gtc => "gtc" });

/// Single-leg or multi-leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderClass {
    /// One leg, ratio 1.
    Simple,
    /// 2-4 option legs on one underlying, filled all or none.
    Mleg,
}
wire_strings!(OrderClass, "order class", { Simple => "simple", Mleg => "mleg" });

/// The v1 order lifecycle. Fills are always full, so there is no `partially_filled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderStatus {
    /// Accepted and resting.
    New,
    /// Fully filled (terminal).
    Filled,
    /// Canceled by the user (terminal).
    Canceled,
    /// Expired by time in force (terminal).
    Expired,
}
wire_strings!(OrderStatus, "order status", {
    New => "new",
    Filled => "filled",
    Canceled => "canceled",
    Expired => "expired",
});

/// Something that happens to an order after it was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrderEvent {
    /// It filled in full.
    Fill,
    /// The user asked to cancel it.
    Cancel,
    /// Its time in force ran out.
    Expire,
}
wire_strings!(OrderEvent, "order event", { Fill => "fill", Cancel => "cancel", Expire => "expire" });

/// The outcome of an allowed event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Move to this status.
    To(OrderStatus),
    /// Nothing changes; return the order as it is (a repeated cancel).
    NoOp,
}

impl OrderStatus {
    /// The transition table. Anything not listed is an error:
    ///
    /// | from \ event | fill   | cancel          | expire  |
    /// |--------------|--------|-----------------|---------|
    /// | new          | filled | canceled        | expired |
    /// | canceled     | -      | no-op           | -       |
    /// | filled       | -      | not cancelable  | -       |
    /// | expired      | -      | not cancelable  | -       |
    pub fn apply(self, event: OrderEvent) -> Result<Transition, InvalidTransition> {
        use OrderEvent as E;
        use OrderStatus as S;
        match (self, event) {
            (S::New, E::Fill) => Ok(Transition::To(S::Filled)),
            (S::New, E::Cancel) => Ok(Transition::To(S::Canceled)),
            (S::New, E::Expire) => Ok(Transition::To(S::Expired)),
            (S::Canceled, E::Cancel) => Ok(Transition::NoOp),
            (S::Filled | S::Expired, E::Cancel) => {
                Err(InvalidTransition::NotCancelable { status: self })
            }
            (S::Filled | S::Canceled | S::Expired, E::Fill | E::Expire) => {
                Err(InvalidTransition::Illegal { from: self, event })
            }
        }
    }

    /// True while the order rests (only `new`).
    pub fn is_open(self) -> bool {
        self == Self::New
    }
}

/// One leg of an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegSpec {
    /// What the leg trades.
    pub instrument: Instrument,
    /// Must agree with `position_intent`.
    pub side: Side,
    /// Units of this leg per unit of the order (1 for simple orders).
    pub ratio_qty: u32,
    /// Open or close, long or short.
    pub position_intent: PositionIntent,
}

impl LegSpec {
    /// Shares or contracts this leg trades for `order_qty` units of the order. Saturates
    /// instead of overflowing, so absurd input fails validation rather than panicking.
    pub fn fill_qty(&self, order_qty: Decimal) -> Decimal {
        order_qty.saturating_mul(Decimal::from(self.ratio_qty))
    }
}

/// An order as the engine sees it: no ids, no timestamps, no owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderSpec {
    /// Simple or multi-leg.
    pub class: OrderClass,
    /// Market or limit.
    pub order_type: OrderType,
    /// Day or good-till-canceled.
    pub time_in_force: TimeInForce,
    /// Shares or contracts for a simple order; strategy units for a multi-leg order.
    pub qty: Decimal,
    /// Simple: price per share or contract, positive. Multi-leg: net per unit, positive is a
    /// debit, negative a credit. Present if and only if the order is a limit order.
    pub limit_price: Option<Decimal>,
    /// Simple: exactly one leg with ratio 1. Multi-leg: 2-4 legs.
    pub legs: Vec<LegSpec>,
}

impl OrderSpec {
    /// When this order, placed at `placed_at`, stops being good: the session close for a
    /// `day` order, and for any order the last close on or before its earliest option expiry
    /// (it can never fill after that). `None`: good until canceled.
    pub fn expires_at(&self, placed_at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let day = (self.time_in_force == TimeInForce::Day).then(|| calendar::next_close(placed_at));
        let contract = self
            .legs
            .iter()
            .filter_map(|leg| leg.instrument.expiry())
            .min()
            .and_then(calendar::last_trading_close);
        match (day, contract) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A simple (one-leg) order; the side follows from the intent.
    pub fn simple(
        instrument: Instrument,
        position_intent: PositionIntent,
        qty: Decimal,
        order_type: OrderType,
        limit_price: Option<Decimal>,
        time_in_force: TimeInForce,
    ) -> OrderSpec {
        OrderSpec {
            class: OrderClass::Simple,
            order_type,
            time_in_force,
            qty,
            limit_price,
            legs: vec![LegSpec {
                instrument,
                side: position_intent.side(),
                ratio_qty: 1,
                position_intent,
            }],
        }
    }

    /// The limit as a signed net price per unit (positive = debit), comparable with the net
    /// price of the legs: a simple sell at limit `L` is a net of `-L`.
    pub fn signed_limit(&self) -> Option<Decimal> {
        let limit = self.limit_price?;
        match (self.class, self.legs.first()) {
            (OrderClass::Simple, Some(leg)) => Some(leg.side.sign() * limit),
            _ => Some(limit),
        }
    }
}

/// An order-state change the transition table does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTransition {
    /// A cancel on an order that is filled or expired.
    #[error("order is {status} and cannot be canceled")]
    NotCancelable {
        /// The order's current status.
        status: OrderStatus,
    },
    /// Any other event the order's status does not accept.
    #[error("an order that is {from} does not accept {event}")]
    Illegal {
        /// The order's current status.
        from: OrderStatus,
        /// The refused event.
        event: OrderEvent,
    },
}

impl InvalidTransition {
    /// The stable machine code: `order_not_cancelable` or `invalid_transition`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotCancelable { .. } => "order_not_cancelable",
            Self::Illegal { .. } => "invalid_transition",
        }
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "a test reports a failure by panicking")]
mod tests {
    use super::*;

    fn utc(y: i32, m: u32, d: u32, h: u32, min: u32) -> DateTime<Utc> {
        use chrono::TimeZone;
        Utc.with_ymd_and_hms(y, m, d, h, min, 0).single().unwrap()
    }

    fn spec(symbol: &str, tif: TimeInForce) -> OrderSpec {
        OrderSpec::simple(
            Instrument::parse(symbol).unwrap(),
            PositionIntent::BuyToOpen,
            Decimal::ONE,
            OrderType::Limit,
            Some(Decimal::ONE),
            tif,
        )
    }

    #[test]
    fn orders_stop_being_good_at_the_close_or_the_contract_expiry() {
        let placed = utc(2026, 12, 1, 15, 0);
        assert_eq!(spec("AAPL", TimeInForce::Gtc).expires_at(placed), None);
        assert_eq!(
            spec("AAPL", TimeInForce::Day).expires_at(placed),
            Some(utc(2026, 12, 1, 21, 0))
        );
        assert_eq!(
            spec("XYZ261218C00065000", TimeInForce::Gtc).expires_at(placed),
            Some(utc(2026, 12, 18, 21, 0))
        );
        assert_eq!(
            spec("XYZ261218C00065000", TimeInForce::Day).expires_at(placed),
            Some(utc(2026, 12, 1, 21, 0))
        );
        // Expiry on a holiday: the last session before it.
        assert_eq!(
            spec("XYZ261225C00065000", TimeInForce::Gtc).expires_at(placed),
            Some(utc(2026, 12, 24, 18, 0))
        );
    }

    #[test]
    fn transition_table_is_exhaustive() {
        use OrderEvent as E;
        use OrderStatus as S;
        let expected = |from: S, event: E| -> Result<Transition, InvalidTransition> {
            match (from, event) {
                (S::New, E::Fill) => Ok(Transition::To(S::Filled)),
                (S::New, E::Cancel) => Ok(Transition::To(S::Canceled)),
                (S::New, E::Expire) => Ok(Transition::To(S::Expired)),
                (S::Canceled, E::Cancel) => Ok(Transition::NoOp),
                (S::Filled, E::Cancel) => Err(InvalidTransition::NotCancelable { status: from }),
                (S::Expired, E::Cancel) => Err(InvalidTransition::NotCancelable { status: from }),
                _ => Err(InvalidTransition::Illegal { from, event }),
            }
        };
        let mut cells = 0;
        for &from in OrderStatus::ALL {
            for &event in OrderEvent::ALL {
                assert_eq!(from.apply(event), expected(from, event), "{from} + {event}");
                cells += 1;
            }
        }
        assert_eq!(cells, 12);
    }

    #[test]
    fn transition_codes() {
        assert_eq!(
            OrderStatus::Filled
                .apply(OrderEvent::Cancel)
                .unwrap_err()
                .code(),
            "order_not_cancelable"
        );
        assert_eq!(
            OrderStatus::Canceled
                .apply(OrderEvent::Fill)
                .unwrap_err()
                .code(),
            "invalid_transition"
        );
    }

    #[test]
    fn only_new_is_open() {
        let open: Vec<_> = OrderStatus::ALL.iter().filter(|s| s.is_open()).collect();
        assert_eq!(open, [&OrderStatus::New]);
    }

    #[test]
    fn status_strings_round_trip() {
        for (status, s) in [
            (OrderStatus::New, "new"),
            (OrderStatus::Filled, "filled"),
            (OrderStatus::Canceled, "canceled"),
            (OrderStatus::Expired, "expired"),
        ] {
            assert_eq!(status.as_str(), s);
            assert_eq!(s.parse::<OrderStatus>().unwrap(), status);
        }
        let err = "cancelled".parse::<OrderStatus>().unwrap_err();
        assert_eq!(err.value, "cancelled");
        assert!("NEW".parse::<OrderStatus>().is_err());
    }

    #[test]
    fn wire_strings_round_trip() {
        use serde::de::value::{Error, StrDeserializer};
        use serde::de::IntoDeserializer;

        // Display/FromStr and the serde attributes must produce the same strings.
        fn check<T>(all: &[T])
        where
            T: Copy + fmt::Display + FromStr + PartialEq + fmt::Debug + for<'de> Deserialize<'de>,
            <T as FromStr>::Err: fmt::Debug,
        {
            for &v in all {
                let s = v.to_string();
                assert_eq!(s.parse::<T>().unwrap(), v);
                let de: StrDeserializer<'_, Error> = s.as_str().into_deserializer();
                assert_eq!(T::deserialize(de).unwrap(), v, "serde disagrees on {s}");
            }
        }
        check(Side::ALL);
        check(PositionIntent::ALL);
        check(OrderType::ALL);
        check(TimeInForce::ALL);
        check(OrderClass::ALL);
        check(OrderEvent::ALL);
        check(OrderStatus::ALL);
        assert_eq!(PositionIntent::SellToClose.as_str(), "sell_to_close");
        assert_eq!(TimeInForce::Gtc.as_str(), "gtc");
    }

    #[test]
    fn intents_imply_sides() {
        assert_eq!(PositionIntent::BuyToOpen.side(), Side::Buy);
        assert_eq!(PositionIntent::BuyToClose.side(), Side::Buy);
        assert_eq!(PositionIntent::SellToOpen.side(), Side::Sell);
        assert_eq!(PositionIntent::SellToClose.side(), Side::Sell);
        assert!(PositionIntent::BuyToClose.is_closing());
        assert!(!PositionIntent::SellToOpen.is_closing());
    }

    #[test]
    fn intent_inference_follows_the_position() {
        let (long, short, flat) = (Decimal::ONE, Decimal::NEGATIVE_ONE, Decimal::ZERO);
        assert_eq!(
            PositionIntent::infer(Side::Buy, flat),
            PositionIntent::BuyToOpen
        );
        assert_eq!(
            PositionIntent::infer(Side::Buy, long),
            PositionIntent::BuyToOpen
        );
        assert_eq!(
            PositionIntent::infer(Side::Buy, short),
            PositionIntent::BuyToClose
        );
        assert_eq!(
            PositionIntent::infer(Side::Sell, flat),
            PositionIntent::SellToOpen
        );
        assert_eq!(
            PositionIntent::infer(Side::Sell, long),
            PositionIntent::SellToClose
        );
        assert_eq!(
            PositionIntent::infer(Side::Sell, short),
            PositionIntent::SellToOpen
        );
    }

    #[test]
    fn signed_limit_follows_the_side() {
        let i = Instrument::parse("AAPL").unwrap();
        let limit = Some(Decimal::new(19_012, 2));
        let buy = OrderSpec::simple(
            i.clone(),
            PositionIntent::BuyToOpen,
            Decimal::ONE,
            OrderType::Limit,
            limit,
            TimeInForce::Day,
        );
        let sell = OrderSpec::simple(
            i,
            PositionIntent::SellToClose,
            Decimal::ONE,
            OrderType::Limit,
            limit,
            TimeInForce::Day,
        );
        assert_eq!(buy.signed_limit(), limit);
        assert_eq!(sell.signed_limit(), Some(Decimal::new(-19_012, 2)));
        assert_eq!(sell.legs[0].side, Side::Sell);
    }
}
