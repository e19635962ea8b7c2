//! Every error code the API answers, and which operation answers which.
//!
//! This is the single source of the OpenAPI document's error responses: `openapi::finish`
//! replaces whatever error responses the route attributes name with the ones computed here, one
//! response per status, whose `error` member is an enum of exactly that operation's codes. So a
//! generated client can switch exhaustively on them, and a server that answers a code the table
//! does not list for a route fails the schema fuzzer (`make fuzz-api`). `docs/errors.md` explains
//! every code; a test checks that the two list the same codes.
//!
//! How an operation's codes are computed ([`operation_codes`]):
//! - every operation outside `ops`: `internal`, `request_timeout`;
//! - a bearer-authenticated one: `unauthenticated`, `forbidden` and the database's two 503s
//!   (authentication reads the database);
//! - one with a JSON body: `invalid_json`, `invalid_body`, `payload_too_large`,
//!   `unsupported_media_type`;
//! - one that takes an `Idempotency-Key`: the mechanism's codes;
//! - a `limit`/`status` query: `invalid_query`; a UUID path parameter: `invalid_path`;
//! - plus the route's own codes from [`ROUTE_CODES`].

/// One error code: its wire value, the statuses it is sent with, and a one-line summary.
#[derive(Debug, Clone, Copy)]
pub struct Code {
    /// The `error` member's value.
    pub code: &'static str,
    /// Every status the code is answered with.
    pub statuses: &'static [u16],
    /// What it means, in one line (the OpenAPI response descriptions and examples use it).
    pub summary: &'static str,
}

const fn code(code: &'static str, statuses: &'static [u16], summary: &'static str) -> Code {
    Code {
        code,
        statuses,
        summary,
    }
}

pub use raptor_idempotency::key::KEY_INVALID;

/// Every code the HTTP API can answer, sorted by code.
pub const CODES: &[Code] = &[
    code(
        KEY_INVALID,
        &[400],
        "the Idempotency-Key header is not one UUID",
    ),
    code(
        "bad_request",
        &[400],
        "an error without a code of its own (not expected)",
    ),
    code(
        "billing_busy",
        &[503],
        "too many requests are waiting on Stripe; retry",
    ),
    code(
        "billing_not_configured",
        &[503],
        "billing is not configured on this server",
    ),
    code(
        "billing_request_rejected",
        &[422],
        "Stripe refused the request's parameters",
    ),
    code(
        "contract_expired",
        &[422],
        "the option contract has expired",
    ),
    code(
        "database_busy",
        &[503],
        "a lock or statement timeout fired; nothing was committed",
    ),
    code(
        "database_unavailable",
        &[503],
        "the database did not answer; nothing was committed",
    ),
    code(
        "duplicate_client_order_id",
        &[422],
        "the account already has an order with this client_order_id",
    ),
    code("forbidden", &[403], "the caller's role may not do this"),
    code(
        "idempotency_in_flight",
        &[409],
        "the first request with this key is still running",
    ),
    code(
        "idempotency_key_body_mismatch",
        &[422],
        "this key was used with another request",
    ),
    code(
        "idempotency_key_required",
        &[400],
        "this deployment requires an Idempotency-Key here",
    ),
    code(
        "idempotency_previous_failed",
        &[409],
        "the first request with this key failed; use a new key",
    ),
    code(
        "idempotency_store_unavailable",
        &[503],
        "the key store did not answer; nothing was executed",
    ),
    code(
        "insufficient_buying_power",
        &[403],
        "the order costs more than the buying power",
    ),
    code(
        "insufficient_qty",
        &[403],
        "the position is smaller than the quantity",
    ),
    code(
        "internal",
        &[500],
        "an unexpected error; nothing was committed",
    ),
    code(
        "invalid_billing_request",
        &[422],
        "a billing parameter is not acceptable",
    ),
    code(
        "invalid_body",
        &[400, 422],
        "the body does not match the route's schema",
    ),
    code(
        "invalid_display_name",
        &[422],
        "the display name is too long or has control characters",
    ),
    code("invalid_email", &[422], "not an email address"),
    code("invalid_json", &[400], "the body is not JSON"),
    code(
        "invalid_marketing_opt_in",
        &[422],
        "marketing_opt_in must be true or false",
    ),
    code(
        "invalid_order",
        &[422],
        "the order's values are not acceptable",
    ),
    code("invalid_path", &[400], "a path parameter is malformed"),
    code(
        "invalid_payload",
        &[400],
        "the webhook's payload is not a Stripe event",
    ),
    code("invalid_query", &[400], "a query parameter is malformed"),
    code(
        "invalid_quote",
        &[422],
        "bid and ask must be positive, bid at most ask",
    ),
    code(
        "invalid_signature",
        &[400],
        "the Stripe-Signature header does not verify",
    ),
    code(
        "invalid_subscription",
        &[422],
        "the subscription's values are not acceptable",
    ),
    code(
        "invalid_symbol",
        &[422],
        "not an equity or OCC option symbol",
    ),
    code("invalid_time_zone", &[422], "not an IANA time zone name"),
    code(
        "invalid_token",
        &[400],
        "the link is unknown, expired or spent",
    ),
    code(
        "live_trading_unavailable",
        &[403],
        "the account is not a paper account",
    ),
    code(
        "method_not_allowed",
        &[405],
        "the path does not take this method",
    ),
    code(
        "new_orders_disabled",
        &[503],
        "new orders are switched off for now",
    ),
    code(
        "not_found",
        &[404],
        "the resource does not exist for this caller",
    ),
    code(
        "order_not_cancelable",
        &[422],
        "the order is filled or expired",
    ),
    code("payload_too_large", &[413], "the body exceeds the limit"),
    code(
        "quote_unavailable",
        &[422],
        "there is no quote for the symbol",
    ),
    code(
        "rate_limited",
        &[429],
        "too many requests; retry after Retry-After",
    ),
    code(
        "request_timeout",
        &[503],
        "the request ran past the server's request timeout",
    ),
    code(
        "stripe_timeout",
        &[504],
        "Stripe did not answer in time; nothing was committed",
    ),
    code(
        "stripe_unavailable",
        &[502, 503],
        "Stripe failed or is rate limiting; nothing was committed",
    ),
    code("subscription_active", &[409], "a subscription still renews"),
    code(
        "too_many_open_orders",
        &[422],
        "the account has too many open orders for another to rest",
    ),
    code(
        "unauthenticated",
        &[401],
        "missing, unknown or expired bearer token",
    ),
    code(
        "uncovered_short_option",
        &[403],
        "the order would leave a short call uncovered",
    ),
    code(
        "unsupported_media_type",
        &[415],
        "the body is not application/json",
    ),
];

/// The `ErrorCode` schema: an enum of every code in [`CODES`].
#[derive(Debug)]
pub struct ErrorCode;

impl utoipa::PartialSchema for ErrorCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "Every error code; `/docs/errors#<code>` explains each (the malformed-key \
                 sentence's section is `idempotency_key_invalid`).",
            ))
            .enum_values(Some(CODES.iter().map(|c| c.code)))
            .into()
    }
}

impl utoipa::ToSchema for ErrorCode {}

/// The catalogue entry of a code.
pub fn lookup(code: &str) -> Option<&'static Code> {
    CODES.iter().find(|c| c.code == code)
}

const TRADE: &[&str] = &[
    "contract_expired",
    "duplicate_client_order_id",
    "insufficient_buying_power",
    "insufficient_qty",
    "invalid_order",
    "invalid_symbol",
    "live_trading_unavailable",
    "new_orders_disabled",
    "quote_unavailable",
    "rate_limited",
    "too_many_open_orders",
    "uncovered_short_option",
];

const STRIPE: &[&str] = &[
    "billing_busy",
    "billing_not_configured",
    "billing_request_rejected",
    "stripe_timeout",
    "stripe_unavailable",
];

/// Each operation's own codes, beyond the ones its shape implies (see the module's docs).
pub const ROUTE_CODES: &[(&str, &[&[&str]])] = &[
    ("POST /api/account/erasure", &[&["subscription_active"]]),
    ("GET /api/account/export", &[]),
    ("GET /api/account/profile", &[&["not_found"]]),
    (
        "PATCH /api/account/profile",
        &[&[
            "invalid_display_name",
            "invalid_marketing_opt_in",
            "invalid_time_zone",
            "not_found",
        ]],
    ),
    ("PUT /api/admin/flags/{name}", &[&["not_found"]]),
    (
        "PUT /api/admin/quotes/{symbol}",
        &[&["invalid_quote", "invalid_symbol"]],
    ),
    (
        "POST /api/auth/login",
        &[&["invalid_email", "rate_limited"]],
    ),
    ("POST /api/auth/logout", &[]),
    (
        "POST /api/auth/register",
        &[&["invalid_email", "rate_limited"]],
    ),
    (
        "POST /api/auth/register/verify-with-token",
        &[&["invalid_token"]],
    ),
    (
        "POST /api/billing/checkout-sessions",
        &[STRIPE, &["invalid_billing_request", "subscription_active"]],
    ),
    (
        "POST /api/billing/mirror-sync",
        &[&["invalid_subscription"]],
    ),
    (
        "POST /api/billing/portal-sessions",
        &[STRIPE, &["invalid_billing_request"]],
    ),
    (
        "POST /api/billing/subscription/cancel",
        &[STRIPE, &["not_found"]],
    ),
    // Called by Stripe: no bearer token, its own payload and signature codes.
    (
        "POST /api/billing/webhooks/stripe",
        &[&[
            "billing_not_configured",
            "database_busy",
            "database_unavailable",
            "invalid_payload",
            "invalid_signature",
            "payload_too_large",
        ]],
    ),
    ("GET /api/trading/account", &[&["not_found"]]),
    (
        "POST /api/trading/account/reset",
        &[&["live_trading_unavailable", "not_found", "rate_limited"]],
    ),
    ("GET /api/trading/orders", &[&["not_found"]]),
    ("POST /api/trading/orders", &[TRADE]),
    ("GET /api/trading/orders/{id}", &[&["not_found"]]),
    (
        "DELETE /api/trading/orders/{id}",
        &[&[
            "live_trading_unavailable",
            "not_found",
            "order_not_cancelable",
            "rate_limited",
        ]],
    ),
    ("GET /api/trading/positions", &[&["not_found"]]),
    (
        "POST /api/trading/positions/{symbol}/close",
        &[TRADE, &["not_found"]],
    ),
    (
        "POST /api/trading/positions/{symbol}/roll",
        &[TRADE, &["not_found"]],
    ),
    (
        "POST /api/waitlist/signup",
        &[&["database_busy", "database_unavailable", "invalid_email"]],
    ),
    ("GET /healthz", &[]),
    ("GET /metrics", &[]),
    ("GET /readyz", &[]),
];

/// Operations whose body is not parsed as JSON by the route's extractor (the Stripe webhook
/// verifies the raw bytes' signature first): no `invalid_json`/`invalid_body`/415 for them.
pub const RAW_BODY: &[&str] = &["POST /api/billing/webhooks/stripe"];

/// What [`operation_codes`] needs to know about an operation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shape {
    /// Tagged `ops` (health, readiness, metrics): only `internal`.
    pub ops: bool,
    /// Needs a bearer token.
    pub authenticated: bool,
    /// Takes a JSON body (the Stripe webhook's raw body does not count).
    pub json_body: bool,
    /// Takes an `Idempotency-Key`.
    pub keyed: bool,
    /// Has query parameters.
    pub query: bool,
    /// Has a UUID path parameter.
    pub uuid_path: bool,
}

/// Every code `route` (`"METHOD /template"`) can answer, sorted and unique; `None` when the
/// route is not in [`ROUTE_CODES`].
pub fn operation_codes(route: &str, shape: Shape) -> Option<Vec<&'static str>> {
    let own = ROUTE_CODES.iter().find(|(r, _)| *r == route)?.1;
    let mut codes: Vec<&'static str> = vec!["internal"];
    if !shape.ops {
        codes.push("request_timeout");
    }
    if shape.authenticated {
        codes.extend([
            "unauthenticated",
            "forbidden",
            "database_busy",
            "database_unavailable",
        ]);
    }
    if shape.json_body {
        codes.extend([
            "invalid_json",
            "invalid_body",
            "payload_too_large",
            "unsupported_media_type",
        ]);
    }
    if shape.keyed {
        codes.extend([
            KEY_INVALID,
            "idempotency_key_required",
            "idempotency_in_flight",
            "idempotency_previous_failed",
            "idempotency_key_body_mismatch",
            "idempotency_store_unavailable",
            "database_busy",
            "database_unavailable",
        ]);
    }
    if shape.query {
        codes.push("invalid_query");
    }
    if shape.uuid_path {
        codes.push("invalid_path");
    }
    codes.extend(own.iter().flat_map(|set| set.iter().copied()));
    codes.sort_unstable();
    codes.dedup();
    Some(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The anchors of `docs/errors.md`'s code sections.
    fn documented() -> Vec<String> {
        let doc = include_str!("../../../docs/errors.md");
        doc.split("<a id=\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn every_code_is_documented_and_every_documented_code_is_known() {
        let documented = documented();
        for code in CODES {
            let anchor = crate::problem::anchor(code.code);
            assert!(
                documented.iter().any(|d| d == anchor),
                "{} has no section in docs/errors.md",
                code.code
            );
        }
        // The CLI-only codes are documented but never answered over HTTP.
        for anchor in documented {
            let known = CODES
                .iter()
                .any(|c| crate::problem::anchor(c.code) == anchor)
                || ["email_taken", "invalid_name"].contains(&anchor.as_str());
            assert!(
                known,
                "docs/errors.md documents {anchor}, which no route answers"
            );
        }
    }

    #[test]
    fn route_codes_name_only_known_codes() {
        for (route, sets) in ROUTE_CODES {
            for code in sets.iter().flat_map(|s| s.iter()) {
                assert!(lookup(code).is_some(), "{route} lists unknown code {code}");
            }
        }
    }

    #[test]
    fn codes_follow_the_operation_shape() {
        let keyed = Shape {
            authenticated: true,
            json_body: true,
            keyed: true,
            ..Shape::default()
        };
        let codes = operation_codes("POST /api/trading/orders", keyed).unwrap_or_default();
        for expected in [
            KEY_INVALID,
            "unauthenticated",
            "invalid_json",
            "insufficient_qty",
        ] {
            assert!(codes.contains(&expected), "missing {expected}");
        }
        assert!(!codes.contains(&"invalid_query"));
        assert!(operation_codes("GET /nowhere", Shape::default()).is_none());
    }
}
