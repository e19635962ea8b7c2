//! `raptor_idempotency_keyless_requests_total{endpoint, client}`: requests to instrumented
//! routes that carry no `Idempotency-Key`, by route and client, so operators can see who would
//! be refused before they require keys (docs/operations.md).
//!
//! `client` is the `User-Agent` product token (before the first `/` or space), lower-cased,
//! restricted to `a-z 0-9 . _ -` and 32 characters; `unknown` when there is none. The label's
//! cardinality is bounded: the first [`MAX_CLIENTS`] distinct tokens a process sees get their
//! own value, later ones count as `other`.

use std::collections::HashSet;
use std::sync::Mutex;

use axum::http::{header, HeaderMap};

/// Distinct `client` label values per process (besides `unknown` and `other`).
pub(crate) const MAX_CLIENTS: usize = 20;
/// Longest `client` label value.
pub(crate) const MAX_CLIENT_LEN: usize = 32;

/// The clients that own a label value, one set per [`Idempotency`](crate::Idempotency).
#[derive(Debug, Default)]
pub(crate) struct KeylessCounter {
    clients: Mutex<HashSet<String>>,
}

impl KeylessCounter {
    /// Counts one keyless request to `endpoint`.
    pub(crate) fn record(&self, endpoint: &str, headers: &HeaderMap) {
        let client = self.label(product_token(headers));
        metrics::counter!(
            "raptor_idempotency_keyless_requests_total",
            "endpoint" => endpoint.to_owned(),
            "client" => client,
        )
        .increment(1);
    }

    fn label(&self, token: Option<String>) -> String {
        let Some(token) = token else {
            return "unknown".to_owned();
        };
        // A poisoned lock only means another request panicked while inserting a string.
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if clients.contains(&token) {
            return token;
        }
        if clients.len() < MAX_CLIENTS {
            clients.insert(token.clone());
            return token;
        }
        "other".to_owned()
    }
}

/// The `User-Agent`'s product token, normalised; `None` when missing or empty after it.
fn product_token(headers: &HeaderMap) -> Option<String> {
    let agent = headers.get(header::USER_AGENT)?.as_bytes();
    let token: String = agent
        .iter()
        .take_while(|&&b| b != b'/' && !b.is_ascii_whitespace())
        .map(u8::to_ascii_lowercase)
        .filter(|&b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
        .take(MAX_CLIENT_LEN)
        .map(char::from)
        .collect();
    (!token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn token(agent: &[u8]) -> Option<String> {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::USER_AGENT,
            HeaderValue::from_bytes(agent).expect("header value"),
        );
        product_token(&headers)
    }

    #[test]
    fn product_token_is_normalised() {
        assert_eq!(
            token(b"Antlers-iOS/2.3.1 (iPhone)").as_deref(),
            Some("antlers-ios")
        );
        assert_eq!(token(b"curl/8.5.0").as_deref(), Some("curl"));
        assert_eq!(
            token(b"python-requests").as_deref(),
            Some("python-requests")
        );
        assert_eq!(token(b"My Tool").as_deref(), Some("my"));
        assert_eq!(token(b"we{ird}\"x/1").as_deref(), Some("weirdx"));
        assert_eq!(token(b"/1.0"), None);
        assert_eq!(token(b"{}"), None);
        assert_eq!(token(&[b'a'; 100]).map(|t| t.len()), Some(MAX_CLIENT_LEN));
        assert_eq!(product_token(&HeaderMap::new()), None);
    }

    #[test]
    fn cardinality_is_bounded() {
        let counter = KeylessCounter::default();
        assert_eq!(counter.label(None), "unknown");
        for i in 0..MAX_CLIENTS {
            assert_eq!(counter.label(Some(format!("c{i}"))), format!("c{i}"));
        }
        assert_eq!(counter.label(Some("late".into())), "other");
        assert_eq!(
            counter.label(Some("c3".into())),
            "c3",
            "admitted ones keep their label"
        );
    }
}
