//! Every error code the API answers, and which operation answers which.
//!
//! This is the single source of the OpenAPI document's error responses: `openapi::finish`
//! replaces whatever error responses the route attributes name with the ones computed here, one
//! response per status, with the shared `ErrorBody` schema and exactly that operation's codes
//! listed (its description and `x-error-codes`). A server that answers a code the table does
//! not list for a route fails the schema fuzzer (`make fuzz-api`). `docs/errors.md` explains
//! every code; a test checks that the two list the same codes.
//!
//! How an operation's codes are computed ([`operation_codes`]):
//! - every operation: `internal`, `too_many_connections` (the connection bound) and
//!   `request_headers_too_large` (the bound on a request head), both answered before the
//!   request reaches the router; outside `ops` also `request_timeout`;
//! - a bearer-authenticated one: `unauthenticated`, `forbidden` and the database's two 503s
//!   (authentication reads the database);
//! - one with a JSON body: `invalid_json`, `invalid_body`, `payload_too_large`,
//!   `unsupported_media_type`;
//! - one that takes an `Idempotency-Key`: the mechanism's codes;
//! - a `limit`/`status` query: `invalid_query`; a UUID path parameter: `invalid_path`;
//! - plus the operation's own codes, which each resource declares next to its routes, keyed
//!   by operationId (the handler's name): `ROUTE_CODES` in `trading`, `billing`, `accounts`,
//!   `admin`, `sessions`, `waitlist` and `health`, built from the codes and shared sets
//!   (`TRADE`, `STRIPE`) defined here.
//!
//! Every module uses this one and it uses none of them: the crate root gathers the resources'
//! tables (`crate::route_codes`, beside `api_routes`, where a new resource registers both) and
//! `openapi::finish` hands them to [`operation_codes`].
//!
//! Adding a code: a line in `error_codes!`'s table below (wire value, statuses, summary), a
//! section in `docs/errors.md` (a test checks both list the same codes), and the code in the
//! `ROUTE_CODES` of the operations that answer it.

/// Generates [`ErrorCode`] from one table: `Variant "anchor" [= wire], [statuses] [cli], retry,
/// "summary";`. The anchor is the code's section in `docs/errors.md` and, unless `= wire` says
/// otherwise, its wire value; `cli` marks a code only the CLI reports (never an HTTP answer);
/// `retry` is the code's [`Retry`] advice (`same_key`, `new_key` or `no`).
macro_rules! error_codes {
    ($($variant:ident $anchor:literal $(= $wire:expr)?, [$($status:literal),+] $($cli:ident)?, $retry:ident, $summary:literal;)*) => {
        /// Every error code: an `error` member's value. The one source of codes: the document's
        /// error responses, `docs/errors.md`'s sections and every `ApiError` come from it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $(
                #[doc = $summary]
                $variant,
            )*
        }

        impl ErrorCode {
            /// Every code, sorted by anchor.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The `error` member's value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => error_codes!(@wire $anchor $(, $wire)?),)*
                }
            }

            /// The code's section of `docs/errors.md` (`/docs/errors#<anchor>`).
            pub const fn anchor(self) -> &'static str {
                match self {
                    $(Self::$variant => $anchor,)*
                }
            }

            /// Every status the code is answered with.
            pub const fn statuses(self) -> &'static [u16] {
                match self {
                    $(Self::$variant => &[$($status),+],)*
                }
            }

            /// What it means, in one line (the OpenAPI descriptions and examples use it).
            pub const fn summary(self) -> &'static str {
                match self {
                    $(Self::$variant => $summary,)*
                }
            }

            /// What a client should do about it: the `retry` member of every error body.
            pub const fn retry(self) -> Retry {
                match self {
                    $(Self::$variant => error_codes!(@retry $retry),)*
                }
            }

            /// Whether an HTTP answer can carry it (some codes are only the CLI's).
            pub const fn over_http(self) -> bool {
                match self {
                    $(Self::$variant => error_codes!(@http $($cli)?),)*
                }
            }
        }
    };
    (@wire $anchor:literal) => { $anchor };
    (@wire $anchor:literal, $wire:expr) => { $wire };
    (@retry same_key) => { Retry::SameKey };
    (@retry new_key) => { Retry::NewKey };
    (@retry no) => { Retry::No };
    (@http) => { true };
    (@http cli) => { false };
}

pub use raptor_idempotency::key::KEY_INVALID;

// The one retry rule: `ErrorCode::retry` gives each code's, `docs/errors.md` states it per code,
// `docs/api.md`'s recipe and the clients' retry helpers read it; tests keep them in step.
/// What a client should do about an error (every error body's `retry` member, a property of its
/// code): `same_key`, retry with the same `Idempotency-Key` and body, after `Retry-After` when
/// present; `new_key`, the key is spent and nothing was executed, so trying again is a new
/// operation with a new key; `no`, retrying does not change the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Retry {
    /// Retrying with the same `Idempotency-Key` and body can help, after `Retry-After` when
    /// present: nothing was executed (or the outcome is unknown and the retry is deduplicated).
    SameKey,
    /// The key is spent and nothing was executed: a new attempt is a new operation, with a new
    /// key.
    NewKey,
    /// Retrying does not help: the answer is final, or the request must change.
    No,
}

impl Retry {
    /// The wire value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SameKey => "same_key",
            Self::NewKey => "new_key",
            Self::No => "no",
        }
    }
}

error_codes! {
    BadRequest "bad_request", [400], no, "an error without a code of its own (not expected)";
    BillingBusy "billing_busy", [503], same_key, "too many requests are waiting on Stripe; retry";
    BillingNotConfigured "billing_not_configured", [503], no, "billing is not configured on this server";
    BillingRequestRejected "billing_request_rejected", [422], no, "Stripe refused the request's parameters";
    ContractExpired "contract_expired", [422], no, "the option contract has expired";
    DatabaseBusy "database_busy", [503], same_key, "a lock or statement timeout fired; nothing was committed";
    DatabaseUnavailable "database_unavailable", [503], same_key, "the database did not answer; nothing was committed";
    DuplicateClientOrderId "duplicate_client_order_id", [422], no, "the account already has an order with this client_order_id";
    DuplicateReset "duplicate_reset", [422], no, "this Idempotency-Key already reset the account";
    EmailTaken "email_taken", [409] cli, no, "the email address already has a user (the CLI)";
    Forbidden "forbidden", [403], no, "the caller's role may not do this";
    IdempotencyInFlight "idempotency_in_flight", [409], same_key, "the first request with this key is still running";
    IdempotencyKeyBodyMismatch "idempotency_key_body_mismatch", [422], new_key, "this key was used with another request";
    IdempotencyKeyInvalid "idempotency_key_invalid" = KEY_INVALID, [400], no, "the Idempotency-Key header is not one UUID";
    IdempotencyKeyRequired "idempotency_key_required", [400], no, "this deployment requires an Idempotency-Key here";
    IdempotencyPreviousFailed "idempotency_previous_failed", [409], new_key, "the first request with this key failed; use a new key";
    IdempotencyStoreUnavailable "idempotency_store_unavailable", [503], same_key, "the key store did not answer; nothing was executed";
    InsufficientBuyingPower "insufficient_buying_power", [403], no, "the order costs more than the buying power";
    InsufficientQty "insufficient_qty", [403], no, "the position is smaller than the quantity";
    Internal "internal", [500], new_key, "an unexpected error; nothing was committed";
    InvalidBillingRequest "invalid_billing_request", [422], no, "a billing parameter is not acceptable";
    InvalidBody "invalid_body", [400, 422], no, "the body does not match the route's schema";
    InvalidDisplayName "invalid_display_name", [422], no, "the display name is too long or has control characters";
    InvalidEmail "invalid_email", [422], no, "not an email address";
    InvalidJson "invalid_json", [400], no, "the body is not JSON";
    InvalidMarketingOptIn "invalid_marketing_opt_in", [422], no, "marketing_opt_in must be true or false";
    InvalidName "invalid_name", [422] cli, no, "a service token needs a name (the CLI)";
    InvalidOrder "invalid_order", [422], no, "the order's values are not acceptable";
    InvalidPath "invalid_path", [400], no, "a path parameter is malformed";
    InvalidPayload "invalid_payload", [400], no, "the webhook's payload is not a Stripe event";
    InvalidQuery "invalid_query", [400], no, "a query parameter is malformed";
    InvalidQuote "invalid_quote", [422], no, "bid and ask must be positive, bid at most ask";
    InvalidSignature "invalid_signature", [400], no, "the Stripe-Signature header does not verify";
    InvalidSubscription "invalid_subscription", [422], no, "the subscription's values are not acceptable";
    InvalidSymbol "invalid_symbol", [422], no, "not an equity or OCC option symbol";
    InvalidTimeZone "invalid_time_zone", [422], no, "not an IANA time zone name";
    InvalidToken "invalid_token", [400], no, "the link is unknown, expired or spent";
    LiveTradingUnavailable "live_trading_unavailable", [403], no, "the account is not a paper account";
    MethodNotAllowed "method_not_allowed", [405], no, "the path does not take this method";
    NewOrdersDisabled "new_orders_disabled", [503], no, "new orders are switched off for now";
    NotFound "not_found", [404], no, "the resource does not exist for this caller";
    OrderNotCancelable "order_not_cancelable", [422], no, "the order is filled or expired";
    PayloadTooLarge "payload_too_large", [413], no, "the body exceeds the limit";
    QuoteUnavailable "quote_unavailable", [404, 422], no, "there is no quote for the symbol";
    RateLimited "rate_limited", [429], same_key, "too many requests; retry after Retry-After";
    RequestHeadersTooLarge "request_headers_too_large", [431], no, "the request line and headers exceed 32 KiB";
    RequestTimeout "request_timeout", [503], same_key, "the request ran past the server's request timeout";
    StreamHistoryGone "stream_history_gone", [410], no, "Last-Event-ID names no event still kept; read the lists, reconnect without it";
    StripeTimeout "stripe_timeout", [504], same_key, "Stripe did not answer in time; nothing was committed";
    StripeUnavailable "stripe_unavailable", [502, 503], same_key, "Stripe failed or is rate limiting; nothing was committed";
    SubscriptionActive "subscription_active", [409], no, "a subscription still renews";
    TooManyConnections "too_many_connections", [503], same_key, "the server holds as many connections as it accepts; retry shortly";
    TooManyOpenOrders "too_many_open_orders", [422], no, "the account has too many open orders for another to rest";
    Unauthenticated "unauthenticated", [401], no, "missing, unknown or expired bearer token";
    UncoveredShortOption "uncovered_short_option", [403], no, "the order would leave a short call uncovered";
    UnsupportedMediaType "unsupported_media_type", [415], no, "the body is not application/json";
}

impl ErrorCode {
    /// The code whose wire value is `wire`.
    pub fn from_wire(wire: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|code| code.as_str() == wire)
    }

    /// Whether waiting and retrying can help (`Retry-After` means that): the codes whose advice
    /// is [`Retry::SameKey`]. Not a halt of new orders, nor a deployment without billing keys,
    /// which no retry cures.
    pub fn retrying_helps(self) -> bool {
        self.retry() == Retry::SameKey
    }
}

impl AsRef<str> for ErrorCode {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The `ErrorCode` schema: an enum of every code an HTTP answer can carry.
impl utoipa::PartialSchema for ErrorCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        // By wire value (the malformed-key sentence first).
        let mut codes: Vec<ErrorCode> = Self::ALL
            .iter()
            .copied()
            .filter(|code| code.over_http())
            .collect();
        codes.sort_unstable_by_key(|code| code.as_str());
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "Every error code; `/docs/errors#<code>` explains each (the malformed-key \
                 sentence's section is `idempotency_key_invalid`).",
            ))
            .enum_values(Some(codes.iter().map(|code| code.as_str())))
            // Generators name enum members from `x-enum-varnames` (the anchor: an identifier
            // for every code, the malformed-key sentence included).
            .extensions(Some(
                utoipa::openapi::extensions::ExtensionsBuilder::new()
                    .add(
                        "x-enum-varnames",
                        codes.iter().map(|code| code.anchor()).collect::<Vec<_>>(),
                    )
                    .build(),
            ))
            .into()
    }
}

impl utoipa::ToSchema for ErrorCode {}

/// The codes of one operation, as a resource declares them: its operationId (the handler's
/// name) and sets of codes (shared sets such as `TRADE` compose).
pub type RouteCodes = (&'static str, &'static [&'static [ErrorCode]]);

use ErrorCode as E;

/// What every order-placing operation can be refused with.
pub(crate) const TRADE: &[ErrorCode] = &[
    E::ContractExpired,
    E::DuplicateClientOrderId,
    E::InsufficientBuyingPower,
    E::InsufficientQty,
    E::InvalidOrder,
    E::InvalidSymbol,
    E::LiveTradingUnavailable,
    E::NewOrdersDisabled,
    E::QuoteUnavailable,
    E::RateLimited,
    E::TooManyOpenOrders,
    E::UncoveredShortOption,
];

/// What every Stripe-calling operation can answer beyond its own.
pub(crate) const STRIPE: &[ErrorCode] = &[
    E::BillingBusy,
    E::BillingNotConfigured,
    E::BillingRequestRejected,
    E::StripeTimeout,
    E::StripeUnavailable,
];

/// Operations whose body is not parsed as JSON by the route's extractor (the Stripe webhook
/// verifies the raw bytes' signature first): no `invalid_json`/`invalid_body`/415 for them.
pub const RAW_BODY: &[&str] = &["receive_stripe_webhook"];

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

/// Every code the operation `operation_id` can answer, sorted and unique; `None` when
/// `route_codes` (every resource's table, which the crate root gathers) does not declare it.
pub fn operation_codes(
    route_codes: &[RouteCodes],
    operation_id: &str,
    shape: Shape,
) -> Option<Vec<ErrorCode>> {
    let own = route_codes.iter().find(|(id, _)| *id == operation_id)?.1;
    // A connection past the server's bound, or a request head over its bound, is refused
    // before its request reaches the router: any operation can get those answers.
    let mut codes: Vec<ErrorCode> = vec![
        E::Internal,
        E::TooManyConnections,
        E::RequestHeadersTooLarge,
    ];
    if !shape.ops {
        codes.push(E::RequestTimeout);
    }
    if shape.authenticated {
        codes.extend([
            E::Unauthenticated,
            E::Forbidden,
            E::DatabaseBusy,
            E::DatabaseUnavailable,
        ]);
    }
    if shape.json_body {
        codes.extend([
            E::InvalidJson,
            E::InvalidBody,
            E::PayloadTooLarge,
            E::UnsupportedMediaType,
        ]);
    }
    if shape.keyed {
        // Every refusal of the idempotency mechanism, and what a claim's transaction can
        // answer.
        codes.extend(
            raptor_idempotency::Refusal::CODES
                .iter()
                .filter_map(|wire| ErrorCode::from_wire(wire)),
        );
        codes.extend([E::DatabaseBusy, E::DatabaseUnavailable]);
    }
    if shape.query {
        codes.push(E::InvalidQuery);
    }
    if shape.uuid_path {
        codes.push(E::InvalidPath);
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
        for code in ErrorCode::ALL {
            assert!(
                documented.iter().any(|d| d == code.anchor()),
                "{code} has no section in docs/errors.md"
            );
        }
        for anchor in documented {
            assert!(
                ErrorCode::ALL.iter().any(|c| c.anchor() == anchor),
                "docs/errors.md documents {anchor}, which is no ErrorCode"
            );
        }
    }

    /// `docs/errors.md`'s section of `anchor`, up to the next one.
    fn section(anchor: &str) -> &'static str {
        let doc = include_str!("../../../docs/errors.md");
        let start = doc
            .find(&format!("<a id=\"{anchor}\">"))
            .map_or(doc.len(), |at| at + anchor.len());
        let rest = &doc[start..];
        &rest[..rest.find("<a id=\"").unwrap_or(rest.len())]
    }

    #[test]
    fn every_section_gives_its_codes_retry_advice() {
        for code in ErrorCode::ALL {
            let advice = format!("- **Retry**: `{}`.", code.retry().as_str());
            assert!(
                section(code.anchor()).contains(&advice),
                "docs/errors.md's section of {code} must say {advice}"
            );
        }
    }

    /// The retry recipe of `docs/api.md` names codes under three of its steps: 3 (same key),
    /// 4 (stop) and 6 (new key). Each code named there has that advice in the table.
    #[test]
    fn the_retry_recipe_agrees_with_the_table() {
        let doc = include_str!("../../../docs/api.md");
        let recipe = doc
            .split("## Retry recipe")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .unwrap_or_default();
        let mut step = 0;
        let mut named = 0;
        for line in recipe.lines() {
            if let Some((number, _)) = line.split_once(". **") {
                step = number.trim().parse().unwrap_or(0);
            }
            let expected = match step {
                3 => Retry::SameKey,
                4 => Retry::No,
                6 => Retry::NewKey,
                _ => continue,
            };
            // `409 idempotency_in_flight` or `database_busy`: the code is the last word.
            for quoted in line.split('`').skip(1).step_by(2) {
                let word = quoted.rsplit(' ').next().unwrap_or(quoted);
                if let Some(code) = ErrorCode::from_wire(word) {
                    named += 1;
                    assert_eq!(
                        code.retry(),
                        expected,
                        "docs/api.md's retry recipe names {code} under step {step}"
                    );
                }
            }
        }
        assert!(named >= 10, "the recipe names only {named} codes");
    }

    #[test]
    fn wire_values_are_unique_and_found_again() {
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::from_wire(code.as_str()), Some(*code));
        }
        assert_eq!(ErrorCode::IdempotencyKeyInvalid.as_str(), KEY_INVALID);
        assert_eq!(
            ErrorCode::IdempotencyKeyInvalid.anchor(),
            "idempotency_key_invalid"
        );
        assert!(ErrorCode::ALL
            .windows(2)
            .all(|w| w[0].anchor() < w[1].anchor()));
    }

    #[test]
    fn every_refusal_of_the_mechanism_is_a_code() {
        for wire in raptor_idempotency::Refusal::CODES {
            assert!(
                ErrorCode::from_wire(wire).is_some(),
                "{wire} is no ErrorCode"
            );
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
        // An order placement, as `trading` declares it.
        let table: &[RouteCodes] = &[("create_order", &[TRADE])];
        let codes = operation_codes(table, "create_order", keyed).unwrap_or_default();
        for expected in [
            E::IdempotencyKeyInvalid,
            E::Unauthenticated,
            E::InvalidJson,
            E::InsufficientQty,
        ] {
            assert!(codes.contains(&expected), "missing {expected}");
        }
        assert!(!codes.contains(&E::InvalidQuery));
        assert!(operation_codes(table, "nowhere", Shape::default()).is_none());
    }
}
