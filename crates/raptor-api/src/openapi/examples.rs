//! The example of every operation: its request body (where it takes one), its success answer
//! and its path parameters, as a client would send them and as the server answers them.
//! `tests/api/openapi.rs` sends every request example to a real server, in the order of
//! [`REQUEST_ORDER`], and checks each answer against the success example's members.

use serde_json::{json, Value};

/// The operations with a request body, in an order in which their examples succeed one after
/// the other against one fresh server (a position exists before it is closed or rolled, a
/// subscription before it is cancelled).
pub const REQUEST_ORDER: &[&str] = &[
    "join_waitlist",
    "register",
    "verify_link",
    "login",
    "set_flag",
    "set_quote",
    "create_order",
    "close_position",
    "roll_position",
    "update_profile",
    "create_checkout_session",
    "create_portal_session",
    "sync_subscription_mirror",
    "cancel_subscription",
    "receive_stripe_webhook",
    "reset_account",
];

/// The example email address of the requests.
pub const EMAIL: &str = "ada@example.com";
/// The example sign-in link token (`rpl_` and 64 hex digits).
pub const LINK_TOKEN: &str = "rpl_3f5d0c9a1b7e4d2c8a6f0e1d3c5b7a9f2e4d6c8b0a1f3e5d7c9b2a4f6e8d0c1b";
/// The short call the roll example rolls, and its new contract.
pub const ROLL_FROM: &str = "XYZ270115C00067500";
/// The contract the roll example sells to open.
pub const ROLL_TO: &str = "XYZ270219C00070000";
/// The long call that covers the example's short call.
pub const LEAPS: &str = "XYZ280121C00050000";
/// The example Stripe ids.
pub const PRICE_ID: &str = "price_1PremiumMonthly";
/// The example Stripe customer.
pub const CUSTOMER_ID: &str = "cus_R4t5Y6";
/// The example Stripe subscription.
pub const SUBSCRIPTION_ID: &str = "sub_1Q2w3E";

/// The request body example of `operation_id`, if it takes one.
pub fn request(operation_id: &str) -> Option<Value> {
    Some(match operation_id {
        "join_waitlist" | "register" | "login" => json!({ "email": EMAIL }),
        "verify_link" => json!({ "token": LINK_TOKEN }),
        "set_flag" => json!({ "enabled": true }),
        "set_quote" => json!({ "bid": "189.90", "ask": "190.10" }),
        "create_order" => json!({
            "symbol": "AAPL",
            "qty": "10",
            "side": "buy",
            "type": "limit",
            "limit_price": "190.50",
            "time_in_force": "day",
            "client_order_id": "antlers-7f3a9c2e",
        }),
        "close_position" => json!({ "qty": "4" }),
        "roll_position" => json!({ "to_symbol": ROLL_TO, "qty": "1", "limit_price": "-0.80" }),
        "update_profile" => json!({ "display_name": "Ada Lovelace", "time_zone": "Europe/London" }),
        "create_checkout_session" => json!({
            "price_id": PRICE_ID,
            "success_url": "https://app.example.com/billing/success",
            "cancel_url": "https://app.example.com/billing",
        }),
        "create_portal_session" => json!({ "return_url": "https://app.example.com/settings" }),
        "sync_subscription_mirror" => json!({
            "stripe_subscription_id": SUBSCRIPTION_ID,
            "stripe_customer_id": CUSTOMER_ID,
            "status": "active",
            "price_id": PRICE_ID,
            "current_period_end": "2027-01-01T00:00:00Z",
            "cancel_at_period_end": false,
        }),
        "cancel_subscription" | "reset_account" => json!({}),
        "receive_stripe_webhook" => json!({
            "id": "evt_1Q9xYz",
            "object": "event",
            "type": "customer.subscription.updated",
            "created": 1_796_137_200,
            "livemode": false,
            "data": { "object": {
                "id": SUBSCRIPTION_ID,
                "object": "subscription",
                "customer": CUSTOMER_ID,
                "status": "active",
                "cancel_at_period_end": true,
                "canceled_at": null,
                "items": { "object": "list", "data": [
                    { "price": { "id": PRICE_ID }, "current_period_end": 1_798_761_600 }
                ]},
            }},
        }),
        _ => return None,
    })
}

/// The example of `operation_id`'s path parameter `name`.
pub fn parameter(operation_id: &str, name: &str) -> Option<Value> {
    Some(json!(match (operation_id, name) {
        ("roll_position", "symbol") => ROLL_FROM,
        (_, "symbol") => "AAPL",
        (_, "id") => ORDER_ID,
        (_, "client_order_id") => "antlers-7f3a9c2e",
        (_, "name") => "FLAG_IDEMPOTENCY_MIDDLEWARE",
        _ => return None,
    }))
}

const ORDER_ID: &str = "0193a5c2-7d4e-7b21-9f3a-5c8e1d2b4a6f";

/// The success answers, by operation id: answers of a real server to the requests above
/// (lists cut to their first item), kept as JSON. The test that sends the requests checks that
/// each answer has the members its example has.
const SUCCESS_EXAMPLES: &str = include_str!("success_examples.json");

/// The success answer example of `operation_id`.
pub fn response(operation_id: &str) -> Option<Value> {
    static EXAMPLES: std::sync::LazyLock<serde_json::Map<String, Value>> =
        std::sync::LazyLock::new(|| serde_json::from_str(SUCCESS_EXAMPLES).unwrap_or_default());
    EXAMPLES.get(operation_id).cloned()
}
