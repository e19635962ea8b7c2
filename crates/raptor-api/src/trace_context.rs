//! W3C trace context in and out: an incoming `traceparent` (and `tracestate`) makes the request
//! span its child, and the Stripe calls carry the current span's `traceparent` on.
//!
//! Only while spans are exported ([`set_exporting`], called by the binary when it installs its
//! OpenTelemetry layer); otherwise both are skipped after one relaxed atomic load, so a server
//! without traces reads no header and builds no context. The propagator is OpenTelemetry's
//! global one (the binary sets W3C trace context).

use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};
use tracing_opentelemetry::OpenTelemetrySpanExt;

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Marks spans as exported from now on (the process has an OpenTelemetry layer).
pub fn set_exporting() {
    EXPORTING.store(true, Ordering::Relaxed);
}

/// Whether spans are exported.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

struct Incoming<'a>(&'a HeaderMap);

impl Extractor for Incoming<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct Outgoing<'a>(&'a mut HeaderMap);

impl Injector for Outgoing<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

/// Makes `span` (not entered yet) a child of the caller's span named by `headers`'
/// `traceparent`/`tracestate`. A missing or malformed `traceparent` leaves it a root.
pub(crate) fn adopt_parent(span: &tracing::Span, headers: &HeaderMap) {
    if !exporting() || !headers.contains_key("traceparent") {
        return;
    }
    let parent = opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&Incoming(headers))
    });
    // Only fails when no OpenTelemetry layer is installed or the span has started.
    let _ = span.set_parent(parent);
}

/// The `traceparent` (and `tracestate`) of the current span, for an outgoing request; empty
/// when spans are not exported.
pub(crate) fn outgoing_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    if exporting() {
        let context = tracing::Span::current().context();
        opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.inject_context(&context, &mut Outgoing(&mut headers));
        });
    }
    headers
}
