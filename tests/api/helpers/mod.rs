//! The harness of every test. [`TestApp::run`] opens the real router on the test's fresh,
//! migrated database, runs the test's body with it and then closes every pool the test opened,
//! so that `#[sqlx::test]` can drop the database. Requests go in-process (`oneshot`) or through
//! a real server on port 0.
//!
//! - [`db`]: probes of the database (counts, a key's status, the outbox), as methods of `TestApp`;
//! - [`bodies`]: request bodies ([`Order`], [`label`]);
//! - [`calls`]: typed calls of the routes, and [`assert_problem`], the one matcher of error
//!   answers;
//! - [`cli`]: the `raptor` command line against the test's database.
//!
//! The tests reach the service's crates through here where they can, so that a change of those
//! APIs lands in one place.

mod bodies;
mod calls;
mod cli;
mod db;
pub(crate) mod peers;
mod scrape;
pub(crate) mod test_ca;
pub(crate) mod tls_pg;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use chrono::{DateTime, TimeZone, Utc};
use http_body_util::BodyExt;
use raptor_api::accounts::store as accounts;
use raptor_api::auth::Role;
use raptor_api::{ApiConfig, ApiState, FixedClock};
use raptor_idempotency::IdempotencyConfig;
use rust_decimal::Decimal;
use serde_json::Value;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use tokio::sync::oneshot;
use tower::ServiceExt;
use uuid::Uuid;

pub(crate) use bodies::{label, Order};
pub(crate) use calls::{assert_problem, IDEMPOTENCY_FLAG, PROBLEM_JSON};
pub(crate) use cli::{cli, post_keyed_order, raptor, raptor_ok};
/// The migrations every `#[sqlx::test]` applies.
pub(crate) use raptor_db::MIGRATOR;
pub(crate) use scrape::{count, metric};

/// 2026-12-01 15:00 UTC: the clock of every test app.
pub(crate) fn test_now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 15, 0, 0)
        .single()
        .expect("valid date")
}

/// Settings of a test app.
#[derive(Clone)]
pub(crate) struct Options {
    pub(crate) api: ApiConfig,
    pub(crate) idempotency: IdempotencyConfig,
    pub(crate) extra: Router<ApiState>,
    pub(crate) pool_size: u32,
    pub(crate) now: DateTime<Utc>,
    /// Point the idempotency store's pool at a port where nothing listens: the "store
    /// unreachable" case (business transactions still use the test database).
    pub(crate) unreachable_store: bool,
    /// `lock_timeout` and `statement_timeout` of the app pool's sessions, as `raptor serve`
    /// sets them from `RAPTOR_DB_*_TIMEOUT_MS` (none by default in tests).
    pub(crate) db_timeouts: Option<(Duration, Duration)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            api: ApiConfig::default(),
            idempotency: IdempotencyConfig {
                stale_after: Duration::from_secs(30),
                store_timeout: Duration::from_millis(2000),
                flag_default: true,
                ..IdempotencyConfig::default()
            },
            extra: crate::probe::routes(),
            pool_size: 16,
            now: test_now(),
            unreachable_store: false,
            db_timeouts: None,
        }
    }
}

impl Options {
    /// These options with the idempotency store's timeout at `timeout`.
    pub(crate) fn store_timeout(mut self, timeout: Duration) -> Self {
        self.idempotency.store_timeout = timeout;
        self
    }

    /// These options with the idempotency stale threshold at `after`.
    pub(crate) fn stale_after(mut self, after: Duration) -> Self {
        self.idempotency.stale_after = after;
        self
    }
}

/// One response, body parsed as JSON (`Value::Null` when empty or not JSON).
#[derive(Debug, Clone)]
pub(crate) struct TestResponse {
    /// The request's method and path, for failure messages.
    pub(crate) request: String,
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Value,
    pub(crate) text: String,
}

impl TestResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `id` member of the body (an order's, a probe item's).
    pub(crate) fn id(&self) -> String {
        self.body["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no id in {}", self.request, self.text))
            .to_owned()
    }

    /// The body without the replay marker and, on an error, without its `instance` (the
    /// request id of that occurrence), for comparing an original with its replay.
    pub(crate) fn body_without_marker(&self) -> Value {
        let mut body = self.body.clone();
        if let Value::Object(map) = &mut body {
            map.remove("idempotency_replayed");
            map.remove("instance");
        }
        body
    }
}

/// A request under construction.
pub(crate) struct Call {
    method: Method,
    path: String,
    token: Option<String>,
    keys: Vec<String>,
    body: Option<Vec<u8>>,
    content_type: Option<&'static str>,
    headers: Vec<(String, Vec<u8>)>,
}

impl Call {
    pub(crate) fn new(method: Method, path: impl Into<String>) -> Self {
        Self {
            method,
            path: path.into(),
            token: None,
            keys: Vec::new(),
            body: None,
            content_type: None,
            headers: Vec::new(),
        }
    }

    pub(crate) fn token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    pub(crate) fn key(mut self, key: impl ToString) -> Self {
        self.keys.push(key.to_string());
        self
    }

    /// [`Call::key`] when there is a key.
    pub(crate) fn maybe_key(self, key: impl Into<Option<Uuid>>) -> Self {
        match key.into() {
            Some(key) => self.key(key),
            None => self,
        }
    }

    pub(crate) fn json(mut self, body: &Value) -> Self {
        self.body = Some(serde_json::to_vec(body).expect("json"));
        self.content_type = Some("application/json");
        self
    }

    pub(crate) fn raw(
        mut self,
        body: impl Into<Vec<u8>>,
        content_type: Option<&'static str>,
    ) -> Self {
        self.body = Some(body.into());
        self.content_type = content_type;
        self
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .push((name.to_owned(), value.as_bytes().to_vec()));
        self
    }

    /// A header whose value is raw bytes (not necessarily text).
    pub(crate) fn header_bytes(mut self, name: &str, value: Vec<u8>) -> Self {
        self.headers.push((name.to_owned(), value));
        self
    }

    fn request(self) -> Request<Body> {
        let mut builder = Request::builder().method(self.method).uri(self.path);
        if let Some(token) = self.token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        for key in self.keys {
            builder = builder.header("idempotency-key", key);
        }
        if let Some(ct) = self.content_type {
            builder = builder.header("content-type", ct);
        }
        for (name, value) in self.headers {
            let value = axum::http::HeaderValue::from_bytes(&value).expect("header value");
            builder = builder.header(name, value);
        }
        builder
            .body(self.body.map_or_else(Body::empty, Body::from))
            .expect("request")
    }
}

/// The real router and its state on the test's database. Only [`TestApp::run`] and
/// [`TestApp::replica`] make one, so every pool a test opens is one the harness closes.
pub(crate) struct TestApp {
    /// The app's own pool (sized for concurrency tests).
    pub(crate) pool: PgPool,
    pub(crate) state: ApiState,
    pub(crate) router: Router,
    /// The pool `#[sqlx::test]` gave the test: replicas connect with its options.
    database: PgPool,
    /// What the harness closes after the body: the pools of this app, of its replicas, and those
    /// the body handed over.
    opened: Arc<Mutex<Vec<PgPool>>>,
}

impl TestApp {
    /// Opens an app with `options` on `pool`'s database, runs `body` with it, then closes the
    /// app's pools and every pool its replicas opened or the body handed over. A body that
    /// panics fails the test with nothing closed; `#[sqlx::test]` keeps a failed test's database
    /// for inspection anyway.
    pub(crate) async fn run(pool: &PgPool, options: Options, body: impl AsyncFnOnce(&TestApp)) {
        let app = Self::open(pool, options, Arc::default()).await;
        body(&app).await;
        app.close().await;
    }

    /// Another process of the service on the same database, with its own pools, clock and
    /// settings; the harness closes it with the app.
    pub(crate) async fn replica(&self, options: Options) -> TestApp {
        Self::open(&self.database, options, self.opened.clone()).await
    }

    /// Hands `pool` to the harness, which closes it after the body, before the app's own.
    pub(crate) fn close_after(&self, pool: PgPool) {
        self.opened.lock().expect("pools").push(pool);
    }

    /// The router of another process of the service on this database whose idempotency store
    /// is reached through `store` (e.g. a pool pointed at a stand-in peer), with this app's
    /// settings; every pool it opens is closed with the app.
    pub(crate) fn with_store(&self, store: PgPool) -> Router {
        let state = ApiState::with_store_pool(
            self.pool.clone(),
            store,
            self.state.config.clone(),
            Options::default().idempotency,
            self.state.clock.clone(),
        );
        for pool in [
            state.idempotency.store_pool(),
            state.idempotency.flag_pool(),
            &state.readiness().database,
            &state.readiness().store,
        ] {
            self.close_after(pool.clone());
        }
        raptor_api::app_with(state, crate::probe::routes())
    }

    async fn open(database: &PgPool, options: Options, opened: Arc<Mutex<Vec<PgPool>>>) -> Self {
        let mut connect = (*database.connect_options()).clone();
        if let Some((lock, statement)) = options.db_timeouts {
            connect = connect.options([
                ("lock_timeout", format!("{}ms", lock.as_millis())),
                ("statement_timeout", format!("{}ms", statement.as_millis())),
            ]);
        }
        let pool = PgPoolOptions::new()
            .max_connections(options.pool_size)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(connect)
            .await
            .expect("app pool");
        crate::probe::create_table(&pool).await;
        let clock = Arc::new(FixedClock(options.now));
        let state = if options.unreachable_store {
            // Port 1 on loopback: connections are refused at once.
            let dead = (*pool.connect_options()).clone().port(1);
            let store = PgPoolOptions::new()
                .max_connections(2)
                .acquire_timeout(Duration::from_millis(500))
                .connect_lazy_with(dead);
            ApiState::with_store_pool(pool.clone(), store, options.api, options.idempotency, clock)
        } else {
            // As in production: the store's own small pool, with the claim's session settings.
            ApiState::new(pool.clone(), options.api, options.idempotency, clock)
        };
        let router = raptor_api::app_with(state.clone(), options.extra);
        {
            let mut opened = opened.lock().expect("pools");
            opened.push(pool.clone());
            opened.push(state.idempotency.store_pool().clone());
            opened.push(state.idempotency.flag_pool().clone());
            opened.push(state.readiness().database.clone());
            opened.push(state.readiness().store.clone());
            opened.push(state.trade_streams().listen_pool().clone());
        }
        Self {
            pool,
            state,
            router,
            database: database.clone(),
            opened,
        }
    }

    /// Closes every pool handed to the harness, the last opened first, so that the test
    /// database can be dropped.
    async fn close(self) {
        let pools = std::mem::take(&mut *self.opened.lock().expect("pools"));
        for pool in pools.into_iter().rev() {
            pool.close().await;
        }
    }

    /// Sends one request through the router in-process.
    pub(crate) async fn send(&self, call: Call) -> TestResponse {
        send(self.router.clone(), call).await
    }

    pub(crate) async fn get(&self, path: &str, token: &str) -> TestResponse {
        self.send(Call::new(Method::GET, path).token(token)).await
    }

    /// POSTs `body` as JSON, with `key` as its Idempotency-Key when there is one.
    pub(crate) async fn post(
        &self,
        path: &str,
        token: &str,
        key: impl Into<Option<Uuid>>,
        body: &Value,
    ) -> TestResponse {
        self.send(
            Call::new(Method::POST, path)
                .token(token)
                .maybe_key(key)
                .json(body),
        )
        .await
    }

    /// A user (with its paper account) and its token.
    pub(crate) async fn user(&self, email: &str) -> (i32, String) {
        self.user_with_role(email, Role::User).await
    }

    /// An operator (with its paper account) and its token.
    pub(crate) async fn operator(&self, email: &str) -> (i32, String) {
        self.user_with_role(email, Role::Operator).await
    }

    pub(crate) async fn user_with_role(&self, email: &str, role: Role) -> (i32, String) {
        let mut tx = self.pool.begin().await.expect("begin");
        let created = accounts::create_user(
            &mut tx,
            email,
            role,
            self.state.config.paper_starting_cash,
            self.state.config.session_ttl,
        )
        .await
        .expect("create user");
        tx.commit().await.expect("commit");
        (created.user_id, created.token)
    }

    pub(crate) async fn service_token(&self, name: &str) -> String {
        let mut tx = self.pool.begin().await.expect("begin");
        let token = accounts::create_service_token(&mut tx, name)
            .await
            .expect("service token");
        tx.commit().await.expect("commit");
        token
    }

    pub(crate) async fn quote(&self, symbol: &str, bid: &str, ask: &str) -> Value {
        let quote =
            raptor_api::trading::set_quote(&self.state, None, symbol, dec(bid), dec(ask), None)
                .await
                .expect("set quote");
        serde_json::to_value(quote).expect("json")
    }

    /// Binds 127.0.0.1:0 first, then serves: no sleeping for readiness.
    pub(crate) async fn spawn(&self) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = oneshot::channel::<()>();
        let router = self.router.clone();
        let task = tokio::spawn(async move {
            raptor_server::serve(listener, router, async {
                let _ = rx.await;
            })
            .await
        });
        Server {
            addr,
            shutdown: Some(tx),
            task,
            client: reqwest::Client::builder()
                .pool_max_idle_per_host(128)
                .build()
                .expect("client"),
        }
    }
}

pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    pub(crate) task: tokio::task::JoinHandle<std::io::Result<()>>,
    pub(crate) client: reqwest::Client,
}

impl Server {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// POSTs `body` as JSON over HTTP, with `key` as its Idempotency-Key when there is one.
    pub(crate) async fn post(
        &self,
        path: &str,
        token: &str,
        key: impl Into<Option<Uuid>>,
        body: &Value,
    ) -> TestResponse {
        post_http(
            self.client.clone(),
            self.url(path),
            token.to_owned(),
            key.into(),
            body.clone(),
        )
        .await
    }

    /// Stops accepting, lets in-flight requests finish, and waits for the server.
    pub(crate) async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.await.expect("join").expect("serve");
    }

    pub(crate) fn trigger_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Sends one request through `router` in-process (usable from spawned tasks).
pub(crate) async fn send(router: Router, call: Call) -> TestResponse {
    let request = format!("{} {}", call.method, call.path);
    let response = router.oneshot(call.request()).await.expect("infallible");
    read_response(request, response).await
}

/// `response` read whole, as a [`TestResponse`] of `request` (its method and path).
pub(crate) async fn read_response(
    request: String,
    response: axum::response::Response,
) -> TestResponse {
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    TestResponse {
        request,
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        text,
    }
}

/// POSTs JSON over real HTTP.
pub(crate) async fn post_http(
    client: reqwest::Client,
    url: String,
    token: String,
    key: Option<Uuid>,
    body: Value,
) -> TestResponse {
    post_http_with(client, url, token, key, body, Vec::new()).await
}

/// [`post_http`] with extra headers.
pub(crate) async fn post_http_with(
    client: reqwest::Client,
    url: String,
    token: String,
    key: Option<Uuid>,
    body: Value,
    headers: Vec<(&'static str, String)>,
) -> TestResponse {
    let described = format!("POST {url}");
    let mut request = client.post(url).bearer_auth(token).json(&body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if let Some(key) = key {
        request = request.header("idempotency-key", key.to_string());
    }
    read_http(described, request.send().await.expect("send")).await
}

/// A response received over real HTTP, as a [`TestResponse`] (`request` describes the request).
pub(crate) async fn read_http(request: String, response: reqwest::Response) -> TestResponse {
    let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
    let mut headers = HeaderMap::new();
    for (name, value) in response.headers() {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(name.as_str().as_bytes()),
            axum::http::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.insert(name, value);
        }
    }
    let text = response.text().await.expect("text");
    TestResponse {
        request,
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    }
}

/// The URL of `pool`'s database (for the CLI and for child processes).
pub(crate) fn database_url(pool: &PgPool) -> String {
    let options = pool.connect_options();
    format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().expect("database name"),
    )
}

pub(crate) fn dec(text: &str) -> Decimal {
    text.parse().expect("decimal")
}
