//! Shared state: the pool, typed configuration, the idempotency service and the clock.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRef;
use raptor_idempotency::{Idempotency, IdempotencyConfig};
use rust_decimal::Decimal;
use sqlx::PgPool;

use crate::audit::ReplayAuditor;
pub use crate::billing::stripe::BillingConfig;
pub use crate::clock::{Clock, FixedClock, SystemClock};
pub use crate::sessions::limits::AuthLimits;

/// API settings. The server builds them from the environment; libraries never read it.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// `MBT_NEW_ORDERS_DISABLED`: refuse new orders, rolls and closes (cancels still work).
    /// The default of the run-time flag of that name (`PUT /api/admin/flags/{name}`).
    pub new_orders_disabled: bool,
    /// `RAPTOR_PAPER_STARTING_CASH`: a new or reset paper account's cash.
    pub paper_starting_cash: Decimal,
    /// `RAPTOR_REQUEST_TIMEOUT_SECS`.
    pub request_timeout: Duration,
    /// Largest accepted request body (1 MiB by contract).
    pub body_limit: usize,
    /// `RAPTOR_CORS_ORIGINS`.
    pub cors_origins: Vec<String>,
    /// Fees charged by the paper engine (zero by default, like Alpaca paper).
    pub fees: raptor_engine::FeeSchedule,
    /// `RAPTOR_ACCOUNT_WRITE_CONCURRENCY`: concurrent writes per account in this process.
    pub account_write_concurrency: usize,
    /// `RAPTOR_ACCOUNT_WRITE_WAIT_MS`: how long a write waits for its account's turn (then 429).
    pub account_write_wait: Duration,
    /// `RAPTOR_MAX_OPEN_ORDERS`: open (resting) orders allowed per account.
    pub max_open_orders: usize,
    /// `RAPTOR_SESSION_TTL_DAYS`: lifetime of a session made by sign-up or login.
    pub session_ttl: Duration,
    /// `RAPTOR_SESSION_KEY`: derives a sign-in link's session token (the same on every
    /// verification of the link); a random one when unset.
    pub session_key: crate::sessions::key::SessionKey,
    /// Sign-up and login rate limits.
    pub auth_limits: AuthLimits,
    /// Stripe: API base, keys and the per-call timeout.
    pub billing: BillingConfig,
    /// `RAPTOR_DOCS_ASSETS`: the directory of Swagger UI's files (the `swagger-ui-dist` npm
    /// package) that `/docs` loads; relative to the working directory. Without them `/docs`
    /// answers the built-in route list.
    pub docs_assets: std::path::PathBuf,
    /// `RAPTOR_TRUSTED_PROXIES` and `RAPTOR_FORWARDED_HEADER`: whose forwarding header names
    /// the client (none by default: the TCP peer is the client).
    pub trusted_proxies: crate::client_addr::TrustedProxies,
    /// `RAPTOR_PUBLIC_URL`: the app's base URL, without a trailing slash; sign-in messages
    /// link to `<public_url>/verify?token=…` (sign-up) and `<public_url>/login?token=…`.
    pub public_url: String,
    /// Whether `GET /metrics` is served on the API listener (`RAPTOR_METRICS_ADDR` unset); when
    /// false it answers 404 there and the metrics have a listener of their own.
    pub metrics_on_api_listener: bool,
    /// Open trade-updates streams at most, per user and per process.
    pub trade_streams: crate::trading::stream::StreamLimits,
    /// `RAPTOR_LISTEN_DATABASE_URL`: where the trade-updates listener connects (unset: with
    /// the business pool's options).
    pub trade_streams_listen: Option<crate::trading::stream::ListenTarget>,
}

/// The base of sign-in links when `RAPTOR_PUBLIC_URL` is not set (development: `make run`).
pub const DEFAULT_PUBLIC_URL: &str = "http://127.0.0.1:8080";

/// Where `npm ci` installs Swagger UI in a checkout, relative to the repository root.
pub const DEFAULT_DOCS_ASSETS: &str = "node_modules/swagger-ui-dist";

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            new_orders_disabled: false,
            paper_starting_cash: Decimal::new(10_000_000, 2),
            request_timeout: Duration::from_secs(30),
            body_limit: 1024 * 1024,
            cors_origins: Vec::new(),
            fees: raptor_engine::FeeSchedule::default(),
            account_write_concurrency: 2,
            account_write_wait: Duration::from_secs(2),
            max_open_orders: 500,
            session_ttl: Duration::from_secs(30 * 24 * 60 * 60),
            session_key: crate::sessions::key::SessionKey::random(),
            auth_limits: AuthLimits::default(),
            billing: BillingConfig::default(),
            docs_assets: std::path::PathBuf::from(DEFAULT_DOCS_ASSETS),
            trusted_proxies: crate::client_addr::TrustedProxies::default(),
            public_url: DEFAULT_PUBLIC_URL.to_owned(),
            metrics_on_api_listener: true,
            trade_streams: crate::trading::stream::StreamLimits::default(),
            trade_streams_listen: None,
        }
    }
}

/// Cheap-to-clone handle on everything a handler needs.
#[derive(Clone)]
pub struct ApiState(Arc<ApiInner>);

/// The contents of [`ApiState`].
pub struct ApiInner {
    /// The pool.
    pub db: PgPool,
    /// Settings.
    pub config: ApiConfig,
    /// The idempotency service.
    pub idempotency: Idempotency,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The book's context (the clock, the paper engine, the account limits).
    desk: crate::trading::desk::Desk,
    /// The Stripe client (`None` without `STRIPE_SECRET_KEY`).
    pub stripe: Option<crate::billing::stripe::StripeClient>,
    /// Sign-up and login rate limiters.
    pub auth_limiter: crate::sessions::limits::AuthLimiter,
    /// Per-account write concurrency.
    pub account_writes: Arc<crate::trading::account_writes::AccountWrites>,
    /// Permits of the Stripe-calling routes (`BillingConfig::concurrency`).
    pub billing_permits: Arc<tokio::sync::Semaphore>,
    /// The data exports under way (bounded per user and per process).
    pub(crate) exports: crate::accounts::export_limits::ExportLimits,
    /// Set when shutdown begins: `/readyz` answers 503 from then on.
    draining: std::sync::atomic::AtomicBool,
    /// `/readyz`'s own pools, apart from the request pools.
    readiness: Readiness,
    /// The trading halt (`MBT_NEW_ORDERS_DISABLED`, with its run-time override).
    pub(crate) new_orders_halt: Arc<raptor_db::flag::RuntimeFlag>,
    /// The trade-updates streams of this process.
    trade_streams: Arc<crate::trading::stream::TradeStreams>,
}

/// The pools `/readyz` checks the dependencies with: one connection each, on the business
/// database and on the idempotency store ([`raptor_db::pool::probe`]).
#[derive(Debug, Clone)]
pub struct Readiness {
    /// On the business pool's database.
    pub database: PgPool,
    /// On the idempotency store's.
    pub store: PgPool,
}

impl Readiness {
    /// How long a check waits for its connection.
    pub const ACQUIRE: Duration = Duration::from_millis(800);
}

impl ApiState {
    /// Builds the state; the idempotency service records replays through [`crate::audit`].
    pub fn new(
        db: PgPool,
        config: ApiConfig,
        idempotency: IdempotencyConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let idempotency = Idempotency::new(db.clone(), idempotency, Some(Arc::new(ReplayAuditor)));
        Self::build(db, idempotency, config, clock)
    }

    /// [`ApiState::new`] with a given pool for the idempotency store's own statements (the
    /// claim, settling a key, the flag), instead of one derived from `db`; business
    /// transactions use `db`. Tests use it to make the store unreachable.
    pub fn with_store_pool(
        db: PgPool,
        store: PgPool,
        config: ApiConfig,
        idempotency: IdempotencyConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let idempotency = Idempotency::with_store_pool(
            db.clone(),
            store,
            idempotency,
            Some(Arc::new(ReplayAuditor)),
        );
        Self::build(db, idempotency, config, clock)
    }

    fn build(
        db: PgPool,
        idempotency: Idempotency,
        config: ApiConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let desk = crate::trading::desk::Desk::new(
            clock.clone(),
            raptor_engine::Engine {
                fees: config.fees.clone(),
            },
            crate::trading::desk::TradingLimits {
                max_open_orders: config.max_open_orders,
                starting_cash: config.paper_starting_cash,
            },
        );
        let stripe = crate::billing::stripe::StripeClient::from_config(&config.billing);
        let auth_limiter = crate::sessions::limits::AuthLimiter::new(config.auth_limits);
        let config_billing_concurrency = config.billing.concurrency.max(1);
        let account_writes = Arc::new(crate::trading::account_writes::AccountWrites::new(
            config.account_write_concurrency,
            config.account_write_wait,
        ));
        let readiness = Readiness {
            database: raptor_db::pool::probe(&db, Readiness::ACQUIRE),
            store: raptor_db::pool::probe(idempotency.store_pool(), Readiness::ACQUIRE),
        };
        let exports = crate::accounts::export_limits::ExportLimits::for_pool(
            db.options().get_max_connections(),
        );
        let new_orders_halt = Arc::new(raptor_db::flag::RuntimeFlag::new(
            crate::trading::gate::MBT_NEW_ORDERS_DISABLED,
            config.new_orders_disabled,
        ));
        let trade_streams = Arc::new(crate::trading::stream::TradeStreams::new(
            config.trade_streams,
            &db,
            config.trade_streams_listen.as_ref(),
        ));
        Self(Arc::new(ApiInner {
            trade_streams,
            new_orders_halt,
            exports,
            db,
            config,
            idempotency,
            clock,
            desk,
            stripe,
            auth_limiter,
            account_writes,
            billing_permits: Arc::new(tokio::sync::Semaphore::new(config_billing_concurrency)),
            draining: std::sync::atomic::AtomicBool::new(false),
            readiness,
        }))
    }

    /// The book's context: what trading operations use besides a connection.
    pub fn desk(&self) -> &crate::trading::desk::Desk {
        &self.0.desk
    }

    /// Marks the process as shutting down: `/readyz` answers 503 so load balancers stop
    /// sending traffic, while requests in flight finish.
    pub fn begin_drain(&self) {
        self.0
            .draining
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// `/readyz`'s own pools.
    pub fn readiness(&self) -> &Readiness {
        &self.0.readiness
    }

    /// Whether shutdown has begun.
    pub fn is_draining(&self) -> bool {
        self.0.draining.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The trade-updates streams of this process.
    pub fn trade_streams(&self) -> &Arc<crate::trading::stream::TradeStreams> {
        &self.0.trade_streams
    }
}

impl Deref for ApiState {
    type Target = ApiInner;

    fn deref(&self) -> &ApiInner {
        &self.0
    }
}

impl FromRef<ApiState> for Idempotency {
    fn from_ref(state: &ApiState) -> Self {
        state.idempotency.clone()
    }
}

// The sub-states the extractors bind on (axum's `FromRef`), so that authentication, the gates
// and the permits need only what they use, not the whole state.

impl FromRef<ApiState> for PgPool {
    fn from_ref(state: &ApiState) -> Self {
        state.db.clone()
    }
}

impl FromRef<ApiState> for Arc<crate::trading::account_writes::AccountWrites> {
    fn from_ref(state: &ApiState) -> Self {
        state.account_writes.clone()
    }
}

impl FromRef<ApiState> for crate::trading::desk::Desk {
    fn from_ref(state: &ApiState) -> Self {
        state.0.desk.clone()
    }
}

impl FromRef<ApiState> for crate::trading::gate::OrderGates {
    fn from_ref(state: &ApiState) -> Self {
        Self {
            halt: state.0.new_orders_halt.clone(),
            flags: state.idempotency.flag_pool().clone(),
        }
    }
}

impl FromRef<ApiState> for crate::billing::gate::BillingDeps {
    fn from_ref(state: &ApiState) -> Self {
        Self {
            stripe: state.stripe.clone(),
            permits: state.billing_permits.clone(),
        }
    }
}
