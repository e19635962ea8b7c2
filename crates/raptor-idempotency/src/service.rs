//! The idempotency service, [`Idempotency`]: the pools, the settings, the kill switch's cache,
//! the replay auditor, the keyless-request counter and the tracker of work owed at shutdown;
//! and the untracked claim (no key, kill switch off, a fail-open route whose store cannot be
//! reached). Claiming a key is `claim::round`, judging a taken one `claim::judge`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use raptor_db::flag::{RuntimeFlag, READ_TIMEOUT as FLAG_READ_TIMEOUT};
use raptor_db::reach::Reachability;
use sqlx::{PgConnection, PgPool};
use tokio_util::task::TaskTracker;

use crate::claim::{Claim, KeyGuard};
use crate::key::IdempotencyKey;
use crate::keyless::KeylessCounter;
use crate::lent::Lent;
use crate::reply::Refusal;

use crate::config::IdempotencyConfig;

/// The kill switch's name, as the environment variable and the `feature_flags` row: off, every
/// instrumented route is a passthrough.
pub const FLAG_IDEMPOTENCY_MIDDLEWARE: &str = "FLAG_IDEMPOTENCY_MIDDLEWARE";

/// What a replay tells the audit log.
#[derive(Debug, Clone)]
pub struct ReplayEvent {
    /// The key's scope user (`None` for service principals).
    pub scope_user_id: Option<i32>,
    /// `idempotency_keys.id` of the replayed key.
    pub idempotency_key_id: i64,
    /// The request fingerprint.
    pub request_hash: String,
    /// The replayed status code.
    pub response_code: i16,
    /// `METHOD /route/template`.
    pub endpoint: String,
}

/// Boxed future returned by [`ReplayAudit::record`].
pub type AuditFuture<'a> = Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'a>>;

/// Writes the `idempotency_replay` audit row. Implemented by the API crate so that every audit
/// row goes through its single writer.
pub trait ReplayAudit: Send + Sync + 'static {
    /// Records one replay on `conn`, a connection of the store pool (committed by the caller).
    fn record<'a>(&'a self, conn: &'a mut PgConnection, event: &'a ReplayEvent) -> AuditFuture<'a>;
}

/// The idempotency service: cheap to clone, one per process.
#[derive(Clone)]
pub struct Idempotency {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// Business transactions (the winner's, and untracked ones).
    pub(crate) pool: PgPool,
    /// The store's own statements: claim rounds, settling keys, the flag.
    pub(crate) store: PgPool,
    pub(crate) config: IdempotencyConfig,
    flag: RuntimeFlag,
    pub(crate) audit: Option<Arc<dyn ReplayAudit>>,
    pub(crate) keyless: KeylessCounter,
    /// Whether the store can be connected to, asked when the pool lends no connection.
    pub(crate) reach: Reachability,
    /// The kill switch's reads: one connection of its own on the business database.
    flag_pool: PgPool,
    /// Work spawned off a request that the process still owes before it exits: claim rounds,
    /// key releases and settlements (and the API's own, see [`Idempotency::background`]).
    background: TaskTracker,
}

impl Idempotency {
    /// A service over `pool`. `audit` receives one call per replay. The store's statements
    /// get a small pool of their own on the same database, whose sessions carry the claim's
    /// settings ([`raptor_db::pool::store_for`]), so a claim is one statement: no BEGIN, no
    /// `set_config`, no COMMIT.
    pub fn new(
        pool: PgPool,
        config: IdempotencyConfig,
        audit: Option<Arc<dyn ReplayAudit>>,
    ) -> Self {
        let store = raptor_db::pool::store_for(&pool, config.store_timeout);
        Self::with_store_pool(pool, store, config, audit)
    }

    /// A service whose claim rounds, key settlements and flag reads use `store`, while business
    /// transactions use `pool` (both on the same database; `store` should be connected with
    /// [`raptor_db::pool::store_options`]). A store pool that cannot connect is the "store
    /// unreachable" case: fail-closed routes answer 503, fail-open routes run.
    pub fn with_store_pool(
        pool: PgPool,
        store: PgPool,
        config: IdempotencyConfig,
        audit: Option<Arc<dyn ReplayAudit>>,
    ) -> Self {
        let flag = RuntimeFlag::new(FLAG_IDEMPOTENCY_MIDDLEWARE, config.flag_default);
        let reach = Reachability::new(store.connect_options());
        let flag_pool = raptor_db::pool::side(&pool, "raptor-flags", FLAG_READ_TIMEOUT);
        Self {
            inner: Arc::new(Inner {
                pool,
                store,
                config,
                flag,
                audit,
                keyless: KeylessCounter::default(),
                reach,
                flag_pool,
                background: TaskTracker::new(),
            }),
        }
    }

    /// The tracker of work spawned off requests that must finish before the process exits
    /// (key releases and settlements, claim rounds; the API adds its own, e.g. sign-in links):
    /// spawn such work with `background().spawn(…)`, and call [`Idempotency::drain`] once the
    /// server stopped.
    pub fn background(&self) -> &TaskTracker {
        &self.inner.background
    }

    /// Waits up to `bound` for the work of [`Idempotency::background`] (new work is still
    /// accepted and waited for); returns how many tasks were still running at the bound.
    pub async fn drain(&self, bound: Duration) -> usize {
        let tracker = &self.inner.background;
        tracker.close();
        if tokio::time::timeout(bound, tracker.wait()).await.is_ok() {
            return 0;
        }
        let left = tracker.len();
        tracing::warn!(
            left,
            "background work still running at shutdown; unfinished key releases stay in flight until stale"
        );
        left
    }

    /// The pool of business transactions.
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// The pool of the store's own statements.
    pub fn store_pool(&self) -> &PgPool {
        &self.inner.store
    }

    /// The kill switch's own connection (a pool of one on the business database).
    pub fn flag_pool(&self) -> &PgPool {
        &self.inner.flag_pool
    }

    /// The settings.
    pub fn config(&self) -> &IdempotencyConfig {
        &self.inner.config
    }

    /// Whether the middleware is on (`FLAG_IDEMPOTENCY_MIDDLEWARE`, with its run-time override).
    /// Read through a connection of its own on the business database, never the store pool:
    /// a replica whose store cannot be connected to (or whose store pool is saturated) still
    /// sees a flip within a second.
    pub async fn enabled(&self) -> bool {
        self.inner
            .flag
            .get(&self.inner.flag_pool, FLAG_READ_TIMEOUT)
            .await
    }

    /// Stores the run-time override of the kill switch in the caller's transaction; see
    /// [`Idempotency::apply_enabled`].
    pub async fn store_enabled(
        &self,
        conn: &mut PgConnection,
        enabled: bool,
        updated_by: Option<i32>,
    ) -> Result<(), sqlx::Error> {
        self.inner.flag.store(conn, enabled, updated_by).await
    }

    /// Applies a stored override to this process at once. Call it only after the transaction
    /// of [`Idempotency::store_enabled`] committed: a flip that rolled back must not apply.
    pub fn apply_enabled(&self, enabled: bool) {
        self.inner.flag.set_local(enabled);
    }

    /// The request's transaction: on the connection the authentication lent it ([`Lent`]),
    /// else on a new one from the pool.
    pub(crate) async fn begin(
        &self,
        lent: Lent,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
        match lent.into_conn() {
            Some(conn) => conn.begin().await,
            None => raptor_db::begin(&self.inner.pool).await,
        }
    }

    /// A claim with no key row: the request runs in one transaction, without dedup.
    /// `instrumented` adds `Idempotent-Replayed: false` to the response. `key` is the request's
    /// valid key, if it sent one (kill switch off, fail-open): handlers still derive ids from it.
    /// `lent`: the connection the authentication lent, if any.
    pub async fn untracked(
        &self,
        endpoint: String,
        instrumented: bool,
        key: Option<IdempotencyKey>,
        lent: Lent,
    ) -> Result<Claim, Refusal> {
        let tx = self.begin(lent).await.map_err(|err| {
            tracing::error!(error = %err, "could not begin a transaction");
            Refusal::DatabaseUnavailable
        })?;
        Ok(Claim::new(
            tx,
            KeyGuard::new(self.clone(), None),
            endpoint,
            key,
            instrumented,
        ))
    }
}
