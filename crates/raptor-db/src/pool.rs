//! The service's two pools and what they need before they serve: the business pool (every
//! request's transaction) and the idempotency store's pool (claims, settling keys, the kill
//! switch), creating the database, migrating, and checking the roles' settings.
//!
//! The server builds [`PoolSettings`] from its configuration; nothing here reads the
//! environment. Error messages name the variables the settings came from, so a start-up error
//! says what to fix.

use std::time::Duration;

use anyhow::{bail, Context};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgPool};

use crate::{conn, query, query_as, query_scalar, MIGRATOR};

/// How the pools' session settings (`lock_timeout`, `statement_timeout`, and the store pool's
/// `synchronous_commit=off`) reach Postgres.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionSettings {
    /// Sent as the startup `options` parameter of every connection (a direct connection).
    Connect,
    /// Nothing is sent: the settings are the roles' own (`ALTER ROLE … SET`), checked at
    /// start-up ([`check_role_settings`]). For PgBouncer in transaction pooling, which does
    /// not forward startup options.
    Role,
}

/// The idempotency store's pool.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    /// `IDEMPOTENCY_STORE_DATABASE_URL`: another role on the same database; `None`: the
    /// business pool's.
    pub url: Option<String>,
    /// `IDEMPOTENCY_STORE_TIMEOUT_MS`: the claim's deadline ([`StoreBudget`]).
    pub timeout: Duration,
}

/// What the pools are built from.
#[derive(Clone)]
pub struct PoolSettings {
    /// `DATABASE_URL`.
    pub url: String,
    /// `RAPTOR_DB_POOL_SIZE`: business connections (the store pool gets half, at least 2).
    pub size: u32,
    /// `RAPTOR_DB_LOCK_TIMEOUT_MS` of every business session.
    pub lock_timeout: Duration,
    /// `RAPTOR_DB_STATEMENT_TIMEOUT_MS` of every business session.
    pub statement_timeout: Duration,
    /// `RAPTOR_DB_STATEMENT_CACHE`: statements cached per connection (at least 1).
    pub statement_cache: usize,
    /// `RAPTOR_DB_SESSION_SETTINGS`.
    pub session_settings: SessionSettings,
    /// `idle_in_transaction_session_timeout` of every session (just above the request
    /// timeout): a transaction left open by a host that died (or hung) gives its row locks
    /// back then, not when TCP keepalive notices (hours).
    pub idle_in_transaction: Duration,
    /// The store pool.
    pub store: StoreSettings,
}

impl std::fmt::Debug for PoolSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URLs may carry passwords.
        f.debug_struct("PoolSettings")
            .field("size", &self.size)
            .field("lock_timeout", &self.lock_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("statement_cache", &self.statement_cache)
            .field("session_settings", &self.session_settings)
            .field("idle_in_transaction", &self.idle_in_transaction)
            .field("store_timeout", &self.store.timeout)
            .finish_non_exhaustive()
    }
}

/// How the claim's deadline (`IDEMPOTENCY_STORE_TIMEOUT_MS`) is shared out, so that every
/// bound inside a claim ends before it and an answer is always classified, never raced:
///
/// - the store pool's acquire timeout: a quarter;
/// - the store sessions' `lock_timeout` and `statement_timeout`: a half (so acquire plus
///   statement end by three quarters);
/// - a reachability probe after a pool timeout: a quarter (acquire plus probe end by half).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreBudget {
    /// The claim's deadline.
    pub deadline: Duration,
    /// The store pool's acquire timeout.
    pub acquire: Duration,
    /// The store sessions' lock and statement timeouts.
    pub session: Duration,
    /// A reachability probe's connect timeout.
    pub probe: Duration,
}

impl StoreBudget {
    /// The shares of `deadline` (each at least 1 ms).
    pub fn new(deadline: Duration) -> Self {
        let share = |n: u32| (deadline / n).max(Duration::from_millis(1));
        Self {
            deadline,
            acquire: share(4),
            session: share(2),
            probe: share(4),
        }
    }

    /// The store sessions' lock and statement timeouts in whole milliseconds (at least 1).
    pub fn session_ms(&self) -> u64 {
        u64::try_from(self.session.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

impl PoolSettings {
    /// `DATABASE_URL`'s connect options, as every business connection (and the migration's)
    /// uses them.
    pub fn connect_options(&self) -> anyhow::Result<PgConnectOptions> {
        Ok(crate::tls::connect_options("DATABASE_URL", &self.url)?
            .application_name("raptor")
            .statement_cache_capacity(self.statement_cache))
    }

    fn role_settings(&self) -> bool {
        self.session_settings == SessionSettings::Role
    }
}

pub use crate::pool_metrics::STORE_APPLICATION_NAME;

/// Connects the business pool (fails if Postgres does not answer). Every connection carries
/// the business `lock_timeout` and `statement_timeout` as session defaults (with `connect`
/// session settings), so they cost no round trip.
pub async fn business(settings: &PoolSettings) -> anyhow::Result<PgPool> {
    let mut options = settings.connect_options()?;
    if !settings.role_settings() {
        options = dead_peer_guards(options, settings.idle_in_transaction).options([
            (
                "lock_timeout",
                format!("{}ms", settings.lock_timeout.as_millis()),
            ),
            (
                "statement_timeout",
                format!("{}ms", settings.statement_timeout.as_millis()),
            ),
        ]);
    }
    PgPoolOptions::new()
        // No ping before every acquire (a round trip on every request): a connection that
        // died is found by its first statement, which fails like any database error
        // (503 database_unavailable, or the claim's store-unavailable path).
        .test_before_acquire(false)
        .max_connections(settings.size)
        .acquire_timeout(Duration::from_secs(3))
        .connect_with(options)
        .await
        .map_err(|error| connect_error("DATABASE_URL", &settings.url, error))
}

/// How long a session's connection may be silent before Postgres probes it (TCP keepalive),
/// the probes' interval and count, and how long unacknowledged data may wait: a client host
/// that died is noticed in about a minute and a half, not the kernel's default two hours.
const KEEPALIVE_IDLE_SECS: u32 = 60;
const KEEPALIVE_INTERVAL_SECS: u32 = 10;
const KEEPALIVE_COUNT: u32 = 3;
const TCP_USER_TIMEOUT_MS: u32 = 90_000;

/// The session settings that bound what a dead or hung client host holds on the server: its
/// open transaction ends after `idle_in_transaction` (its locks given back), and its
/// connection is probed by TCP keepalive. Sent as start-up options with every connection of
/// both pools (with `role` session settings they are the roles' own, and checked at start-up).
pub fn dead_peer_guards(
    options: PgConnectOptions,
    idle_in_transaction: Duration,
) -> PgConnectOptions {
    options.options([
        (
            "idle_in_transaction_session_timeout",
            format!("{}ms", idle_in_transaction.as_millis()),
        ),
        ("tcp_keepalives_idle", KEEPALIVE_IDLE_SECS.to_string()),
        (
            "tcp_keepalives_interval",
            KEEPALIVE_INTERVAL_SECS.to_string(),
        ),
        ("tcp_keepalives_count", KEEPALIVE_COUNT.to_string()),
        ("tcp_user_timeout", TCP_USER_TIMEOUT_MS.to_string()),
    ])
}

/// Refuses to start unless every session runs at READ COMMITTED (the claim's fence and the
/// book's locking are written for it: a `default_transaction_isolation` of repeatable read or
/// serializable set on the role or database turns their re-checks into serialization
/// failures), and, with `IDEMPOTENCY_STORE_DATABASE_URL`, unless the store reaches the very
/// database `DATABASE_URL` does (a nonce written through the business pool is read through the
/// store's): a claim committed in another database would guard nothing. Warns when a session
/// does not bound an idle transaction (`role` session settings without
/// `idle_in_transaction_session_timeout` on the role).
pub async fn check_sessions(
    settings: &PoolSettings,
    business: &PgPool,
    store: &PgPool,
) -> anyhow::Result<()> {
    let read = |pool: PgPool| async move {
        let mut conn = conn(&pool).await?;
        let row = query_as::<(String, String)>(
            "select current_setting('default_transaction_isolation'),
                    current_setting('idle_in_transaction_session_timeout')",
        )
        .fetch_one(&mut *conn)
        .await?;
        conn.finish().await?;
        Ok::<_, sqlx::Error>(row)
    };
    let mut wrong = Vec::new();
    for (name, pool) in [
        ("DATABASE_URL", business),
        ("IDEMPOTENCY_STORE_DATABASE_URL", store),
    ] {
        if name == "IDEMPOTENCY_STORE_DATABASE_URL" && settings.store.url.is_none() {
            continue;
        }
        let (isolation, idle) = read(pool.clone())
            .await
            .with_context(|| format!("could not read the session settings of {name}"))?;
        if isolation != "read committed" {
            wrong.push(format!(
                "{name}: default_transaction_isolation is {isolation}, want read committed"
            ));
        }
        if idle == "0" {
            tracing::warn!(
                pool = name,
                "idle_in_transaction_session_timeout is off: a transaction left open by a dead \
                 host keeps its locks until TCP notices (set it on the role, docs/SCALING.md)"
            );
        }
    }
    if settings.store.url.is_some() {
        if let Err(why) = same_database(business, store).await {
            wrong.push(format!(
                "IDEMPOTENCY_STORE_DATABASE_URL does not reach DATABASE_URL's database: {why}"
            ));
        }
    }
    if !wrong.is_empty() {
        bail!(
            "the database sessions do not fit the service: {}",
            wrong.join("; ")
        );
    }
    Ok(())
}

/// Writes a nonce through `business` and reads it through `store`; `Err` says why they are
/// not one database.
async fn same_database(business: &PgPool, store: &PgPool) -> Result<(), String> {
    let nonce = uuid::Uuid::new_v4();
    let written = async {
        let mut conn = conn(business).await?;
        query("insert into startup_checks (nonce) values ($1)")
            .bind(nonce)
            .execute(&mut *conn)
            .await?;
        conn.finish().await
    }
    .await;
    written.map_err(|err| format!("could not write the check through DATABASE_URL: {err}"))?;
    let seen = async {
        let mut conn = conn(store).await?;
        let seen: bool =
            query_scalar("select exists (select 1 from startup_checks where nonce = $1)")
                .bind(nonce)
                .fetch_one(&mut *conn)
                .await?;
        conn.finish().await?;
        Ok::<_, sqlx::Error>(seen)
    }
    .await;
    let cleaned = async {
        let mut conn = conn(business).await?;
        query(
            "delete from startup_checks where nonce = $1 or created_at < now() - interval '1 day'",
        )
        .bind(nonce)
        .execute(&mut *conn)
        .await?;
        conn.finish().await
    }
    .await;
    if let Err(err) = cleaned {
        tracing::warn!(error = %err, "could not remove the start-up check's nonce");
    }
    match seen {
        Ok(true) => Ok(()),
        Ok(false) => Err("a nonce written through DATABASE_URL is not there".to_owned()),
        Err(err) => Err(format!("could not read the check through it: {err}")),
    }
}

/// A failed connection to `url` (the value of `var`), explained ([`crate::tls::explain`]).
fn connect_error(var: &str, url: &str, error: sqlx::Error) -> anyhow::Error {
    crate::tls::explain(var, url, error)
        .1
        .context(format!("could not connect to {var}"))
}

/// The idempotency store's own pool: on `IDEMPOTENCY_STORE_DATABASE_URL` when set, else on
/// `business`'s options. With `connect` session settings its sessions carry
/// [`store_options`]; with `role` they are the role's ([`check_role_settings`]).
pub fn store(settings: &PoolSettings, business: &PgPool) -> anyhow::Result<PgPool> {
    let base = match &settings.store.url {
        Some(url) => crate::tls::connect_options("IDEMPOTENCY_STORE_DATABASE_URL", url)?
            .application_name(STORE_APPLICATION_NAME)
            .statement_cache_capacity(settings.statement_cache),
        None => (*business.connect_options()).clone(),
    };
    let options = if settings.role_settings() {
        base
    } else {
        store_options(
            dead_peer_guards(base, settings.idle_in_transaction),
            settings.store.timeout,
        )
    };
    Ok(store_pool(settings.size, options, settings.store.timeout))
}

/// The store pool of a business pool (the same database and options), as [`store`] builds it
/// with `connect` session settings.
pub fn store_for(business: &PgPool, store_timeout: Duration) -> PgPool {
    let options = store_options((*business.connect_options()).clone(), store_timeout);
    store_pool(
        business.options().get_max_connections(),
        options,
        store_timeout,
    )
}

/// A store pool for a business pool of `business_size` connections: half its size (at least
/// 2), [`StoreBudget::acquire`] as acquire timeout, connected lazily (so an unreachable store
/// is found by the first claim, not at start-up).
pub fn store_pool(
    business_size: u32,
    options: PgConnectOptions,
    store_timeout: Duration,
) -> PgPool {
    PgPoolOptions::new()
        .max_connections((business_size / 2).max(2))
        .acquire_timeout(StoreBudget::new(store_timeout).acquire)
        .test_before_acquire(false)
        .connect_lazy_with(options)
}

/// A pool of one connection of its own on `of`'s database (the same connect options, named
/// `name` in `pg_stat_activity`), lent within `timeout` or not at all, checked before it is lent,
/// connected lazily: for a small periodic read that must not wait behind the request pools
/// (the kill switch's).
pub fn side(of: &PgPool, name: &str, timeout: Duration) -> PgPool {
    side_to((*of.connect_options()).clone(), name, timeout)
}

/// [`side`] to the database `options` reach (a session of its own where the pools go through a
/// transaction pooler: the trade-updates listener's `RAPTOR_LISTEN_DATABASE_URL`).
pub fn side_to(options: PgConnectOptions, name: &str, timeout: Duration) -> PgPool {
    PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .acquire_timeout(timeout)
        .test_before_acquire(true)
        .connect_lazy_with(options.application_name(name))
}

/// The readiness check's own pool on `of`'s database (the same connect options, named
/// `raptor-readyz` in `pg_stat_activity`): one connection, lent within `timeout` or not at
/// all, checked before it is lent (a connection broken by a database restart is replaced at
/// once), connected lazily. A saturated request pool never delays `/readyz`, so a replica that
/// is busy is not taken out of rotation as if its database were down.
pub fn probe(of: &PgPool, timeout: Duration) -> PgPool {
    side(of, "raptor-readyz", timeout)
}

/// The connect options of the store pool: `base` plus `synchronous_commit=off` (a claim is
/// durable whenever what it guarded is: the completing transaction's synchronous commit
/// flushes the WAL before it) and [`StoreBudget::session`] as `lock_timeout` and
/// `statement_timeout`.
pub fn store_options(base: PgConnectOptions, store_timeout: Duration) -> PgConnectOptions {
    let session = format!("{}ms", StoreBudget::new(store_timeout).session_ms());
    base.options([
        ("synchronous_commit", "off".to_owned()),
        ("lock_timeout", session.clone()),
        ("statement_timeout", session),
    ])
}

/// Creates the database named by `DATABASE_URL` if it does not exist (serve and migrate).
/// It asks the `postgres` database, with DATABASE_URL's options (its TLS settings included).
pub async fn ensure_database(settings: &PoolSettings) -> anyhow::Result<()> {
    let options = settings.connect_options()?;
    let Some(name) = options.get_database().map(str::to_owned) else {
        // No database in the URL: Postgres uses the user's name, which we do not create.
        return Ok(());
    };
    let mut conn = sqlx::PgConnection::connect_with(&options.clone().database("postgres"))
        .await
        .map_err(|error| connect_error("DATABASE_URL", &settings.url, error))?;
    let exists: bool = query_scalar("select exists (select 1 from pg_database where datname = $1)")
        .bind(&name)
        .fetch_one(&mut conn)
        .await
        .context("could not list the databases of DATABASE_URL's server")?;
    if !exists {
        let create = format!("create database \"{}\"", name.replace('"', "\"\""));
        #[expect(
            clippy::disallowed_methods,
            reason = "create database cannot run inside a transaction block, whatever the pool mode"
        )]
        let created = sqlx::raw_sql(&create).execute(&mut conn).await;
        created.context("could not create the database named in DATABASE_URL")?;
        tracing::info!("created the database named in DATABASE_URL");
    }
    conn.close().await.ok();
    Ok(())
}

/// With `IDEMPOTENCY_STORE_DATABASE_URL` set: one connection with the store pool's options at
/// start-up, so that TLS or `pg_hba.conf` settings the server refuses are a start-up error
/// (the store pool itself connects lazily). A store that cannot be reached only warns: the
/// claims' fail-closed and fail-open paths handle it.
pub async fn check_store(settings: &PoolSettings, store: &PgPool) -> anyhow::Result<()> {
    let Some(url) = &settings.store.url else {
        return Ok(());
    };
    match sqlx::PgConnection::connect_with(&store.connect_options()).await {
        Ok(conn) => {
            conn.close().await.ok();
            Ok(())
        }
        Err(error) => match crate::tls::explain("IDEMPOTENCY_STORE_DATABASE_URL", url, error) {
            (crate::tls::Cause::Settings, error) => {
                Err(error.context("could not connect to IDEMPOTENCY_STORE_DATABASE_URL"))
            }
            (crate::tls::Cause::Other, error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "the idempotency store cannot be reached at start-up"
                );
                Ok(())
            }
        },
    }
}

/// How long a migration's statement may wait for a lock before it fails (and, in a
/// transaction, rolls back whole). The previous release serves while migrations run
/// (`docs/operations.md`, "Upgrading"): a migration that queues for a table lock behind a long
/// transaction would otherwise make every request touching that table queue behind it.
pub const MIGRATION_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// Applies pending migrations on a connection of its own, without the pool's statement
/// timeouts (a migration may legitimately run long), with [`MIGRATION_LOCK_TIMEOUT`] on every
/// lock a migration waits for. sqlx's migration lock (a session advisory lock, so replicas
/// starting together migrate one at a time) is taken first, without that timeout: a replica
/// waits for another's migrations as long as they take.
pub async fn migrate(settings: &PoolSettings) -> anyhow::Result<()> {
    use sqlx::migrate::Migrate;
    let mut conn = sqlx::PgConnection::connect_with(&settings.connect_options()?)
        .await
        .map_err(|error| connect_error("DATABASE_URL", &settings.url, error))?;
    conn.lock()
        .await
        .context("could not take the migration lock")?;
    // MIGRATOR's migrations, run under the lock taken above.
    let mut migrator = sqlx::migrate!("../../migrations");
    migrator.set_locking(false);
    // A database a newer release migrated holds migrations this binary does not know: it
    // still starts (a rollback, or a replica of the previous release restarting during a
    // rolling deploy), since every migration works with the previous release's code
    // (docs/operations.md, "Upgrading"). A known migration whose file changed is still refused.
    migrator.set_ignore_missing(true);
    let ran = async {
        query(&format!(
            "set lock_timeout = {}",
            MIGRATION_LOCK_TIMEOUT.as_millis()
        ))
        .execute(&mut conn)
        .await?;
        migrator.run(&mut conn).await.map_err(sqlx::Error::from)
    }
    .await;
    conn.unlock().await.ok();
    ran.context("migration failed")?;
    conn.close().await.ok();
    Ok(())
}

/// With [`SessionSettings::Role`]: refuses to start unless the business role carries the
/// configured lock and statement timeouts and the store's role carries
/// `synchronous_commit=off` and [`StoreBudget::session`] as its timeouts (the values `connect`
/// would send), and unless no migration is pending (`serve` does not migrate through a
/// transaction pooler: sqlx's migration lock is a session advisory lock; run `raptor migrate`
/// on a direct connection first).
pub async fn check_role_settings(
    settings: &PoolSettings,
    business: &PgPool,
    store: &PgPool,
) -> anyhow::Result<()> {
    // `pg_settings.setting` holds both timeouts in milliseconds, whatever unit they were set
    // in.
    let read = |pool: PgPool| async move {
        let mut conn = conn(&pool).await?;
        let settings = query_as::<(String, String, String)>(
            "select (select setting from pg_settings where name = 'lock_timeout'),
                    (select setting from pg_settings where name = 'statement_timeout'),
                    current_setting('synchronous_commit')",
        )
        .fetch_one(&mut *conn)
        .await?;
        conn.finish().await?;
        Ok::<_, sqlx::Error>(settings)
    };
    let ms = |text: &str| text.trim().parse::<u64>().ok();
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let roles = [
        (
            "DATABASE_URL",
            read(business.clone())
                .await
                .context("could not read the business role's settings")?,
            millis(settings.lock_timeout),
            millis(settings.statement_timeout),
            None,
        ),
        (
            "IDEMPOTENCY_STORE_DATABASE_URL",
            read(store.clone())
                .await
                .context("could not read the idempotency store role's settings")?,
            StoreBudget::new(settings.store.timeout).session_ms(),
            StoreBudget::new(settings.store.timeout).session_ms(),
            Some("off"),
        ),
    ];
    let mut wrong = Vec::new();
    for (pool_name, (lock, statement, sync), want_lock, want_statement, want_sync) in &roles {
        if ms(lock) != Some(*want_lock) {
            wrong.push(format!(
                "{pool_name}: lock_timeout is {lock}ms, want {want_lock}ms"
            ));
        }
        if ms(statement) != Some(*want_statement) {
            wrong.push(format!(
                "{pool_name}: statement_timeout is {statement}ms, want {want_statement}ms"
            ));
        }
        if let Some(want) = want_sync {
            if sync != want {
                wrong.push(format!(
                    "{pool_name}: synchronous_commit is {sync}, want {want}"
                ));
            }
        }
    }
    if !wrong.is_empty() {
        bail!(
            "RAPTOR_DB_SESSION_SETTINGS=role, but the roles do not carry the configured \
             settings (ALTER ROLE … SET, docs/SCALING.md): {}",
            wrong.join("; ")
        );
    }
    let latest = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    let applied = async {
        let mut conn = conn(business).await?;
        let applied: Option<i64> =
            query_scalar("select max(version) from _sqlx_migrations where success")
                .fetch_one(&mut *conn)
                .await?;
        conn.finish().await?;
        Ok::<_, sqlx::Error>(applied)
    }
    .await
    .context("could not read _sqlx_migrations (run `raptor migrate` on a direct connection)")?;
    if applied.unwrap_or(0) < latest {
        bail!(
            "migrations are pending: run `raptor migrate` with DATABASE_URL on a direct \
             connection to Postgres (not through PgBouncer) before `raptor serve`"
        );
    }
    Ok(())
}
