//! The paper book's operations: placing orders, rolls and closes (`place`, with the derived
//! `client_order_id` in `client_order_id`), cancels and resets (`cancel_reset`), quote-driven
//! fills (`quotes`) and expiry (`expiry`); what they share, the locked account and the
//! account read, is in `book`. Each operation runs on the caller's connection (a `Claim`
//! transaction or a plain one) with a [`Desk`] (clock, engine, limits: no pool), locks the
//! account first, asks the pure engine, then writes the result and its audit rows.

mod book;
mod cancel_reset;
mod client_order_id;
mod expiry;
mod place;
mod quotes;

pub(crate) use super::desk::Desk;
pub(crate) use book::account;
pub(crate) use cancel_reset::{cancel, reset, reset_id};
pub use expiry::Expired;
pub(crate) use expiry::{expire_for_read, expire_orders};
pub(crate) use place::{place, Intent, Placed};
pub(crate) use quotes::{set_quote, Swept, Worker};
