//! Responses: what a handler hands to [`Claim::finish`](crate::Claim::finish), what is stored,
//! and the JSON error bodies this crate answers with itself.

use axum::http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{json, Value};

/// Response header marking a replay (`true`) or a fresh execution (`false`).
pub const REPLAYED_HEADER: HeaderName = HeaderName::from_static("idempotent-replayed");

/// A handler's successful (or business-rejected) answer: status, JSON body, optional `Location`.
#[derive(Debug, Clone)]
pub struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) body: Value,
    pub(crate) location: Option<String>,
}

impl Reply {
    /// A JSON reply. A body that cannot be serialised becomes a 500 error body (and so is rolled
    /// back by [`Claim::finish`](crate::Claim::finish)).
    pub fn json(status: StatusCode, body: &impl Serialize) -> Self {
        match serde_json::to_value(body) {
            Ok(mut body) => {
                strip_nul(&mut body);
                Self {
                    status,
                    body,
                    location: None,
                }
            }
            Err(err) => {
                tracing::error!(error = %err, "response body failed to serialise");
                Self {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    body: error_body("internal", "internal server error"),
                    location: None,
                }
            }
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

    /// The JSON body.
    pub fn body(&self) -> &Value {
        &self.body
    }

    pub(crate) fn into_response_with(self, replayed: Option<bool>) -> Response {
        let mut headers = HeaderMap::new();
        if let Some(location) = self.location.and_then(|l| HeaderValue::from_str(&l).ok()) {
            headers.insert(header::LOCATION, location);
        }
        if let Some(replayed) = replayed {
            headers.insert(
                REPLAYED_HEADER,
                HeaderValue::from_static(bool_str(replayed)),
            );
        }
        (self.status, headers, axum::Json(self.body)).into_response()
    }
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
pub(crate) fn in_flight(retry_after_ms: u64, message: &str) -> Response {
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
pub(crate) fn store_unavailable() -> Response {
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
pub(crate) fn store_unreadable() -> Response {
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

/// A stored response as read back from `idempotency_keys`.
#[derive(Debug, Clone)]
pub(crate) struct StoredResponse {
    pub(crate) code: i16,
    pub(crate) body: Option<Value>,
    pub(crate) headers: Option<Value>,
}

impl StoredResponse {
    /// The replay: stored status, stored body plus `"idempotency_replayed": true`, stored
    /// `Content-Type` and `Location`, and `Idempotent-Replayed: true`.
    pub(crate) fn replay(self) -> Response {
        let status = u16::try_from(self.code)
            .ok()
            .and_then(|c| StatusCode::from_u16(c).ok())
            .unwrap_or(StatusCode::OK);
        let mut body = self.body.unwrap_or_else(|| json!({ "body_stored": false }));
        if let Value::Object(map) = &mut body {
            map.insert("idempotency_replayed".into(), Value::Bool(true));
        }
        let mut response = (status, axum::Json(body)).into_response();
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

/// A response that ends an instrumented request before its handler runs: a replay, or a 4xx or
/// 503 from the mechanism. Boxed, because responses are large and this travels in `Result`s.
#[derive(Debug)]
pub struct Rejection(Box<Response>);

impl From<Response> for Rejection {
    fn from(response: Response) -> Self {
        Self(Box::new(response))
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        *self.0
    }
}
