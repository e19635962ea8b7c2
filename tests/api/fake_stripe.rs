//! An in-process fake of the four Stripe endpoints the billing module calls, on 127.0.0.1:0.
//! It records every request (path, form fields, Authorization, Idempotency-Key, traceparent),
//! checks the secret key, answers Stripe-shaped JSON, replays the stored answer for a repeated
//! Idempotency-Key (and refuses one reused with other parameters) like Stripe, and can be told
//! to fail or stall.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

/// The secret key the fake accepts.
pub(crate) const SECRET_KEY: &str = "sk_test_fake";

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) path: String,
    pub(crate) form: Vec<(String, String)>,
    pub(crate) authorization: Option<String>,
    pub(crate) idempotency_key: Option<String>,
    /// The `Stripe-Version` the call named.
    pub(crate) stripe_version: Option<String>,
    /// The W3C `traceparent` the call carried (when the server exports traces).
    pub(crate) traceparent: Option<String>,
}

impl Recorded {
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.form
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// What the fake does with requests to paths starting with a prefix.
#[derive(Debug, Clone)]
pub(crate) enum Mode {
    /// Answer `status` with `body`, `times` times (then behave normally).
    Fail {
        status: u16,
        body: Value,
        times: usize,
    },
    /// Sleep, then answer normally (Stripe keeps executing when the client gave up).
    Stall(Duration),
}

#[derive(Default)]
struct Inner {
    requests: Mutex<Vec<Recorded>>,
    /// Idempotency-Key -> (path and form, status, body): Stripe's replay store.
    replays: Mutex<HashMap<String, (String, u16, Value)>>,
    modes: Mutex<Vec<(String, Mode)>>,
    /// Subscriptions the fake knows: id -> object.
    subscriptions: Mutex<HashMap<String, Value>>,
    counter: AtomicU64,
}

pub(crate) struct FakeStripe {
    addr: SocketAddr,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeStripe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeStripe {
    pub(crate) async fn start() -> Self {
        let inner = Arc::new(Inner::default());
        let router = Router::new().fallback(handle).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake stripe");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { addr, inner, task }
    }

    /// `STRIPE_API_BASE` for the app.
    pub(crate) fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.inner.requests.lock().expect("lock").clone()
    }

    /// The requests to `path` exactly.
    /// How many objects the fake created at `path` (replays of a stored key not counted).
    pub(crate) fn created(&self, path: &str) -> usize {
        self.inner
            .replays
            .lock()
            .expect("lock")
            .values()
            .filter(|(fingerprint, _, _)| fingerprint.starts_with(&format!("{path}?")))
            .count()
    }

    pub(crate) fn requests_to(&self, path: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }

    /// Sets the mode of paths starting with `prefix` (replacing an earlier one for it).
    pub(crate) fn set_mode(&self, prefix: &str, mode: Mode) {
        let mut modes = self.inner.modes.lock().expect("lock");
        modes.retain(|(p, _)| p != prefix);
        modes.push((prefix.to_owned(), mode));
    }

    /// Makes a subscription known to the fake (for cancellation).
    pub(crate) fn add_subscription(&self, id: &str, customer: &str, price: &str, period_end: i64) {
        self.inner.subscriptions.lock().expect("lock").insert(
            id.to_owned(),
            json!({
                "id": id, "object": "subscription", "customer": customer, "status": "active",
                "cancel_at_period_end": false, "canceled_at": null,
                "current_period_end": period_end,
                "items": { "object": "list", "data": [
                    { "id": "si_1", "price": { "id": price, "object": "price" },
                      "current_period_end": period_end }
                ]},
            }),
        );
    }
}

fn stripe_error(status: StatusCode, kind: &str, message: &str, param: Option<&str>) -> Response {
    let mut error = json!({ "type": kind, "message": message });
    if let Some(param) = param {
        error["param"] = json!(param);
    }
    (status, axum::Json(json!({ "error": error }))).into_response()
}

async fn handle(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let headers: HeaderMap = request.headers().clone();
    let bytes: Bytes = axum::body::to_bytes(request.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let form = parse_form(&String::from_utf8_lossy(&bytes));
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let recorded = Recorded {
        path: path.clone(),
        form: form.clone(),
        authorization: header("authorization"),
        idempotency_key: header("idempotency-key"),
        stripe_version: header("stripe-version"),
        traceparent: header("traceparent"),
    };
    inner.requests.lock().expect("lock").push(recorded.clone());

    if recorded.authorization.as_deref() != Some(&format!("Bearer {SECRET_KEY}")) {
        return stripe_error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "Invalid API Key provided: sk_****",
            None,
        );
    }

    let mode = inner
        .modes
        .lock()
        .expect("lock")
        .iter_mut()
        .find(|(prefix, _)| path.starts_with(prefix.as_str()))
        .and_then(|(_, mode)| match mode {
            Mode::Fail { times, .. } if *times == 0 => None,
            Mode::Fail {
                status,
                body,
                times,
            } => {
                *times -= 1;
                Some(Mode::Fail {
                    status: *status,
                    body: body.clone(),
                    times: 0,
                })
            }
            stall @ Mode::Stall(_) => Some(stall.clone()),
        });
    match mode {
        Some(Mode::Fail { status, body, .. }) => {
            let status = StatusCode::from_u16(status).expect("status");
            let mut response = (status, axum::Json(body)).into_response();
            if status == StatusCode::TOO_MANY_REQUESTS {
                response
                    .headers_mut()
                    .insert("retry-after", axum::http::HeaderValue::from_static("2"));
            }
            return response;
        }
        Some(Mode::Stall(duration)) => tokio::time::sleep(duration).await,
        None => {}
    }

    // Stripe's idempotency: the same key replays the stored answer; with other parameters it
    // is an error.
    let fingerprint = format!("{path}?{form:?}");
    if let Some(key) = &recorded.idempotency_key {
        if let Some((stored, status, body)) = inner.replays.lock().expect("lock").get(key) {
            if *stored != fingerprint {
                return stripe_error(
                    StatusCode::BAD_REQUEST,
                    "idempotency_error",
                    "Keys for idempotent requests can only be used with the same parameters \
                     they were first used with.",
                    None,
                );
            }
            let mut response = (
                StatusCode::from_u16(*status).expect("status"),
                axum::Json(body.clone()),
            )
                .into_response();
            response.headers_mut().insert(
                "idempotent-replayed",
                axum::http::HeaderValue::from_static("true"),
            );
            return response;
        }
    }

    let n = inner.counter.fetch_add(1, Ordering::SeqCst) + 1;
    let field = |name: &str| recorded.field(name).map(str::to_owned);
    let (status, body) = match path.as_str() {
        "/v1/customers" => (
            200,
            json!({
                "id": format!("cus_fake{n:04}"), "object": "customer",
                "email": field("email"),
                "metadata": { "user_id": field("metadata[user_id]") },
            }),
        ),
        "/v1/checkout/sessions" => (
            200,
            json!({
                "id": format!("cs_test_fake{n:04}"), "object": "checkout.session",
                "mode": field("mode"), "customer": field("customer"),
                "client_reference_id": field("client_reference_id"),
                "success_url": field("success_url"), "cancel_url": field("cancel_url"),
                "status": "open",
                "url": format!("https://checkout.stripe.com/c/pay/cs_test_fake{n:04}"),
            }),
        ),
        "/v1/billing_portal/sessions" => (
            200,
            json!({
                "id": format!("bps_fake{n:04}"), "object": "billing_portal.session",
                "customer": field("customer"), "return_url": field("return_url"),
                "url": format!("https://billing.stripe.com/p/session/test_fake{n:04}"),
            }),
        ),
        other => match other.strip_prefix("/v1/subscriptions/") {
            Some(id) => {
                let mut subscriptions = inner.subscriptions.lock().expect("lock");
                match subscriptions.get_mut(id) {
                    Some(subscription) => {
                        if let Some(cancel) = field("cancel_at_period_end") {
                            subscription["cancel_at_period_end"] = json!(cancel == "true");
                        }
                        (200, subscription.clone())
                    }
                    None => (
                        404,
                        json!({ "error": {
                            "type": "invalid_request_error", "code": "resource_missing",
                            "message": format!("No such subscription: '{id}'"), "param": "id",
                        }}),
                    ),
                }
            }
            None => (
                404,
                json!({ "error": {
                    "type": "invalid_request_error",
                    "message": format!("Unrecognized request URL (POST: {other})"),
                }}),
            ),
        },
    };
    if let Some(key) = recorded.idempotency_key {
        inner
            .replays
            .lock()
            .expect("lock")
            .insert(key, (fingerprint, status, body.clone()));
    }
    (
        StatusCode::from_u16(status).expect("status"),
        axum::Json(body),
    )
        .into_response()
}

/// `application/x-www-form-urlencoded` -> pairs.
fn parse_form(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
