//! Traces: a real `raptor serve` process exports its spans over OTLP/HTTP (protobuf) to a
//! receiver this file runs on a local port (it decodes each export with OpenTelemetry's own
//! message types). An incoming W3C `traceparent` is the request span's parent; the claim, the
//! business transaction, the finish and each Stripe call are its descendants; a Stripe call
//! carries its span's `traceparent`; each sign-in email's SMTP send is a span. Spans still
//! queued at SIGTERM are exported on the way out. Without an endpoint (or with the SDK disabled)
//! no exporter runs and nothing is sent.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::json;
use sqlx::PgPool;
use tokio::process::Child;

use crate::behind_a_proxy::{free_port, start_raptor};
use crate::fake_stripe::{FakeStripe, SECRET_KEY};
use crate::helpers::cli;
use crate::smtp_sink::{SinkOptions, SmtpSink};

/// The caller's trace and span, as its `traceparent` names them.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0c902b71";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{CALLER_SPAN}-01")
}

/// One exported span, with the `service.name` of its resource.
#[derive(Debug, Clone)]
struct Exported {
    service: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    kind: i32,
    /// Its attributes, values as text.
    attributes: Vec<(String, String)>,
}

impl Exported {
    /// The value of attribute `key`, as text.
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// An attribute's value as text.
fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

/// An OTLP/HTTP receiver on 127.0.0.1: every span of every `POST /v1/traces`.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Exported>>>,
    exports: Arc<Mutex<usize>>,
}

impl Receiver {
    async fn start() -> (Self, u16) {
        let receiver = Self::default();
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (receiver, port)
    }

    fn spans(&self) -> Vec<Exported> {
        self.spans.lock().expect("lock").clone()
    }

    fn exports(&self) -> usize {
        *self.exports.lock().expect("lock")
    }

    /// The spans of trace `trace_id`.
    fn trace(&self, trace_id: &str) -> Vec<Exported> {
        self.spans()
            .into_iter()
            .filter(|span| span.trace_id == trace_id)
            .collect()
    }
}

async fn receive(State(receiver): State<Receiver>, body: Bytes) -> axum::http::StatusCode {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return axum::http::StatusCode::BAD_REQUEST;
    };
    let mut spans = receiver.spans.lock().expect("lock");
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|resource| &resource.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| kv.value.as_ref()?.value.as_ref())
            .map(|value| match value {
                AnyValue::StringValue(name) => name.clone(),
                other => format!("{other:?}"),
            })
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(Exported {
                    service: service.clone(),
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    name: span.name,
                    kind: span.kind,
                    attributes: span
                        .attributes
                        .iter()
                        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                        .collect(),
                });
            }
        }
    }
    *receiver.exports.lock().expect("lock") += 1;
    axum::http::StatusCode::OK
}

/// The one span named `name` among `spans`.
fn one<'a>(spans: &'a [Exported], name: &str) -> &'a Exported {
    let named: Vec<&Exported> = spans.iter().filter(|span| span.name == name).collect();
    let [span] = named.as_slice() else {
        panic!("one span {name:?}, got {named:#?} among {spans:#?}");
    };
    span
}

/// Whether `span` descends from `ancestor` through parents among `spans`.
fn descends_from(spans: &[Exported], span: &Exported, ancestor: &Exported) -> bool {
    let mut parent = span.parent_span_id.clone();
    for _ in 0..spans.len() {
        if parent == ancestor.span_id {
            return true;
        }
        match spans.iter().find(|candidate| candidate.span_id == parent) {
            Some(next) => parent = next.parent_span_id.clone(),
            None => return false,
        }
    }
    false
}

/// The names of the process's threads (`/proc/<pid>/task/*/comm`, 15 bytes at most).
fn thread_names(child: &Child) -> Vec<String> {
    let pid = child.id().expect("running");
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("the process's threads")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

/// Whether the process runs OpenTelemetry's batch span processor (its thread is
/// `OpenTelemetry.Traces.BatchProcessor`).
fn runs_an_exporter(child: &Child) -> bool {
    thread_names(child)
        .iter()
        .any(|name| name.starts_with("OpenTelemetry"))
}

/// SIGTERM, then the graceful shutdown's exit (bounded).
async fn terminate(mut child: Child, log: &Path) {
    let pid = child.id().expect("running");
    let sent = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .expect("kill -TERM");
    assert!(sent.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "raptor did not stop after SIGTERM; log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        })
        .expect("wait");
    assert!(
        status.success(),
        "raptor exited with {status}; log:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// A fresh directory for one test's logs.
fn test_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("raptor-{name}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    dir
}

/// A user with a token, and a quote for AAPL (CLI, before the server starts).
async fn trader_with_a_quote(pool: &PgPool) -> String {
    let created = cli(
        pool,
        &[
            "users",
            "create",
            "--email",
            "trace@example.com",
            "--role",
            "operator",
        ],
    )
    .await
    .expect("user");
    cli(
        pool,
        &[
            "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
        ],
    )
    .await
    .expect("quote");
    created["token"].as_str().expect("token").to_owned()
}

/// A keyed market order with the caller's `traceparent`.
async fn keyed_order(port: u16, token: &str) -> reqwest::StatusCode {
    keyed_order_with(port, token, &traceparent()).await
}

/// A keyed market order with `traceparent` as it is.
async fn keyed_order_with(port: u16, token: &str, traceparent: &str) -> reqwest::StatusCode {
    reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/trading/orders"))
        .bearer_auth(token)
        .header("idempotency-key", uuid::Uuid::new_v4().to_string())
        .header("traceparent", traceparent)
        .header("tracestate", "vendor=opaque")
        .json(&json!({"symbol": "AAPL", "qty": "1", "side": "buy", "type": "market"}))
        .send()
        .await
        .expect("order")
        .status()
}

/// The environment of a server exporting to the receiver on `otlp`. The batch processor waits
/// a minute between exports, so what arrives before SIGTERM is only what shutdown flushed.
fn exporting_to(otlp: u16) -> Vec<(&'static str, String)> {
    vec![
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{otlp}"),
        ),
        ("OTEL_SERVICE_NAME", "raptor-under-test".to_owned()),
        ("OTEL_BSP_SCHEDULE_DELAY", "60000".to_owned()),
        ("RAPTOR_SHUTDOWN_DRAIN_SECS", "0".to_owned()),
        ("RAPTOR_ORDER_EXPIRY_INTERVAL_SECS", "0".to_owned()),
    ]
}

fn as_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect()
}

/// One keyed order sent with a `traceparent`: its spans carry the caller's trace id, the
/// request span (a server span named by method and route) is the child of the caller's span,
/// and the idempotency claim and the business transaction are children of the request span.
/// They arrive when the server shuts down (the batch's delay is a minute). A malformed
/// `traceparent` is ignored (the order is served, its request span is a root). The request span
/// has the stable HTTP attributes; each SQL statement is a client span with the database
/// attributes and no bound value; the request's JSON log lines name the caller's trace id.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_keyed_orders_spans_are_children_of_the_incoming_traceparent(pool: PgPool) {
    let dir = test_dir("traces");
    let token = trader_with_a_quote(&pool).await;
    let (receiver, otlp) = Receiver::start().await;
    let (port, log) = (free_port(), dir.join("raptor.log"));
    let env = exporting_to(otlp);
    let raptor = start_raptor(&pool, port, &log, &as_refs(&env)).await;
    assert!(runs_an_exporter(&raptor), "{:?}", thread_names(&raptor));
    assert_eq!(
        keyed_order(port, &token).await,
        reqwest::StatusCode::CREATED
    );
    // A malformed traceparent is ignored: the order is served and starts a trace of its own.
    assert_eq!(
        keyed_order_with(port, &token, "00-not-a-trace-01").await,
        reqwest::StatusCode::CREATED
    );
    assert!(
        receiver.spans().is_empty(),
        "exported before the batch delay"
    );
    terminate(raptor, &log).await;
    let orders: Vec<Exported> = receiver
        .spans()
        .into_iter()
        .filter(|span| span.name == "POST /api/trading/orders")
        .collect();
    assert_eq!(orders.len(), 2, "{orders:#?}");
    assert!(
        orders
            .iter()
            .any(|span| span.trace_id != TRACE_ID && span.parent_span_id.is_empty()),
        "the malformed traceparent's request is a root: {orders:#?}"
    );

    let spans = receiver.trace(TRACE_ID);
    let request = one(&spans, "POST /api/trading/orders");
    assert_eq!(request.parent_span_id, CALLER_SPAN, "{request:?}");
    assert_eq!(request.kind, SpanKind::Server as i32, "{request:?}");
    assert_eq!(request.service, "raptor-under-test");
    for name in [
        "idempotency.claim",
        "business.transaction",
        "idempotency.finish",
    ] {
        let span = one(&spans, name);
        assert_eq!(span.parent_span_id, request.span_id, "{name}: {spans:#?}");
    }
    for span in spans.iter().filter(|span| span.span_id != request.span_id) {
        assert!(
            descends_from(&spans, span, request),
            "{span:?} in {spans:#?}"
        );
    }
    // The request span carries the stable HTTP attributes, and not the deprecated ones.
    assert_eq!(request.attribute("http.request.method"), Some("POST"));
    assert_eq!(request.attribute("http.route"), Some("/api/trading/orders"));
    assert_eq!(request.attribute("url.path"), Some("/api/trading/orders"));
    assert_eq!(request.attribute("url.scheme"), Some("http"));
    assert_eq!(request.attribute("http.response.status_code"), Some("201"));
    assert_eq!(request.attribute("http.method"), None, "{request:?}");

    // A client span per statement, by the database conventions: the token's lookup, the
    // claim, the order's insert, the transaction's end; none carries a bound value.
    let statements: Vec<&Exported> = spans
        .iter()
        .filter(|span| span.attribute("db.system.name") == Some("postgresql"))
        .collect();
    for name in [
        "SELECT api_tokens",
        "INSERT idempotency_keys",
        "INSERT paper_orders",
        "COMMIT",
    ] {
        assert!(
            statements.iter().any(|span| span.name == name),
            "no {name} span among {statements:#?}"
        );
    }
    let insert = statements
        .iter()
        .find(|span| span.name == "INSERT paper_orders")
        .expect("the order's insert");
    assert_eq!(insert.attribute("db.operation.name"), Some("INSERT"));
    assert_eq!(insert.attribute("db.collection.name"), Some("paper_orders"));
    assert!(
        descends_from(&spans, insert, one(&spans, "business.transaction")),
        "{insert:?} in {spans:#?}"
    );
    for span in &statements {
        assert_eq!(span.kind, SpanKind::Client as i32, "{span:?}");
        for (key, value) in &span.attributes {
            assert!(
                !value.contains(token.as_str()) && !value.contains("AAPL"),
                "{key} of {span:?} carries a bound value"
            );
        }
    }

    // The request's JSON log lines carry the caller's trace id and their span's id.
    let logged = std::fs::read_to_string(&log).expect("log");
    let access = logged
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|line| {
            line["fields"]["message"] == "request"
                && line["span"]["http.route"] == "/api/trading/orders"
                && line["trace_id"] == TRACE_ID
        })
        .unwrap_or_else(|| panic!("no access log line with trace id {TRACE_ID}:\n{logged}"));
    assert_eq!(access["span_id"], request.span_id.as_str(), "{access}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A checkout sent with a `traceparent`: the Stripe call is a client span under the request
/// span, and the request Stripe receives carries that span as its `traceparent` (the caller's
/// trace id, the Stripe span's id).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn stripe_calls_carry_the_traceparent_of_their_span(pool: PgPool) {
    let dir = test_dir("traces-stripe");
    let created = cli(&pool, &["users", "create", "--email", "pay@example.com"])
        .await
        .expect("user");
    let token = created["token"].as_str().expect("token").to_owned();
    let stripe = FakeStripe::start().await;
    let (receiver, otlp) = Receiver::start().await;
    let (port, log) = (free_port(), dir.join("raptor.log"));
    let mut env = exporting_to(otlp);
    env.push(("STRIPE_API_BASE", stripe.base()));
    env.push(("STRIPE_SECRET_KEY", SECRET_KEY.to_owned()));
    let raptor = start_raptor(&pool, port, &log, &as_refs(&env)).await;
    let checkout = reqwest::Client::new()
        .post(format!(
            "http://127.0.0.1:{port}/api/billing/checkout-sessions"
        ))
        .bearer_auth(&token)
        .header("idempotency-key", uuid::Uuid::new_v4().to_string())
        .header("traceparent", traceparent())
        .json(&json!({
            "price_id": "price_premium_monthly",
            "success_url": "https://app.example.com/billing/success",
            "cancel_url": "https://app.example.com/billing",
        }))
        .send()
        .await
        .expect("checkout");
    assert_eq!(checkout.status(), reqwest::StatusCode::CREATED);
    terminate(raptor, &log).await;

    let spans = receiver.trace(TRACE_ID);
    let request = one(&spans, "POST /api/billing/checkout-sessions");
    assert_eq!(request.parent_span_id, CALLER_SPAN);
    let calls: Vec<&Exported> = spans.iter().filter(|s| s.name == "stripe.call").collect();
    assert!(!calls.is_empty(), "no Stripe span in {spans:#?}");
    let recorded = stripe.requests();
    assert_eq!(recorded.len(), calls.len(), "{recorded:#?}");
    for call in &calls {
        assert_eq!(call.kind, SpanKind::Client as i32, "{call:?}");
        assert!(
            descends_from(&spans, call, request),
            "{call:?} in {spans:#?}"
        );
        let expected = format!("00-{TRACE_ID}-{}-01", call.span_id);
        assert!(
            recorded
                .iter()
                .any(|r| r.traceparent.as_deref() == Some(expected.as_str())),
            "no Stripe request carried {expected}: {recorded:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sign-in email sent by the relay inside `serve` is a `mail.relay` span (one per message,
/// none for an idle poll) with the SMTP conversation as its client child `smtp.send`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn each_sign_in_email_send_is_a_span(pool: PgPool) {
    let dir = test_dir("traces-mail");
    let sink = SmtpSink::start(SinkOptions::default()).await;
    let (receiver, otlp) = Receiver::start().await;
    let (port, log) = (free_port(), dir.join("raptor.log"));
    let mut env = exporting_to(otlp);
    env.push(("RAPTOR_SMTP_URL", sink.url()));
    env.push((
        "RAPTOR_MAIL_FROM",
        "Raptor <no-reply@raptor.test>".to_owned(),
    ));
    env.push(("RAPTOR_PUBLIC_URL", "https://app.raptor.test".to_owned()));
    env.push(("RAPTOR_MAIL_RELAY_INTERVAL_MS", "50".to_owned()));
    let raptor = start_raptor(&pool, port, &log, &as_refs(&env)).await;
    let registered = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/api/auth/register"))
        .json(&json!({ "email": "mail-trace@example.com" }))
        .send()
        .await
        .expect("register");
    assert_eq!(registered.status(), reqwest::StatusCode::ACCEPTED);
    sink.wait_for(1).await;
    // Idle polls of the relay meanwhile make no spans of their own.
    tokio::time::sleep(Duration::from_millis(300)).await;
    terminate(raptor, &log).await;

    let spans = receiver.spans();
    let relay = one(&spans, "mail.relay");
    let send = one(&spans, "smtp.send");
    assert_eq!(send.parent_span_id, relay.span_id, "{spans:#?}");
    assert_eq!(send.trace_id, relay.trace_id);
    assert_eq!(send.kind, SpanKind::Client as i32);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without an OTLP endpoint, and with one but `OTEL_SDK_DISABLED=true`, the server runs no
/// exporter (no batch processor thread), says nothing about traces, answers the keyed order
/// with its `traceparent` as usual, and the receiver gets nothing.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn without_an_endpoint_no_exporter_runs_and_nothing_is_exported(pool: PgPool) {
    let dir = test_dir("traces-off");
    let token = trader_with_a_quote(&pool).await;
    let (receiver, otlp) = Receiver::start().await;
    let endpoint = format!("http://127.0.0.1:{otlp}");
    let settings: [Vec<(&str, &str)>; 2] = [
        vec![("OTEL_SERVICE_NAME", "raptor-under-test")],
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SDK_DISABLED", "true"),
        ],
    ];
    for env in settings {
        let (port, log) = (free_port(), dir.join("raptor.log"));
        let mut env = env;
        env.push(("RAPTOR_SHUTDOWN_DRAIN_SECS", "0"));
        let raptor = start_raptor(&pool, port, &log, &env).await;
        assert!(
            !runs_an_exporter(&raptor),
            "{env:?}: {:?}",
            thread_names(&raptor)
        );
        assert_eq!(
            keyed_order(port, &token).await,
            reqwest::StatusCode::CREATED
        );
        terminate(raptor, &log).await;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!text.contains("traces are exported"), "{env:?}: {text}");
        assert!(text.contains("raptor stopped"), "{env:?}: {text}");
    }
    // Both processes have exited: whatever they would have sent has arrived.
    assert_eq!(receiver.exports(), 0, "{:#?}", receiver.spans());
    let _ = std::fs::remove_dir_all(&dir);
}
