//! Request bodies: orders ([`Order`]) and the probe routes' ([`label`]).

use serde_json::{json, Map, Value};

/// The body of `POST /api/trading/orders`, built member by member: it holds exactly the members
/// a test sets, with the values it gives (strings, as the document types decimals).
///
/// `Order::market("AAPL").buy().qty("1").json()` is
/// `{ "symbol": "AAPL", "type": "market", "side": "buy", "qty": "1" }`.
#[derive(Debug, Clone)]
#[must_use]
pub(crate) struct Order(Map<String, Value>);

impl Order {
    /// A market order for `symbol`.
    pub(crate) fn market(symbol: &str) -> Self {
        Self(Map::new()).set("symbol", symbol).set("type", "market")
    }

    /// A limit order for `symbol` at `limit_price`.
    pub(crate) fn limit(symbol: &str, limit_price: &str) -> Self {
        Self(Map::new())
            .set("symbol", symbol)
            .set("type", "limit")
            .set("limit_price", limit_price)
    }

    /// A multi-leg market order (`order_class: mleg`) of `legs`.
    pub(crate) fn mleg_market(legs: Vec<Value>) -> Self {
        Self(Map::new())
            .set("order_class", "mleg")
            .set("type", "market")
            .set("legs", legs)
    }

    /// A multi-leg limit order (`order_class: mleg`) of `legs` at a net `limit_price`.
    pub(crate) fn mleg_limit(limit_price: &str, legs: Vec<Value>) -> Self {
        Self(Map::new())
            .set("order_class", "mleg")
            .set("type", "limit")
            .set("limit_price", limit_price)
            .set("legs", legs)
    }

    pub(crate) fn buy(self) -> Self {
        self.set("side", "buy")
    }

    pub(crate) fn sell(self) -> Self {
        self.set("side", "sell")
    }

    /// `side: buy`, `position_intent: buy_to_open`.
    pub(crate) fn buy_to_open(self) -> Self {
        self.buy().position_intent("buy_to_open")
    }

    /// `side: sell`, `position_intent: sell_to_open`.
    pub(crate) fn sell_to_open(self) -> Self {
        self.sell().position_intent("sell_to_open")
    }

    /// `side: sell`, `position_intent: sell_to_close`.
    pub(crate) fn sell_to_close(self) -> Self {
        self.sell().position_intent("sell_to_close")
    }

    pub(crate) fn qty(self, qty: &str) -> Self {
        self.set("qty", qty)
    }

    /// `time_in_force: day`.
    pub(crate) fn day(self) -> Self {
        self.time_in_force("day")
    }

    /// `time_in_force: gtc`.
    pub(crate) fn gtc(self) -> Self {
        self.time_in_force("gtc")
    }

    pub(crate) fn time_in_force(self, time_in_force: &str) -> Self {
        self.set("time_in_force", time_in_force)
    }

    pub(crate) fn position_intent(self, intent: &str) -> Self {
        self.set("position_intent", intent)
    }

    pub(crate) fn client_order_id(self, id: &str) -> Self {
        self.set("client_order_id", id)
    }

    /// Any member, with any JSON value (one the document forbids, for instance).
    pub(crate) fn set(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.0.insert(name.to_owned(), value.into());
        self
    }

    pub(crate) fn json(self) -> Value {
        Value::Object(self.0)
    }
}

/// The probe routes' body: `{ "label": label }`.
pub(crate) fn label(label: &str) -> Value {
    json!({ "label": label })
}
