//! Probes of the test database, as methods of [`TestApp`]: what a test counts, reads back, sets
//! up or holds locked around its requests.

use std::time::{Duration, Instant};

use sqlx::postgres::PgRow;
use sqlx::{Encode, FromRow, PgPool, Postgres, Transaction, Type};
use uuid::Uuid;

use super::TestApp;

impl TestApp {
    /// The one bigint `sql` answers (`select count(*) …`).
    pub(crate) async fn count(&self, sql: &str) -> i64 {
        self.scalar(sql).await
    }

    /// [`TestApp::count`] with `bind` as `$1`.
    pub(crate) async fn count_where<'q, T>(&self, sql: &'q str, bind: T) -> i64
    where
        T: 'q + Send + Encode<'q, Postgres> + Type<Postgres>,
    {
        self.scalar_where(sql, bind).await
    }

    /// Rows of `probe_items` with this label: how many times the probe handler ran for it.
    pub(crate) async fn probe_items(&self, label: &str) -> i64 {
        self.count_where("select count(*) from probe_items where label = $1", label)
            .await
    }

    /// Audit rows with this action.
    pub(crate) async fn audit_count(&self, action: &str) -> i64 {
        self.count_where("select count(*) from audit_log where action = $1", action)
            .await
    }

    /// Paper orders, of every account.
    pub(crate) async fn order_count(&self) -> i64 {
        self.count("select count(*) from paper_orders").await
    }

    /// The status of `key`'s row, `None` when there is no row.
    pub(crate) async fn key_status(&self, key: Uuid) -> Option<String> {
        sqlx::query_scalar("select status from idempotency_keys where idem_key = $1")
            .bind(key.to_string())
            .fetch_optional(&self.pool)
            .await
            .expect("key status")
    }

    /// Waits, at most `within`, until `key`'s row has `status` (a settlement that happens
    /// after the answer, from a claim's drop guard).
    pub(crate) async fn wait_for_key_status(&self, key: Uuid, status: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            let now = self.key_status(key).await;
            if now.as_deref() == Some(status) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "key {key} never {status} within {within:?}: {now:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The lineage of the one key row.
    pub(crate) async fn lineage(&self) -> Uuid {
        self.scalar("select lineage from idempotency_keys").await
    }

    /// Expires every key row (as if its TTL had passed).
    pub(crate) async fn expire_keys(&self) {
        self.execute("update idempotency_keys set expires_at = now() - interval '1 second'")
            .await;
    }

    /// Runs one statement on the app's pool; the rows it touched.
    pub(crate) async fn execute(&self, sql: &str) -> u64 {
        sqlx::query(sql)
            .execute(&self.pool)
            .await
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
            .rows_affected()
    }

    /// [`TestApp::execute`] with `bind` as `$1`.
    pub(crate) async fn execute_where<'q, T>(&self, sql: &'q str, bind: T) -> u64
    where
        T: 'q + Send + Encode<'q, Postgres> + Type<Postgres>,
    {
        sqlx::query(sql)
            .bind(bind)
            .execute(&self.pool)
            .await
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
            .rows_affected()
    }

    /// The one value the one row of `sql` holds.
    pub(crate) async fn scalar<T>(&self, sql: &str) -> T
    where
        T: Send + Unpin,
        (T,): for<'r> FromRow<'r, PgRow>,
    {
        sqlx::query_scalar(sql)
            .fetch_one(&self.pool)
            .await
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
    }

    /// [`TestApp::scalar`] with `bind` as `$1`.
    pub(crate) async fn scalar_where<'q, T, B>(&self, sql: &'q str, bind: B) -> T
    where
        T: Send + Unpin,
        (T,): for<'r> FromRow<'r, PgRow>,
        B: 'q + Send + Encode<'q, Postgres> + Type<Postgres>,
    {
        sqlx::query_scalar(sql)
            .bind(bind)
            .fetch_one(&self.pool)
            .await
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
    }

    /// Runs `sql` (a `… for update`, a `lock table …`) in a transaction of its own on the test
    /// database: what it locks stays locked until the transaction is rolled back or dropped.
    pub(crate) async fn lock(&self, sql: &str) -> Transaction<'static, Postgres> {
        let mut holder = self.database.begin().await.expect("begin");
        sqlx::query(sql)
            .execute(&mut *holder)
            .await
            .unwrap_or_else(|err| panic!("{sql}: {err}"));
        holder
    }

    /// [`TestApp::lock`] with `bind` as `$1`.
    pub(crate) async fn lock_where<'q, T>(
        &self,
        sql: &'q str,
        bind: T,
    ) -> Transaction<'static, Postgres>
    where
        T: 'q + Send + Encode<'q, Postgres> + Type<Postgres>,
    {
        let mut holder = self.database.begin().await.expect("begin");
        sqlx::query(sql)
            .bind(bind)
            .execute(&mut *holder)
            .await
            .unwrap_or_else(|err| panic!("{sql}: {err}"));
        holder
    }

    /// Locks `key`'s row, as the completing transaction of a slow original holds it.
    pub(crate) async fn lock_key_row(&self, key: Uuid) -> Transaction<'static, Postgres> {
        self.lock_where(
            "select 1 from idempotency_keys where idem_key = $1 for update",
            key.to_string(),
        )
        .await
    }

    /// A pool on the server's `postgres` database (to act on the test database from outside);
    /// the harness closes it.
    pub(crate) async fn maintenance_pool(&self) -> PgPool {
        let options = (*self.database.connect_options())
            .clone()
            .database("postgres");
        let pool = PgPool::connect_with(options)
            .await
            .expect("maintenance pool");
        self.close_after(pool.clone());
        pool
    }

    /// The link token of the newest outbox message of `kind` to `email` (the mailer's view);
    /// waits (bounded) for it, since login links are queued after the answer.
    pub(crate) async fn outbox_token(&self, email: &str, kind: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        let body: String = loop {
            let body: Option<String> = sqlx::query_scalar(
                "select body from email_outbox where lower(email) = lower($1) and kind = $2
                  order by id desc limit 1",
            )
            .bind(email)
            .bind(kind)
            .fetch_optional(&self.pool)
            .await
            .expect("outbox query");
            if let Some(body) = body {
                break body;
            }
            assert!(Instant::now() < deadline, "no {kind} message for {email}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let start = body.find("rpl_").expect("a link token in the message");
        body[start..start + 4 + 64].to_owned()
    }
}
