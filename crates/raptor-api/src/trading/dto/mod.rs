//! Wire types of the trading routes (Alpaca's shapes; decimals as strings): `enums` the
//! enumerations (shared with the engine, or the values a stored column can hold), `request`
//! what clients send, `response` what they get back, `page` the lists that page
//! and their cursor. What a request means to the book is
//! `trading::parse`.

mod enums;
mod page;
mod request;
mod response;

pub use enums::*;
pub use page::*;
pub use request::*;
pub use response::*;
