//! SQL of the paper book. Every write takes `&mut PgConnection` (the caller's transaction).
//! Lock order, everywhere: quote row (quote updates only), then the account row, then its
//! positions by symbol — so concurrent writers cannot deadlock.
//!
//! `account` the account row and positions, `book_read` what a decision reads after the
//! account lock, `quotes`, `orders` (insert, end, reads), `fills` (an execution's effects),
//! `expiry`, `activities` (the feed).

mod account;
mod activities;
mod book_read;
mod expiry;
mod fills;
mod orders;
mod quotes;

pub use account::lock_account_and_quotes_statement;
pub(crate) use account::*;
pub(crate) use activities::*;
pub(crate) use book_read::*;
pub(crate) use expiry::*;
pub(crate) use fills::*;
pub(crate) use orders::*;
pub use quotes::QUOTE_EVENT;
pub(crate) use quotes::*;
