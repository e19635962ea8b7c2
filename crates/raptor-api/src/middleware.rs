//! Cross-cutting HTTP layers: request ids, the request span, latency metrics, CORS, limits,
//! timeouts, panics, and the safety net that turns any non-JSON error into the JSON envelope.

use std::time::{Duration, Instant};

use axum::body::{Body, HttpBody};
use axum::extract::{MatchedPath, Request};
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::request_id::PropagateRequestIdLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::audit::REQUEST_ID;
use crate::auth::SeenUser;
use crate::state::ApiConfig;

/// The request id header, in and out.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Wraps `router` in every layer. `Router::layer` wraps each route (and the fallback); the last
/// layer added is the outermost, so this reads from the inside out.
pub fn layers(router: Router, config: &ApiConfig) -> Router {
    router
        .layer(axum::extract::DefaultBodyLimit::max(config.body_limit))
        .layer(axum::middleware::from_fn(record_latency))
        .layer(RequestBodyLimitLayer::new(config.body_limit))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            config.request_timeout,
        ))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(axum::middleware::from_fn(scope_request_id))
        .layer(axum::middleware::from_fn(json_errors))
        .layer(cors(&config.cors_origins))
        .layer(axum::middleware::from_fn(access_log))
        .layer(axum::middleware::from_fn_with_state(
            config.trusted_proxies.clone(),
            crate::client_addr::resolve,
        ))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID_HEADER))
        // The span only: `access_log` writes the one line per request.
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(make_span)
                .on_request(())
                .on_response(())
                .on_failure(()),
        )
        .layer(axum::middleware::from_fn(request_ids))
}

/// While the process drains (from SIGTERM on), every answer says `Connection: close`: a client
/// on a kept-alive connection opens its next one where the load balancer now sends it, instead
/// of reusing this one just as the listener closes.
pub(crate) async fn close_when_draining(
    axum::extract::State(state): axum::extract::State<crate::state::ApiState>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = next.run(request).await;
    if state.is_draining() {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The longest client-supplied request id that is kept.
pub const MAX_CLIENT_REQUEST_ID: usize = 128;

/// The server's own id of a request (a UUID), stamped on its audit rows whatever the client
/// sent as `x-request-id`.
#[derive(Debug, Clone)]
pub struct ServerRequestId(pub String);

/// Whether a client's `x-request-id` is kept: 1 to [`MAX_CLIENT_REQUEST_ID`] printable ASCII
/// characters, no spaces. Anything else is replaced by a generated id, so logs never carry
/// a client's control characters or megabytes.
fn acceptable_request_id(value: &HeaderValue) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_CLIENT_REQUEST_ID
        && bytes.iter().all(u8::is_ascii_graphic)
}

/// Gives every request a server id (a UUID, [`ServerRequestId`]) and an `x-request-id` that
/// the logs, the response and the problem `instance` carry: the client's own when it is
/// acceptable ([`acceptable_request_id`]), else the server id.
async fn request_ids(mut request: Request, next: Next) -> Response {
    let server = uuid::Uuid::new_v4().to_string();
    let client = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .filter(|value| acceptable_request_id(value))
        .cloned();
    let effective = match client {
        Some(client) => client,
        None => HeaderValue::from_str(&server).unwrap_or(HeaderValue::from_static("invalid")),
    };
    request.headers_mut().insert(REQUEST_ID_HEADER, effective);
    request.extensions_mut().insert(ServerRequestId(server));
    next.run(request).await
}

fn make_span(request: &Request<Body>) -> tracing::Span {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    let request_id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let server_request_id = request
        .extensions()
        .get::<ServerRequestId>()
        .map_or("", |id| id.0.as_str());
    let method = method_label(request.method());
    // OpenTelemetry's stable HTTP server attributes (`http.request.method`, `http.route`,
    // `url.path`, `url.scheme`, `http.response.status_code`), plus the request ids.
    let span = tracing::info_span!(
        "http.request",
        http.request.method = method,
        http.request.method_original = tracing::field::Empty,
        http.route = route,
        url.path = request.uri().path(),
        url.scheme = "http",
        request_id,
        server_request_id,
        http.response.status_code = tracing::field::Empty,
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if method == OTHER_METHOD {
        span.record("http.request.method_original", request.method().as_str());
    }
    if crate::trace_context::exporting() {
        // The exported span's name and kind (OpenTelemetry's HTTP conventions), and its parent:
        // the caller's span named by `traceparent`.
        // An unknown method names the span `HTTP {route}`, as the conventions say.
        let name = if method == OTHER_METHOD {
            "HTTP"
        } else {
            method
        };
        span.record(
            "otel.name",
            tracing::field::display(format_args!("{name} {route}")),
        );
        span.record("otel.kind", "server");
        crate::trace_context::adopt_parent(&span, request.headers());
    }
    span
}

fn cors(origins: &[String]) -> CorsLayer {
    let origins: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o.trim()).ok())
        .collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(origins))
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("idempotency-key"),
            REQUEST_ID_HEADER,
            // W3C trace context: a browser's span becomes the request span's parent.
            HeaderName::from_static("traceparent"),
            HeaderName::from_static("tracestate"),
        ])
        .expose_headers([
            HeaderName::from_static("idempotent-replayed"),
            header::RETRY_AFTER,
            REQUEST_ID_HEADER,
            header::LOCATION,
        ])
        .max_age(Duration::from_secs(600))
}

/// Makes the server's request id available to `audit::record` for the whole request.
async fn scope_request_id(request: Request, next: Next) -> Response {
    let id = request
        .extensions()
        .get::<ServerRequestId>()
        .map(|id| id.0.clone())
        .unwrap_or_default();
    REQUEST_ID.scope(id, next.run(request)).await
}

/// One log line per request, inside the request span (method, route, request id): status,
/// latency, the client's address ([`crate::client_addr`]), the user id when one signed in, and
/// the response body's size in bytes when it is known before sending (every JSON answer) at
/// INFO. A 500-class answer other than 503 is an ERROR; a 503 (readiness, a gate, a busy or
/// unavailable database) says "retry", and is a WARN at most, logged where it arose.
async fn access_log(mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    let client = request
        .extensions()
        .get::<crate::client_addr::ClientAddr>()
        .map(|addr| addr.0);
    let seen = SeenUser::default();
    request.extensions_mut().insert(seen.clone());
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let client_addr = client.map(tracing::field::display);
    let user_id = seen.get();
    let span = tracing::Span::current();
    span.record("http.response.status_code", status);
    if response.status().is_server_error() {
        span.record("otel.status_code", "error");
    }
    let bytes = HttpBody::size_hint(response.body()).exact().or_else(|| {
        response
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok())
    });
    if response.status().is_server_error() && response.status() != StatusCode::SERVICE_UNAVAILABLE {
        tracing::error!(
            status,
            latency_ms,
            client_addr,
            user_id,
            bytes,
            "request failed"
        );
    } else {
        tracing::info!(status, latency_ms, client_addr, user_id, bytes, "request");
    }
    response
}

/// What a method is called in metric labels and span names for an unknown one (OpenTelemetry's
/// HTTP conventions).
const OTHER_METHOD: &str = "_OTHER";

/// A request's method as a label: the methods HTTP defines as they are, any other `_OTHER`, so
/// a client sending made-up methods cannot grow the series without bound.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::CONNECT => "CONNECT",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::PATCH => "PATCH",
        _ => OTHER_METHOD,
    }
}

/// Per-route latency histogram, labelled by the matched route (low cardinality) and the method
/// (`method_label`: bounded too).
async fn record_latency(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let response = next.run(request).await;
    metrics::histogram!(
        "raptor_http_request_duration_seconds",
        "method" => method,
        "route" => route,
        "status" => response.status().as_u16().to_string(),
    )
    .record(started.elapsed().as_secs_f64());
    response
}

/// Every error response leaves as RFC 9457 problem details (`crate::problem`): a JSON error
/// body is enriched; anything else (tower-http's 413 and timeout, axum's 405, a panic) is
/// replaced by the envelope, so no client ever sees a plain-text or HTML error. A 401 carries
/// `WWW-Authenticate: Bearer`.
async fn json_errors(request: Request, next: Next) -> Response {
    // A reference-counted copy; read as text only when the response is an error.
    let request_id = request.headers().get(REQUEST_ID_HEADER).cloned();
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.contains("json"));
    let (mut parts, body) = response.into_parts();
    // Error bodies are small; a larger one is not ours and is replaced.
    let bytes = if is_json {
        axum::body::to_bytes(body, 256 * 1024).await.ok()
    } else {
        None
    };
    let parsed = bytes
        .as_ref()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
        .and_then(|v| match v {
            serde_json::Value::Object(map) => Some(map),
            _ => None,
        });
    if let (Some(bytes), Some(map)) = (&bytes, &parsed) {
        if !map.contains_key("error") {
            // Not an error envelope (e.g. `/readyz`'s `{"status": "unavailable"}`): as it was.
            return Response::from_parts(parts, Body::from(bytes.clone()));
        }
    }
    let mut map = parsed.unwrap_or_else(|| {
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::SERVICE_UNAVAILABLE => "request_timeout",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            s if s.is_server_error() => "internal",
            _ => "bad_request",
        };
        let mut map = serde_json::Map::new();
        map.insert("error".into(), code.into());
        map.insert(
            "message".into(),
            status.canonical_reason().unwrap_or("error").into(),
        );
        map
    });
    let request_id = request_id.as_ref().and_then(|v| v.to_str().ok());
    crate::problem::enrich(&mut map, status, request_id);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(crate::problem::CONTENT_TYPE),
    );
    if status == StatusCode::UNAUTHORIZED {
        parts
            .headers
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    // A 503 that waiting does not cure says nothing about retrying (`ErrorCode::retrying_helps`).
    let waiting_helps = map
        .get("error")
        .and_then(serde_json::Value::as_str)
        .and_then(crate::codes::ErrorCode::from_wire)
        .is_none_or(crate::codes::ErrorCode::retrying_helps);
    if status == StatusCode::SERVICE_UNAVAILABLE
        && waiting_helps
        && !parts.headers.contains_key(header::RETRY_AFTER)
    {
        // Every other 503 says when to retry; the request timeout's comes from the timeout
        // layer bare.
        parts
            .headers
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    let body = serde_json::to_vec(&serde_json::Value::Object(map)).unwrap_or_default();
    Response::from_parts(parts, Body::from(body))
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("handler panicked");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        axum::Json(serde_json::json!({ "error": "internal", "message": "internal server error" })),
    )
        .into_response()
}
