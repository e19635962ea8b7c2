#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![deny(clippy::float_arithmetic)]

mod account;
pub mod calendar;
mod engine;
mod error;
pub mod expiry;
mod fees;
mod order;
mod position;
mod risk;
pub mod spread;
mod symbol;

pub use account::{AccountState, OpenOrder, Quote};
pub use engine::{
    Decision, Engine, Execution, Fill, MAX_LEG_QTY, MAX_PRICE, MAX_QTY_DP, MLEG_LEGS,
};
pub use error::{OrderRejection, SymbolError, UnknownVariant};
pub use expiry::{ExpiryRun, Settlement, SettlementOutcome};
pub use fees::FeeSchedule;
pub use order::{
    InvalidTransition, LegSpec, OrderClass, OrderEvent, OrderSpec, OrderStatus, OrderType,
    PositionIntent, Side, TimeInForce, Transition,
};
pub use position::{round_money, round_price, Mark, Position, MONEY_DP, PRICE_DP};
pub use symbol::{Instrument, OptionContract, Right, OPTION_MULTIPLIER};
