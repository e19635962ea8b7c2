//! Responses: what a handler hands to [`Claim::finish`](crate::Claim::finish), what is stored,
//! and the JSON error bodies this crate answers with itself.

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::key::{KeyError, KEY_INVALID};

/// Response header marking a replay (`true`) or a fresh execution (`false`).
pub const REPLAYED_HEADER: HeaderName = HeaderName::from_static("idempotent-replayed");

/// A handler's successful (or business-rejected) answer: status, JSON body, optional `Location`.
/// The body is serialised once, when the reply is made: that text is what the client gets and
/// what the key stores (plain or sealed).
#[derive(Debug, Clone)]
pub struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) body: Box<RawValue>,
    pub(crate) location: Option<String>,
}

impl Reply {
    /// A JSON reply. A body that cannot be serialised becomes a 500 error body (and so is rolled
    /// back by [`Claim::finish`](crate::Claim::finish)).
    pub fn json(status: StatusCode, body: &impl Serialize) -> Self {
        match serialise(body) {
            Ok(body) => Self {
                status,
                body,
                location: None,
            },
            Err(err) => {
                tracing::error!(error = %err, "response body failed to serialise");
                Self::internal()
            }
        }
    }

    /// A business rejection that is committed with the handler's writes (its audit row, say)
    /// and stored and replayed like a success: `Ok(Reply::rejected(err))`. (An `Err` of the
    /// same error would roll those writes back.)
    pub fn rejected(err: &impl ErrorReply) -> Self {
        let mut body = err.body();
        strip_nul(&mut body);
        match serde_json::value::to_raw_value(&body) {
            Ok(body) => Self {
                status: err.status(),
                body,
                location: None,
            },
            Err(_) => Self::internal(),
        }
    }

    fn internal() -> Self {
        let body = error_body("internal", "internal server error");
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            body: serde_json::value::to_raw_value(&body)
                .unwrap_or_else(|_| RawValue::NULL.to_owned()),
            location: None,
        }
    }

    /// Adds a `Location` header (replayed too).
    pub fn with_location(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The JSON body, as sent.
    pub fn body(&self) -> &RawValue {
        &self.body
    }

    pub(crate) fn into_response_with(self, replayed: Option<bool>) -> Response {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(location) = self.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
            headers.insert(header::LOCATION, location);
        }
        if let Some(replayed) = replayed {
            headers.insert(
                REPLAYED_HEADER,
                HeaderValue::from_static(bool_str(replayed)),
            );
        }
        let body: Box<str> = self.body.into();
        (self.status, headers, String::from(body)).into_response()
    }
}

/// `body` as JSON text, with every U+0000 replaced ([`strip_nul`]). A string holding U+0000
/// serialises with the escape `\u0000`; only a body whose text contains that sequence (rare:
/// also an escaped backslash before `u0000`) is serialised again through a cleaned `Value`.
fn serialise(body: &impl Serialize) -> Result<Box<RawValue>, serde_json::Error> {
    // Not `RawValue::from_string`: that parses the text again to check it.
    let raw = serde_json::value::to_raw_value(body)?;
    if !raw.get().contains("\\u0000") {
        return Ok(raw);
    }
    let mut value = serde_json::to_value(body)?;
    strip_nul(&mut value);
    serde_json::value::to_raw_value(&value)
}

/// Postgres `jsonb` cannot hold U+0000, so a response echoing one could be sent but not stored,
/// turning a business answer into a failure. Every string is cleaned the same way in the sent
/// and the stored body, so a replay stays identical to the original.
pub(crate) fn strip_nul(value: &mut Value) {
    match value {
        Value::String(text) if text.contains('\0') => *text = text.replace('\0', "\u{fffd}"),
        Value::Array(items) => items.iter_mut().for_each(strip_nul),
        Value::Object(map) => {
            let nul_keys: Vec<String> = map.keys().filter(|k| k.contains('\0')).cloned().collect();
            for key in nul_keys {
                if let Some(item) = map.remove(&key) {
                    map.insert(key.replace('\0', "\u{fffd}"), item);
                }
            }
            map.values_mut().for_each(strip_nul);
        }
        _ => {}
    }
}

/// Errors that a handler may return through [`Claim::finish`](crate::Claim::finish). A status
/// below 500 is a business answer: committed, stored and replayed like a success. 500 and above
/// roll back and mark the key failed.
pub trait ErrorReply: IntoResponse {
    /// The HTTP status this error answers with.
    fn status(&self) -> StatusCode;
    /// The JSON body stored and sent for a status below 500.
    fn body(&self) -> Value;
    /// For a 500-class error: whether the key is released (its transaction rolled back and a
    /// retry with the same key may run: a `503` that says "retry", or an upstream call whose
    /// outcome is unknown and which the retry deduplicates upstream) rather than failed.
    fn releases_key(&self) -> bool {
        self.status() == StatusCode::SERVICE_UNAVAILABLE
    }
}

fn bool_str(value: bool) -> &'static str {
    if value {
        "true"
    } else {
        "false"
    }
}

/// The error envelope shared with the API crate: `{"error": code, "message": text}`.
pub fn error_body(code: &str, message: &str) -> Value {
    json!({ "error": code, "message": message })
}

/// A JSON error response.
pub(crate) fn error_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// `409 idempotency_in_flight` with `Retry-After` (seconds, rounded up).
fn in_flight(retry_after_ms: u64, message: &str) -> Response {
    let mut response = error_response(
        StatusCode::CONFLICT,
        json!({
            "error": "idempotency_in_flight",
            "message": message,
            "retry_after_ms": retry_after_ms,
        }),
    );
    let secs = retry_after_ms.div_ceil(1000);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}

/// `503 idempotency_store_unavailable` with `Retry-After: 1`.
fn store_unavailable() -> Response {
    let mut response = error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        error_body(
            "idempotency_store_unavailable",
            "the idempotency store did not answer in time; retrying with the same key is safe",
        ),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// `503 idempotency_store_unavailable` for a completed key whose stored response cannot be
/// decrypted (its key id is not configured, or it was tampered with). The request is not
/// executed again; `Retry-After: 30`, since it takes an operator to restore the key.
fn store_unreadable() -> Response {
    let mut response = error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        error_body(
            "idempotency_store_unavailable",
            "the stored response for this Idempotency-Key cannot be read right now; it was not \
             executed again, and retrying with the same key later is safe",
        ),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("30"));
    response
}

/// A stored response as read back from `idempotency_keys`: what a replay answers.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    pub(crate) code: i16,
    /// The stored body's text: a sealed body as the original sent it, a plain one serialised
    /// again from its `jsonb` (members sorted by name).
    pub(crate) body: Option<Box<RawValue>>,
    pub(crate) headers: Option<Value>,
}

impl StoredResponse {
    /// The stored status code.
    pub fn code(&self) -> i16 {
        self.code
    }

    /// The replay: stored status, stored body plus `"idempotency_replayed": true`, stored
    /// `Content-Type` and `Location`, and `Idempotent-Replayed: true`.
    pub(crate) fn replay(self) -> Response {
        let status = u16::try_from(self.code)
            .ok()
            .and_then(|c| StatusCode::from_u16(c).ok())
            .unwrap_or(StatusCode::OK);
        let body = match &self.body {
            Some(body) => with_marker(body.get()),
            None => r#"{"body_stored":false,"idempotency_replayed":true}"#.to_owned(),
        };
        let mut response = (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response();
        let headers = response.headers_mut();
        if let Some(Value::Object(stored)) = self.headers {
            for (name, value) in stored {
                let (Ok(name), Some(Ok(value))) = (
                    HeaderName::try_from(name.as_str()),
                    value.as_str().map(HeaderValue::from_str),
                ) else {
                    continue;
                };
                headers.insert(name, value);
            }
        }
        headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
        response
    }
}

/// The headers kept for replay: only `Content-Type` and `Location` (docs/idempotency.md).
pub(crate) fn stored_headers(location: Option<&str>) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("content-type".into(), Value::from("application/json"));
    if let Some(location) = location {
        map.insert("location".into(), Value::from(location));
    }
    Value::Object(map)
}

/// `body` (JSON text) with `"idempotency_replayed": true` as its object's last member; a body
/// that is not an object is replayed as it is. The stored text is not parsed again, so a
/// replay keeps the original's members in the original's order.
fn with_marker(body: &str) -> String {
    const MARKER: &str = r#""idempotency_replayed":true}"#;
    let body = body.trim();
    if body.contains("\"idempotency_replayed\"") {
        // Never in an answer of ours; set rather than repeated, as a `Value` would.
        if let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(body) {
            map.insert("idempotency_replayed".into(), Value::Bool(true));
            return Value::Object(map).to_string();
        }
    }
    match body.strip_prefix('{').and_then(|b| b.strip_suffix('}')) {
        Some(members) if members.trim().is_empty() => format!("{{{MARKER}"),
        Some(_) => format!("{},{MARKER}", &body[..body.len() - 1]),
        None => body.to_owned(),
    }
}

/// Why the mechanism answers an instrumented request itself instead of its handler: a replay,
/// or a refusal. Typed, so that tests and logs can match outcomes; it becomes its response (the
/// API's error envelope, enriched by its middleware) only on the way out.
#[derive(Debug)]
pub enum Refusal {
    /// The stored answer of a completed key.
    Replay(Box<StoredResponse>),
    /// `400`: the `Idempotency-Key` header is not one UUID.
    KeyInvalid(KeyError),
    /// `400 idempotency_key_required`.
    KeyRequired,
    /// `422 idempotency_key_body_mismatch`: the key was used with another request.
    BodyMismatch,
    /// `409 idempotency_in_flight` with `Retry-After`.
    InFlight {
        /// Milliseconds until a retry may be answered otherwise.
        retry_after_ms: u64,
        /// What the client is told.
        message: &'static str,
    },
    /// `409 idempotency_previous_failed`.
    PreviousFailed,
    /// `503 idempotency_store_unavailable`, `Retry-After: 1`: the store did not answer, or
    /// cannot be connected to on a fail-closed route. Nothing ran.
    StoreUnavailable,
    /// `503 idempotency_store_unavailable`, `Retry-After: 30`: the key's stored answer cannot be
    /// decrypted here. It ran once and is not run again.
    StoreUnreadable,
    /// `503 database_unavailable`: an untracked request's transaction could not begin.
    DatabaseUnavailable,
    /// The body could not be read or parsed (`400`, `413`, `415`, `422`, with `code`).
    Body {
        /// The status.
        status: StatusCode,
        /// `invalid_body`, `invalid_json`, `payload_too_large` or `unsupported_media_type`.
        code: &'static str,
        /// What was wrong.
        message: String,
    },
}

impl Refusal {
    /// Every code the mechanism's own refusals carry (the body's codes belong to any route
    /// with a JSON body).
    pub const CODES: &'static [&'static str] = &[
        KEY_INVALID,
        "idempotency_key_required",
        "idempotency_key_body_mismatch",
        "idempotency_in_flight",
        "idempotency_previous_failed",
        "idempotency_store_unavailable",
        "database_unavailable",
    ];

    /// The error code, `None` for a replay.
    pub fn code(&self) -> Option<&'static str> {
        Some(match self {
            Self::Replay(_) => return None,
            Self::KeyInvalid(_) => KEY_INVALID,
            Self::KeyRequired => "idempotency_key_required",
            Self::BodyMismatch => "idempotency_key_body_mismatch",
            Self::InFlight { .. } => "idempotency_in_flight",
            Self::PreviousFailed => "idempotency_previous_failed",
            Self::StoreUnavailable | Self::StoreUnreadable => "idempotency_store_unavailable",
            Self::DatabaseUnavailable => "database_unavailable",
            Self::Body { code, .. } => code,
        })
    }

    /// A body that could not be read or parsed.
    pub(crate) fn body(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self::Body {
            status,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Self::Replay(stored) => stored.replay(),
            Self::KeyInvalid(err) => error_response(
                StatusCode::BAD_REQUEST,
                json!({ "error": KEY_INVALID, "message": err.to_string() }),
            ),
            Self::KeyRequired => error_response(
                StatusCode::BAD_REQUEST,
                error_body(
                    "idempotency_key_required",
                    "this route requires an Idempotency-Key header",
                ),
            ),
            Self::BodyMismatch => error_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                error_body(
                    "idempotency_key_body_mismatch",
                    "this Idempotency-Key was used with a different request",
                ),
            ),
            Self::InFlight {
                retry_after_ms,
                message,
            } => in_flight(retry_after_ms, message),
            Self::PreviousFailed => error_response(
                StatusCode::CONFLICT,
                error_body(
                    "idempotency_previous_failed",
                    "the earlier request with this Idempotency-Key failed; use a new key",
                ),
            ),
            Self::StoreUnavailable => store_unavailable(),
            Self::StoreUnreadable => store_unreadable(),
            Self::DatabaseUnavailable => error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                error_body(
                    "database_unavailable",
                    "the database is unavailable; retry later",
                ),
            ),
            Self::Body {
                status,
                code,
                message,
            } => error_response(status, error_body(code, &message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_serialised_once_as_its_own_text() {
        #[derive(Serialize)]
        struct Order {
            symbol: &'static str,
            qty: u32,
        }
        let reply = Reply::json(
            StatusCode::CREATED,
            &Order {
                symbol: "AAPL",
                qty: 3,
            },
        );
        assert_eq!(reply.body().get(), r#"{"symbol":"AAPL","qty":3}"#);
    }

    /// Postgres `jsonb` cannot hold U+0000: a reply echoing one carries U+FFFD instead, in
    /// strings and in keys, so what is sent is what can be stored; the text `\u0000` itself
    /// (an escaped backslash) is left alone.
    #[test]
    fn nul_characters_are_replaced_and_only_they() {
        let reply = Reply::json(
            StatusCode::OK,
            &json!({ "a\u{0}b": ["x\u{0}y"], "literal": "\\u0000" }),
        );
        let text = reply.body().get();
        let sent: Value = serde_json::from_str(text).expect("json");
        assert_eq!(
            sent,
            json!({ "a\u{fffd}b": ["x\u{fffd}y"], "literal": "\\u0000" })
        );
        let literal = Reply::json(StatusCode::OK, &json!({ "literal": "\\u0000" }));
        assert_eq!(literal.body().get(), r#"{"literal":"\\u0000"}"#);
    }

    #[test]
    fn the_replay_marker_is_the_last_member() {
        assert_eq!(
            with_marker(r#"{"symbol":"AAPL","id":"o1"}"#),
            r#"{"symbol":"AAPL","id":"o1","idempotency_replayed":true}"#
        );
        assert_eq!(with_marker("{ }"), r#"{"idempotency_replayed":true}"#);
        assert_eq!(with_marker("[1,2]"), "[1,2]");
        assert_eq!(
            with_marker(r#"{"idempotency_replayed":false,"id":"o1"}"#),
            r#"{"id":"o1","idempotency_replayed":true}"#
        );
    }
}
