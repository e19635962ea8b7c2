//! The scenarios, one file each (numbered as `make chaos` reports them), and what they share:
//! the [`World`] they act on, the [`Outcome`] each returns (what it did and counted, and its
//! violations), and the database checks of the ledger and the books.

mod duplicates;
mod kill9;
mod kill_switch;
mod pg_restart;
mod pgbouncer;
mod pool_exhaustion;
mod slow_database;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sqlx::{Connection, PgPool};

use raptor_integration_tests::new_key;

use crate::env::{self, Answer, Cluster, Http, Replica, Tally, User};

pub(crate) use duplicates::*;
pub(crate) use kill9::*;
pub(crate) use kill_switch::*;
pub(crate) use pg_restart::*;
pub(crate) use pgbouncer::*;
pub(crate) use pool_exhaustion::*;
pub(crate) use slow_database::*;

/// The answers each key got, in order.
type KeyLedger = Vec<(String, Vec<Answer>)>;

/// What a scenario did.
pub(crate) struct Outcome {
    pub(crate) name: String,
    pub(crate) secs: f64,
    pub(crate) facts: Vec<String>,
    pub(crate) violations: Vec<String>,
}

impl Outcome {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            secs: 0.0,
            facts: Vec::new(),
            violations: Vec::new(),
        }
    }

    pub(crate) fn fact(&mut self, text: impl Into<String>) {
        let text = text.into();
        println!("  {text}");
        self.facts.push(text);
    }

    pub(crate) fn check(&mut self, ok: bool, text: impl Into<String>) {
        let text = text.into();
        if ok {
            println!("  ok: {text}");
            self.facts.push(format!("ok: {text}"));
        } else {
            println!("  VIOLATION: {text}");
            self.violations.push(text);
        }
    }
}

/// The world the scenarios act on.
pub(crate) struct World {
    pub(crate) dir: PathBuf,
    pub(crate) cluster: Cluster,
    pub(crate) db: PgPool,
    pub(crate) http: Http,
    pub(crate) replicas: Vec<Replica>,
    pub(crate) operator: User,
    pub(crate) quick: bool,
}

impl World {
    pub(crate) fn bases(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.base.clone()).collect()
    }

    /// `n` users with their paper accounts, made in-process as `raptor users create` makes
    /// them (the operator is made through the CLI itself, once), with the replicas' starting
    /// cash (`RAPTOR_PAPER_STARTING_CASH`).
    pub(crate) async fn users(&self, prefix: &str, n: usize) -> anyhow::Result<Vec<User>> {
        make_users(&self.db, prefix, n).await
    }

    /// Brings every replica back to a healthy state before a scenario: after an earlier
    /// scenario restarted Postgres, an idle replica's pooled connections are dead, and each
    /// answers one 503 when first used (pools do not ping before lending). Returns the 503s
    /// drained (bounded: 200 requests per replica).
    pub(crate) async fn warm(&self, bases: &[String]) -> anyhow::Result<usize> {
        let probe = self.users("warm", 1).await?.remove(0);
        warm_replicas(&self.http, bases, &probe).await
    }
}

/// `n` users with their paper accounts in `db`, made in-process as `raptor users create` makes
/// them, with the replicas' starting cash (`RAPTOR_PAPER_STARTING_CASH`).
pub(crate) async fn make_users(db: &PgPool, prefix: &str, n: usize) -> anyhow::Result<Vec<User>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let email = format!("{prefix}-{i}-{}@example.com", uuid::Uuid::new_v4().simple());
        let mut tx = db.begin().await?;
        let created = raptor_api::accounts::store::create_user(
            &mut tx,
            &email,
            raptor_api::auth::Role::User,
            env::STARTING_CASH,
            std::time::Duration::from_secs(24 * 60 * 60),
        )
        .await
        .map_err(|err| anyhow::anyhow!("create_user {email}: {err}"))?;
        tx.commit().await?;
        out.push(User {
            id: created.user_id,
            token: created.token,
        });
    }
    Ok(out)
}

/// Orders from `probe` on every replica until each has answered 25 × 201 (at most 200
/// requests each); returns the other answers drained on the way ([`World::warm`]).
pub(crate) async fn warm_replicas(
    http: &Http,
    bases: &[String],
    probe: &User,
) -> anyhow::Result<usize> {
    let mut drained = 0;
    for base in bases {
        let mut ok = 0;
        for _ in 0..200 {
            let a = http.order(base, &probe.token, Some(&new_key())).await;
            if a.status == 201 {
                ok += 1;
                if ok == 25 {
                    break;
                }
            } else {
                drained += 1;
            }
        }
        if ok < 25 {
            anyhow::bail!("replica {base} did not become healthy");
        }
    }
    Ok(drained)
}

// ---------------------------------------------------------------------------------------------
// Database checks

/// key -> ids of the orders it made.
pub(crate) async fn orders_by_key(
    db: &PgPool,
    keys: &[String],
) -> anyhow::Result<HashMap<String, Vec<String>>> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "select idempotency_key, id::text from paper_orders where idempotency_key = any($1)",
    )
    .bind(keys)
    .fetch_all(db)
    .await?;
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for (key, id) in rows {
        map.entry(key).or_default().push(id);
    }
    Ok(map)
}

/// Orders among `ids` that have their `order.accepted` and fill audit rows.
pub(crate) async fn audited(db: &PgPool, ids: &[String]) -> anyhow::Result<HashSet<String>> {
    let rows: Vec<String> = sqlx::query_scalar(
        "select context->>'order_id' from audit_log
          where context->>'order_id' = any($1)
          group by 1
         having count(*) filter (where action = 'order.accepted') = 1
            and count(*) >= 2",
    )
    .bind(ids)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().collect())
}

/// Checks the ledger of a load run: every 201 (first or replayed) names an order that exists,
/// made by that key, with its audit rows; no key made two orders; every key whose answer was
/// final made exactly one order if it was a 201 and none otherwise. Returns what each key made
/// (`orders_by_key`), for the caller's own checks.
pub(crate) async fn check_ledger(
    out: &mut Outcome,
    db: &PgPool,
    finals: &BTreeMap<String, Vec<Answer>>,
) -> anyhow::Result<HashMap<String, Vec<String>>> {
    let keys: Vec<String> = finals.keys().cloned().collect();
    let made = orders_by_key(db, &keys).await?;
    let mut received = Vec::new();
    let (mut twice, mut wrong_id, mut missing, mut unexplained, mut open) = (0, 0, 0, 0, 0);
    for (key, answers) in finals {
        let orders = made.get(key).cloned().unwrap_or_default();
        if orders.len() > 1 {
            twice += 1;
        }
        let ids: HashSet<&String> = answers.iter().filter_map(|a| a.order_id.as_ref()).collect();
        for id in &ids {
            received.push((*id).clone());
            if !orders.contains(id) {
                missing += 1;
            }
        }
        if ids.len() > 1 {
            wrong_id += 1;
        }
        if answers.iter().all(Answer::retryable) {
            open += 1;
        } else if !answers.iter().any(|a| a.status == 201) && !orders.is_empty() {
            unexplained += 1;
        }
    }
    let answered: Vec<String> = finals
        .iter()
        .filter(|(_, answers)| answers.iter().any(|a| a.status == 201))
        .map(|(k, _)| k.clone())
        .collect();
    let completed: i64 = sqlx::query_scalar(
        "select count(*) from idempotency_keys where idem_key = any($1) and status = 'completed'",
    )
    .bind(&answered)
    .fetch_one(db)
    .await?;
    out.check(
        usize::try_from(completed).unwrap_or(0) == answered.len(),
        format!(
            "every key answered 201 is completed in the key table ({completed} of {})",
            answered.len()
        ),
    );
    let ok_ids = audited(db, &received).await?;
    let unaudited = received.iter().filter(|id| !ok_ids.contains(*id)).count();
    let executions: usize = made.values().map(Vec::len).sum();
    out.fact(format!(
        "{} keys, {} orders in the database, {} order ids received in 201s",
        keys.len(),
        executions,
        received.len()
    ));
    out.check(twice == 0, format!("no key executed twice ({twice} did)"));
    out.check(
        missing == 0,
        format!("every 201 names a committed order of its key ({missing} do not)"),
    );
    out.check(
        wrong_id == 0,
        format!("every 201 of one key names the same order ({wrong_id} keys differ)"),
    );
    out.check(
        unaudited == 0,
        format!("every received order has its audit rows ({unaudited} lack them)"),
    );
    out.check(
        unexplained == 0,
        format!("no key without a 201 made an order ({unexplained} did)"),
    );
    out.check(
        open == 0,
        format!("every key reached a final answer within the retry bound ({open} did not)"),
    );
    Ok(made)
}

/// The books of `user_ids` in `db` reconcile with their fills: each account's cash is the
/// starting cash less what its fills cost and its orders' fees, each position's quantity is the
/// sum of its fills, and each order's filled quantity is the sum of its own fills.
pub(crate) async fn check_books(
    out: &mut Outcome,
    db: &PgPool,
    user_ids: &[i32],
) -> anyhow::Result<()> {
    let accounts: i64 =
        sqlx::query_scalar("select count(*) from paper_accounts where user_id = any($1)")
            .bind(user_ids)
            .fetch_one(db)
            .await?;
    let cash: Vec<(i32, String, String)> = sqlx::query_as(
        "with spent as (
           select user_id,
                  sum(round(qty * price * multiplier * case when side = 'buy' then 1 else -1 end, 2)) as spent
             from paper_fills where user_id = any($1) group by user_id),
         fees as (
           select user_id, sum(fees) as fees from paper_orders where user_id = any($1) group by user_id)
         select a.user_id, a.cash::text,
                ($2::numeric - coalesce(s.spent, 0) - coalesce(f.fees, 0))::text
           from paper_accounts a
           left join spent s using (user_id)
           left join fees f using (user_id)
          where a.user_id = any($1)
            and a.cash <> $2::numeric - coalesce(s.spent, 0) - coalesce(f.fees, 0)",
    )
    .bind(user_ids)
    .bind(env::STARTING_CASH)
    .fetch_all(db)
    .await?;
    let positions: Vec<(i32, String)> = sqlx::query_as(
        "with filled as (
           select user_id, symbol, sum(case when side = 'buy' then qty else -qty end) as qty
             from paper_fills where user_id = any($1) group by user_id, symbol)
         select coalesce(p.user_id, f.user_id), coalesce(p.symbol, f.symbol)
           from (select * from paper_positions where user_id = any($1)) p
           full join filled f on f.user_id = p.user_id and f.symbol = p.symbol
          where coalesce(p.qty, 0) <> coalesce(f.qty, 0)",
    )
    .bind(user_ids)
    .fetch_all(db)
    .await?;
    let orders: i64 = sqlx::query_scalar(
        "select count(*) from paper_orders o
          where o.user_id = any($1)
            and o.filled_qty <> coalesce((select sum(f.qty) from paper_fills f where f.order_id = o.id), 0)",
    )
    .bind(user_ids)
    .fetch_one(db)
    .await?;
    out.check(
        cash.is_empty() && positions.is_empty() && orders == 0,
        format!(
            "the books reconcile for {accounts} accounts: cash = starting cash - fills - fees \
             ({} accounts differ{}), positions = fills ({} differ), orders' filled qty = their \
             fills ({orders} differ)",
            cash.len(),
            cash.first()
                .map(|(u, has, want)| format!(", e.g. user {u}: {has} instead of {want}"))
                .unwrap_or_default(),
            positions.len()
        ),
    );
    Ok(())
}

pub(crate) fn label_counts(answers: impl Iterator<Item = Answer>) -> String {
    let tally = Tally::default();
    for a in answers {
        tally.add(a.label());
    }
    tally.summary()
}

/// Whether `n` server backends of the replicas wait on a lock within 1.5 s (well inside the
/// lock timeout), polled every 10 ms.
async fn lock_waiters_reach(db: &PgPool, n: i64) -> anyhow::Result<bool> {
    let deadline = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < deadline {
        let waiting: i64 = sqlx::query_scalar(
            "select count(*) from pg_stat_activity
              where wait_event_type = 'Lock' and application_name = 'raptor'",
        )
        .fetch_one(db)
        .await?;
        if waiting >= n {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(false)
}

/// A row lock the driver holds in a transaction of its own, until [`RowLock::release`].
struct RowLock(sqlx::PgConnection);

impl RowLock {
    /// The user's account row, which every order of theirs locks.
    async fn account(world: &World, user_id: i32) -> anyhow::Result<Self> {
        Self::take(
            world,
            sqlx::query("select cash from paper_accounts where user_id = $1 for update")
                .bind(user_id),
        )
        .await
    }

    /// A quote row, which every order on the symbol reads `FOR SHARE`.
    async fn quote(world: &World, symbol: &str) -> anyhow::Result<Self> {
        Self::take(
            world,
            sqlx::query("select 1 from quotes where symbol = $1 for update")
                .bind(symbol.to_owned()),
        )
        .await
    }

    /// An idempotency key's row, as a slow original's completing transaction holds it.
    async fn key(world: &World, key: &str) -> anyhow::Result<Self> {
        Self::take(
            world,
            sqlx::query("select 1 from idempotency_keys where idem_key = $1 for update")
                .bind(key.to_owned()),
        )
        .await
    }

    async fn take(
        world: &World,
        lock: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> anyhow::Result<Self> {
        let mut conn =
            sqlx::PgConnection::connect_with(&world.cluster.options(env::DATABASE, "postgres"))
                .await?;
        sqlx::raw_sql("begin").execute(&mut conn).await?;
        lock.execute(&mut conn).await?;
        Ok(Self(conn))
    }

    async fn release(mut self) -> anyhow::Result<()> {
        sqlx::raw_sql("rollback").execute(&mut self.0).await?;
        self.0.close().await?;
        Ok(())
    }
}
