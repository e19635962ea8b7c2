//! RFC 9457 problem details: every error body is `application/problem+json` with `type`,
//! `title`, `status`, `detail` and `instance`, next to the stable `error` code, `message`, the
//! code's `retry` advice and the context members clients already read. One function does it, for every error path (API
//! errors, the idempotency crate's replies, replays of stored rejections, the safety net for
//! non-JSON errors): the response middleware calls [`enrich`] on the way out.

use axum::http::StatusCode;
use serde_json::{Map, Value};

/// The media type of error bodies.
pub const CONTENT_TYPE: &str = "application/problem+json";

/// Where a code is explained: its section of `docs/errors.md`, served at `/docs/errors`.
pub fn type_uri(code: &str) -> String {
    format!("/docs/errors#{}", anchor(code))
}

/// The anchor of a code in `docs/errors.md` ([`crate::codes::ErrorCode::anchor`]; a code the
/// table does not know is its own anchor).
pub fn anchor(code: &str) -> &str {
    match crate::codes::ErrorCode::from_wire(code) {
        Some(known) => known.anchor(),
        None => code,
    }
}

/// Adds the problem-details members and the code's `retry` advice to an error body (keeping
/// every other member it has).
pub fn enrich(body: &mut Map<String, Value>, status: StatusCode, request_id: Option<&str>) {
    let code = body
        .get("error")
        .and_then(Value::as_str)
        .unwrap_or("internal")
        .to_owned();
    let detail = body
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned());
    let retry = crate::codes::ErrorCode::from_wire(&code)
        .map_or(crate::codes::Retry::No, crate::codes::ErrorCode::retry);
    body.insert("retry".into(), Value::from(retry.as_str()));
    body.insert("type".into(), Value::from(type_uri(&code)));
    body.insert(
        "title".into(),
        Value::from(status.canonical_reason().unwrap_or("Error")),
    );
    body.insert("status".into(), Value::from(status.as_u16()));
    body.insert("detail".into(), Value::from(detail));
    if let Some(id) = request_id.filter(|id| !id.is_empty()) {
        body.insert("instance".into(), Value::from(format!("urn:request:{id}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn adds_the_members_and_keeps_the_rest() {
        let mut body = json!({ "error": "insufficient_buying_power", "message": "short",
                               "buying_power": "1.00" })
        .as_object()
        .cloned()
        .unwrap_or_default();
        enrich(&mut body, StatusCode::FORBIDDEN, Some("abc"));
        assert_eq!(body["type"], "/docs/errors#insufficient_buying_power");
        assert_eq!(body["title"], "Forbidden");
        assert_eq!(body["status"], 403);
        assert_eq!(body["detail"], "short");
        assert_eq!(body["instance"], "urn:request:abc");
        assert_eq!(body["buying_power"], "1.00");
        assert_eq!(body["error"], "insufficient_buying_power");
        assert_eq!(body["retry"], "no");
        let mut in_flight = serde_json::Map::new();
        in_flight.insert("error".into(), "idempotency_in_flight".into());
        enrich(&mut in_flight, StatusCode::CONFLICT, None);
        assert_eq!(in_flight["retry"], "same_key");
        let mut failed = serde_json::Map::new();
        failed.insert("error".into(), "idempotency_previous_failed".into());
        enrich(&mut failed, StatusCode::CONFLICT, None);
        assert_eq!(failed["retry"], "new_key");
        assert_eq!(
            type_uri("Idempotency-Key must be a UUID string"),
            "/docs/errors#idempotency_key_invalid"
        );
    }
}
