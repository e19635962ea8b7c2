//! The paper book through HTTP: orders, option rolls, closes, cancels, resets, quote-driven
//! fills, expiry, gates, limits, client order ids, concurrency on one account, and the position
//! rows updated in place.

mod activities;
mod client_order_id;
mod expiry;
mod history;
mod limits;
mod options;
mod orders;
mod plans;
mod positions;
mod quotes;
mod reads;
mod settlement;
mod stream;
mod stream_readers;
mod sweeps;

use serde_json::Value;

/// A LEAPS call (January 2028), the long leg of the calendar.
const LEAPS: &str = "XYZ280121C00050000";
/// The near call (December 2026), the short leg.
const NEAR: &str = "XYZ261218C00065000";
/// The next call (January 2027), where the short leg rolls to.
const NEXT: &str = "XYZ270115C00067500";

fn position<'a>(positions: &'a [Value], symbol: &str) -> Option<&'a Value> {
    positions.iter().find(|p| p["symbol"] == symbol)
}
