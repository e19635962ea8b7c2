//! The scenarios. Each returns an [`Outcome`]: what it did and counted, and its violations.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::{Connection, PgPool};
use tokio::task::JoinSet;

use raptor_integration_tests::new_key;

use crate::env::{
    self, until_final, Answer, Bouncer, Cluster, Http, Replica, Tally, User, REQUEST_TIMEOUT_SECS,
    STALE_AFTER_SECS,
};

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

// ---------------------------------------------------------------------------------------------
// 1. kill -9 mid-transaction

pub(crate) async fn kill9(world: &mut World) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("1 kill -9 mid-transaction");
    let user = world.users("kill9", 1).await?.remove(0);
    let key = new_key();
    // The driver holds the account row: the server's order transaction blocks on it.
    let lock = RowLock::account(world, user.id).await?;
    let (http, base, token, k) = (
        world.http.clone(),
        world.replicas[0].base.clone(),
        user.token.clone(),
        key.clone(),
    );
    let request = tokio::spawn(async move { http.order(&base, &token, Some(&k)).await });
    // Wait until a server backend waits for our lock (bounded: well inside the lock timeout).
    let waiting = lock_waiters_reach(&world.db, 1).await?;
    out.check(
        waiting,
        "the server's order transaction blocked on the driver's row lock",
    );
    let status: Option<String> = sqlx::query_scalar(
        "select status from idempotency_keys where idem_key = $1 and scope_user_id = $2",
    )
    .bind(&key)
    .bind(user.id)
    .fetch_optional(&world.db)
    .await?;
    out.fact(format!("key row before the kill: {status:?}"));
    world.replicas[0].kill9().await?;
    let killed_at = Instant::now();
    let answer = request.await?;
    out.fact(format!(
        "SIGKILL sent; the client saw: {} ({})",
        answer.label(),
        answer.transport.as_deref().unwrap_or("")
    ));
    out.check(answer.status != 201, "the killed attempt answered no 201");
    lock.release().await?;
    // The orphaned backend notices its client is gone and rolls back.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let orders = orders_of(&world.db, user.id).await?;
    let audit: i64 = sqlx::query_scalar(
        "select count(*) from audit_log where user_id = $1 and action like 'order.%'",
    )
    .bind(user.id)
    .fetch_one(&world.db)
    .await?;
    out.check(
        orders == 0 && audit == 0,
        format!("no business rows from the killed attempt (paper_orders {orders}, order audit rows {audit})"),
    );
    world.replicas[0].start().await?;
    out.fact(format!(
        "replica 0 restarted {:.1} s after the kill",
        killed_at.elapsed().as_secs_f64()
    ));
    let bases = vec![world.replicas[0].base.clone()];
    let answers = until_final(
        &world.http,
        &bases,
        &user.token,
        &key,
        200,
        Duration::from_secs(STALE_AFTER_SECS * 3),
        Duration::from_millis(250),
    )
    .await;
    let first_ok = killed_at.elapsed().as_secs_f64();
    out.fact(format!(
        "retries of the same key: {} (final after {first_ok:.1} s since the kill; stale threshold {STALE_AFTER_SECS} s)",
        label_counts(answers.iter().cloned())
    ));
    let last = answers.last().cloned().context("no answer")?;
    out.check(
        last.status == 201,
        format!("the retry ended in 201 ({})", last.label()),
    );
    let replay = world.http.order(&bases[0], &user.token, Some(&key)).await;
    out.check(
        replay.status == 201
            && replay.replayed.as_deref() == Some("true")
            && replay.order_id == last.order_id,
        format!(
            "a further retry is the replay of the same order ({})",
            replay.label()
        ),
    );
    let orders = orders_of(&world.db, user.id).await?;
    out.check(
        orders == 1,
        format!("exactly one execution ({orders} orders)"),
    );
    Ok(out)
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

/// How many orders the user has.
async fn orders_of(db: &PgPool, user_id: i32) -> anyhow::Result<i64> {
    Ok(
        sqlx::query_scalar("select count(*) from paper_orders where user_id = $1")
            .bind(user_id)
            .fetch_one(db)
            .await?,
    )
}

/// 1b. A rolling deploy that shortens the timeouts: one replica still runs with a 10 s request
/// timeout and stale threshold while the others declare a key stale after 5 s. An attempt on
/// the old replica, blocked on the account row the driver holds, is taken over by a retry on a
/// new replica; when the driver lets go, the old attempt gets the lock first and must be
/// fenced off (its completion finds the key taken over), so the key executes once.
pub(crate) async fn late_attempt(world: &World) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("1b late attempt fenced off");
    let old_env = env::base_env(
        &world.cluster.url("postgres"),
        &[
            ("RAPTOR_REQUEST_TIMEOUT_SECS", "10".to_owned()),
            ("IDEMPOTENCY_STALE_AFTER_SECS", "10".to_owned()),
            ("RAPTOR_DB_LOCK_TIMEOUT_MS", "9000".to_owned()),
            ("RAPTOR_DB_STATEMENT_TIMEOUT_MS", "9000".to_owned()),
        ],
    );
    let mut old = Replica::spawn(&world.dir, "replica-old", old_env).await?;
    let user = world.users("late", 1).await?.remove(0);
    let key = new_key();
    let lock = RowLock::account(world, user.id).await?;
    let first = {
        let (http, base, token, key) = (
            world.http.clone(),
            old.base.clone(),
            user.token.clone(),
            key.clone(),
        );
        tokio::spawn(async move { http.order(&base, &token, Some(&key)).await })
    };
    // Past the new replicas' stale threshold (5 s), well inside the old one's (10 s).
    tokio::time::sleep(Duration::from_millis(STALE_AFTER_SECS * 1000 + 500)).await;
    let new_base = world.replicas[0].base.clone();
    let takeover = world.http.order(&new_base, &user.token, Some(&key)).await;
    out.fact(format!(
        "retry on a new replica after {STALE_AFTER_SECS}.5 s: {} ({})",
        takeover.label(),
        takeover.message.as_deref().unwrap_or("")
    ));
    let retry = {
        let (http, base, token, key) = (
            world.http.clone(),
            new_base.clone(),
            user.token.clone(),
            key.clone(),
        );
        tokio::spawn(async move { http.order(&base, &token, Some(&key)).await })
    };
    // Both attempts wait on the account row now; the old one queued first.
    let both = lock_waiters_reach(&world.db, 2).await?;
    out.check(
        both,
        "the old attempt and the retry both waited on the account row",
    );
    lock.release().await?;
    let first = first.await?;
    let retry = retry.await?;
    out.fact(format!(
        "old attempt answered {} ({}); the retry answered {}",
        first.label(),
        first.message.as_deref().unwrap_or(""),
        retry.label()
    ));
    let answers = until_final(
        &world.http,
        std::slice::from_ref(&new_base),
        &user.token,
        &key,
        100,
        Duration::from_secs(15),
        Duration::from_millis(200),
    )
    .await;
    let last = answers.last().cloned().context("no answer")?;
    out.check(
        last.status == 201,
        format!("the key ends in 201 ({})", last.label()),
    );
    out.check(
        first.status != 201 || retry.status != 201 || first.order_id == retry.order_id,
        "the old attempt and the retry did not both report a new order",
    );
    let orders = orders_of(&world.db, user.id).await?;
    out.check(
        orders == 1,
        format!("exactly one execution ({orders} orders)"),
    );
    old.kill9().await?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 2. Postgres restarted during keyed load

/// Closed-loop keyed load: each client its own user and replica (round robin), a fresh key per
/// order, every non-final answer retried with the same key. Runs until `stop` is set.
pub(crate) async fn keyed_load(
    http: &Http,
    bases: &[String],
    users: &[User],
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> anyhow::Result<BTreeMap<String, Vec<Answer>>> {
    let mut set = JoinSet::new();
    for (i, user) in users.iter().enumerate() {
        let (http, stop, tally, user) = (http.clone(), stop.clone(), tally.clone(), user.clone());
        // Each client favours one replica; its retries go round the others too.
        let mut mine = bases.to_vec();
        mine.rotate_left(i % bases.len());
        set.spawn(async move {
            let mut ledger = BTreeMap::new();
            for _ in 0..100_000 {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let key = new_key();
                let answers = until_final(
                    &http,
                    &mine,
                    &user.token,
                    &key,
                    400,
                    Duration::from_secs(40),
                    Duration::from_millis(100),
                )
                .await;
                for a in &answers {
                    tally.add(a.label());
                }
                ledger.insert(key, answers);
            }
            ledger
        });
    }
    let mut all = BTreeMap::new();
    while let Some(joined) = set.join_next().await {
        all.extend(joined?);
    }
    Ok(all)
}

/// Time until every replica answers readyz 200 and takes an order, from now.
pub(crate) async fn recovery(
    out: &mut Outcome,
    http: &Http,
    bases: &[String],
    probe: &User,
) -> anyhow::Result<Vec<f64>> {
    let started = Instant::now();
    let mut times = Vec::new();
    for base in bases {
        let mut done = None;
        while started.elapsed() < Duration::from_secs(20) {
            if http.readyz(base).await == 200 {
                let a = http.order(base, &probe.token, Some(&new_key())).await;
                if a.status == 201 {
                    done = Some(started.elapsed().as_secs_f64());
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        match done {
            Some(t) => times.push(t),
            None => {
                out.check(false, format!("replica {base} did not recover within 20 s"));
                times.push(f64::INFINITY);
            }
        }
    }
    Ok(times)
}

pub(crate) async fn pg_restart(
    world: &World,
    name: &str,
    bases: &[String],
    load_secs: u64,
) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new(name);
    let clients = 32;
    let users = world.users("restart", clients + 1).await?;
    let (probe, users) = users.split_last().context("users")?;
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let load = {
        let (http, bases, users, stop, tally) = (
            world.http.clone(),
            bases.to_vec(),
            users.to_vec(),
            stop.clone(),
            tally.clone(),
        );
        tokio::spawn(async move { keyed_load(&http, &bases, &users, stop, tally).await })
    };
    let started = Instant::now();
    let modes: &[&str] = &["fast", "immediate"];
    let slot = Duration::from_secs(load_secs / (modes.len() as u64 + 1));
    for mode in modes {
        tokio::time::sleep(slot).await;
        let before = tally.snapshot();
        let down = Instant::now();
        world.cluster.pg_stop(mode)?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        world.cluster.pg_start()?;
        let outage = down.elapsed().as_secs_f64();
        let times = recovery(&mut out, &world.http, bases, probe).await?;
        let after = tally.snapshot();
        let during: Vec<String> = after
            .iter()
            .filter_map(|(k, v)| {
                let d = v - before.get(k).copied().unwrap_or(0);
                (d > 0).then(|| format!("{k}: {d}"))
            })
            .collect();
        out.fact(format!(
            "pg_ctl stop -m {mode} at {:.1} s, start after {outage:.1} s; answers from stop to recovery: {}",
            (down - started).as_secs_f64(),
            during.join(", ")
        ));
        let worst = times.iter().copied().fold(0.0, f64::max);
        out.check(
            worst <= 5.0,
            format!(
                "every replica ready and taking orders {:.2} s after Postgres returned ({mode}; limit 5 s; per replica {:?})",
                worst,
                times.iter().map(|t| format!("{t:.2}")).collect::<Vec<_>>()
            ),
        );
    }
    tokio::time::sleep(slot).await;
    stop.store(true, Ordering::Release);
    let ledger = load.await??;
    out.fact(format!(
        "{clients} clients, {} s of load; all answers: {}",
        started.elapsed().as_secs(),
        tally.summary()
    ));
    let odd: u64 = tally
        .snapshot()
        .iter()
        .filter(|(k, _)| {
            !(k.starts_with("201")
                || k.starts_with("503")
                || k.as_str() == "409 idempotency_in_flight")
        })
        .map(|(_, v)| *v)
        .sum();
    out.check(
        odd == 0,
        format!("every answer was 201, 503 or 409 in flight ({odd} others)"),
    );
    check_ledger(&mut out, &world.db, &ledger).await?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 3. duplicates across replicas

pub(crate) async fn duplicates(
    world: &World,
    name: &str,
    bases: &[String],
    keys: usize,
) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new(name);
    let copies = 8;
    let users = world.users("dup", 40).await?;
    let drained = world.warm(bases).await?;
    out.fact(format!(
        "warm-up: {drained} answers other than 201 drained from the replicas"
    ));
    let started = Instant::now();
    let tally = Arc::new(Tally::default());
    let mut ledger: BTreeMap<String, Vec<Answer>> = BTreeMap::new();
    let keyset: Vec<(String, User)> = (0..keys)
        .map(|i| (new_key(), users[i % users.len()].clone()))
        .collect();
    // 12 keys (96 requests) in flight at a time; the 8 copies of a key go out together.
    for chunk in keyset.chunks(12) {
        let mut set = JoinSet::new();
        for (key, user) in chunk {
            for c in 0..copies {
                let (http, base, key, token) = (
                    world.http.clone(),
                    bases[c % bases.len()].clone(),
                    key.clone(),
                    user.token.clone(),
                );
                set.spawn(async move {
                    let a = http.order(&base, &token, Some(&key)).await;
                    (key, a)
                });
            }
        }
        while let Some(joined) = set.join_next().await {
            let (key, a) = joined?;
            tally.add(a.label());
            ledger.entry(key).or_default().push(a);
        }
    }
    let burst = started.elapsed().as_secs_f64();
    out.fact(format!(
        "{keys} keys x {copies} copies over {} replicas in {burst:.1} s: {}",
        bases.len(),
        tally.summary()
    ));
    let mut originals = 0;
    let mut bad = 0;
    for answers in ledger.values() {
        for a in answers {
            let first = a.status == 201 && a.replayed.as_deref() == Some("false");
            let dup_ok = (a.status == 201 && a.replayed.as_deref() == Some("true"))
                || (a.status == 409 && a.code.as_deref() == Some("idempotency_in_flight"));
            if first {
                originals += 1;
            } else if !dup_ok {
                bad += 1;
            }
        }
    }
    out.check(
        originals <= keys,
        format!("at most one first execution answer per key ({originals} for {keys} keys)"),
    );
    out.check(
        bad == 0,
        format!(
            "every duplicate got the replay or 409 idempotency_in_flight ({bad} other answers)"
        ),
    );
    // Requests here take milliseconds, far below the stale threshold: an attempt fenced off
    // (its completion found the key taken over) or a key taken over as stale means two
    // attempts of one key ran at once.
    let overlapping = ledger
        .values()
        .flatten()
        .filter(|a| {
            a.message.as_deref().is_some_and(|m| {
                m.contains("outlived the stale threshold") || m.contains("abandoned attempt")
            })
        })
        .count();
    out.check(
        overlapping == 0,
        format!("no attempt was fenced off or taken over as stale ({overlapping})"),
    );
    // Keys nobody executed (every copy saw another in flight that then rolled back) are
    // finished now, sequentially, so the count below is exact.
    let mut followed = 0;
    for (key, user) in &keyset {
        let answers = ledger.entry(key.clone()).or_default();
        if answers.iter().any(|a| a.status == 201) {
            continue;
        }
        followed += 1;
        let more = until_final(
            &world.http,
            bases,
            &user.token,
            key,
            100,
            Duration::from_secs(20),
            Duration::from_millis(200),
        )
        .await;
        answers.extend(more);
    }
    out.fact(format!(
        "{followed} keys had no 201 in the burst and were retried until final"
    ));
    let made = check_ledger(&mut out, &world.db, &ledger).await?;
    let executions: usize = made.values().map(Vec::len).sum();
    out.check(
        executions == keys,
        format!("exactly {keys} executions ({executions} orders in the database)"),
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 4. pool exhaustion

pub(crate) async fn pool_exhaustion(world: &World, secs: u64) -> anyhow::Result<(Outcome, String)> {
    let mut out = Outcome::new("4 pool exhaustion");
    let pool_size = 4;
    let lock_ms = 3_500u64;
    let env = env::base_env(
        &world.cluster.url("postgres"),
        &[
            ("RAPTOR_DB_POOL_SIZE", pool_size.to_string()),
            ("RAPTOR_DB_LOCK_TIMEOUT_MS", lock_ms.to_string()),
            ("RAPTOR_DB_STATEMENT_TIMEOUT_MS", "3800".to_owned()),
        ],
    );
    let mut replica = Replica::spawn(&world.dir, "replica-pool", env).await?;
    let base = replica.base.clone();
    let clients = 40;
    let users = world.users("pool", clients).await?;
    // The driver holds the quote row: every order (which reads it FOR SHARE) waits.
    let lock = RowLock::quote(world, "AAPL").await?;
    let hold = Duration::from_secs(secs);
    let started = Instant::now();
    let mut set = JoinSet::new();
    for user in users.clone() {
        let (http, base) = (world.http.clone(), base.clone());
        set.spawn(async move {
            let mut answers = Vec::new();
            while started.elapsed() < hold {
                answers.push(http.order(&base, &user.token, Some(&new_key())).await);
            }
            answers
        });
    }
    let lock_held = tokio::time::sleep(hold);
    lock_held.await;
    lock.release().await?;
    let mut answers = Vec::new();
    while let Some(joined) = set.join_next().await {
        answers.extend(joined?);
    }
    let limit = Duration::from_secs(REQUEST_TIMEOUT_SECS) + Duration::from_millis(500);
    let slowest = answers.iter().map(|a| a.elapsed).max().unwrap_or_default();
    let mut times: Vec<f64> = answers.iter().map(|a| a.elapsed.as_secs_f64()).collect();
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        times
            .get(((times.len() as f64 - 1.0) * p) as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let s503: Vec<&Answer> = answers.iter().filter(|a| a.status == 503).collect();
    let without_retry_after = s503.iter().filter(|a| a.retry_after.is_none()).count();
    let labels = label_counts(answers.iter().cloned());
    out.fact(format!(
        "pool {pool_size} (+{} store), {clients} clients for {secs} s against a held quote lock; answers: {labels}",
        (pool_size / 2).max(2)
    ));
    out.fact(format!(
        "latency p50 {:.2} s, p99 {:.2} s, max {:.2} s (request timeout {REQUEST_TIMEOUT_SECS} s)",
        pct(0.5),
        pct(0.99),
        slowest.as_secs_f64()
    ));
    let retry_afters: BTreeMap<String, usize> = s503.iter().fold(BTreeMap::new(), |mut m, a| {
        *m.entry(format!(
            "{}={}",
            a.code.clone().unwrap_or_default(),
            a.retry_after.clone().unwrap_or_default()
        ))
        .or_default() += 1;
        m
    });
    out.fact(format!("503s by code and Retry-After: {retry_afters:?}"));
    out.check(
        answers.iter().all(|a| a.status != 0),
        "every request got an HTTP answer",
    );
    out.check(
        slowest <= limit,
        format!(
            "every request answered within the request timeout + 0.5 s ({:.2} s)",
            slowest.as_secs_f64()
        ),
    );
    out.check(
        !s503.is_empty(),
        format!("the overload answered 503 ({})", s503.len()),
    );
    out.check(
        without_retry_after == 0,
        format!("every 503 carries Retry-After ({without_retry_after} do not)"),
    );
    let odd = answers
        .iter()
        .filter(|a| !(a.status == 201 || a.status == 503))
        .count();
    out.check(
        odd == 0,
        format!("every answer was 201 or 503 ({odd} others)"),
    );
    // Recovery: the lock is gone; 20 orders, 4 at a time.
    let recovered = Instant::now();
    let mut ok = 0;
    for chunk in users.chunks(4).take(5) {
        let mut set = JoinSet::new();
        for user in chunk {
            let (http, base, token) = (world.http.clone(), base.clone(), user.token.clone());
            set.spawn(async move { http.order(&base, &token, Some(&new_key())).await });
        }
        while let Some(joined) = set.join_next().await {
            if joined?.status == 201 {
                ok += 1;
            }
        }
    }
    out.check(
        ok == 20,
        format!(
            "recovered: {ok}/20 orders succeeded right after the load dropped ({:.2} s)",
            recovered.elapsed().as_secs_f64()
        ),
    );
    let figures = format!(
        "RAPTOR_DB_POOL_SIZE={pool_size}, lock held {secs} s, {clients} clients: {} requests; {labels}; \
         p50 {:.2} s, p99 {:.2} s, max {:.2} s; 503s {retry_afters:?}; 20/20 orders after the lock was released: {}",
        answers.len(),
        pct(0.5),
        pct(0.99),
        slowest.as_secs_f64(),
        ok == 20
    );
    replica.kill9().await?;
    Ok((out, figures))
}

// ---------------------------------------------------------------------------------------------
// 6. slow database

pub(crate) async fn slow_database(world: &World) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("6 slow database");
    // The configuration refuses a stale threshold below the request timeout.
    let refused = env::raptor_cli(
        &env::base_env(
            &world.cluster.url("postgres"),
            &[
                ("IDEMPOTENCY_STALE_AFTER_SECS", "2".to_owned()),
                ("RAPTOR_REQUEST_TIMEOUT_SECS", "4".to_owned()),
            ],
        ),
        &["migrate"],
    )
    .await;
    out.check(
        refused
            .as_ref()
            .err()
            .is_some_and(|e| e.to_string().contains("IDEMPOTENCY_STALE_AFTER_SECS")),
        "a stale threshold below the request timeout is refused at start-up",
    );
    out.check(
        STALE_AFTER_SECS > REQUEST_TIMEOUT_SECS,
        format!("replicas run with stale {STALE_AFTER_SECS} s > request timeout {REQUEST_TIMEOUT_SECS} s"),
    );
    let users = world.users("slow", 12).await?;
    let bases = world.bases();
    let drained = world.warm(&bases).await?;
    out.fact(format!(
        "warm-up: {drained} answers other than 201 drained from the replicas"
    ));
    let mut all: Vec<Answer> = Vec::new();
    let mut ledger: BTreeMap<String, Vec<Answer>> = BTreeMap::new();
    for (delay, label) in [
        ("1.5", "each fill insert sleeps 1.5 s"),
        ("6", "each fill insert sleeps 6 s"),
    ] {
        sqlx::query(&format!(
            "create or replace function chaos_slow() returns trigger language plpgsql as
             $$ begin perform pg_sleep({delay}); return new; end $$"
        ))
        .execute(&world.db)
        .await?;
        sqlx::query(
            "create or replace trigger chaos_slow before insert on paper_fills
             for each row execute function chaos_slow()",
        )
        .execute(&world.db)
        .await?;
        // 12 keys, each sent once; then duplicates of each every 400 ms while it may run.
        let mut set = JoinSet::new();
        for (i, user) in users.iter().enumerate() {
            let (http, bases, user) = (world.http.clone(), bases.clone(), user.clone());
            set.spawn(async move {
                let key = new_key();
                let first = {
                    let (http, base, token, key) = (
                        http.clone(),
                        bases[i % bases.len()].clone(),
                        user.token.clone(),
                        key.clone(),
                    );
                    tokio::spawn(async move { http.order(&base, &token, Some(&key)).await })
                };
                let mut answers = Vec::new();
                for j in 0..10 {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                    if first.is_finished() {
                        break;
                    }
                    answers.push(
                        http.order(&bases[(i + j + 1) % bases.len()], &user.token, Some(&key))
                            .await,
                    );
                }
                let first = first.await.map_err(anyhow::Error::from)?;
                answers.insert(0, first);
                Ok::<_, anyhow::Error>((key, answers))
            });
        }
        let mut round = Vec::new();
        while let Some(joined) = set.join_next().await {
            let (key, answers) = joined??;
            round.extend(answers.iter().cloned());
            ledger.insert(key, answers);
        }
        let slowest = round.iter().map(|a| a.elapsed).max().unwrap_or_default();
        out.check(
            slowest >= Duration::from_millis(1400),
            format!(
                "the injected delay was felt ({label}: slowest {:.2} s)",
                slowest.as_secs_f64()
            ),
        );
        out.fact(format!(
            "{label}: {} requests, slowest {:.2} s; {}",
            round.len(),
            slowest.as_secs_f64(),
            label_counts(round.iter().cloned())
        ));
        all.extend(round);
    }
    sqlx::query("drop trigger chaos_slow on paper_fills")
        .execute(&world.db)
        .await?;
    let limit = Duration::from_secs(REQUEST_TIMEOUT_SECS) + Duration::from_millis(500);
    let slowest = all.iter().map(|a| a.elapsed).max().unwrap_or_default();
    out.check(
        slowest <= limit,
        format!(
            "no request ran past the request timeout + 0.5 s (slowest {:.2} s of {})",
            slowest.as_secs_f64(),
            all.len()
        ),
    );
    let stale = all
        .iter()
        .filter(|a| {
            a.code.as_deref() == Some("idempotency_in_flight")
                && a.retry_after.as_deref() == Some("0")
        })
        .count();
    out.check(
        stale == 0,
        format!("no key was taken over as stale while its first attempt ran ({stale})"),
    );
    let keys: Vec<String> = ledger.keys().cloned().collect();
    let made = orders_by_key(&world.db, &keys).await?;
    let twice = made.values().filter(|v| v.len() > 1).count();
    out.check(twice == 0, format!("no key executed twice ({twice})"));
    let unacked = ledger
        .iter()
        .filter(|(k, answers)| {
            !answers.iter().any(|a| a.status == 201) && made.get(*k).is_some_and(|v| !v.is_empty())
        })
        .count();
    out.check(
        unacked == 0,
        format!("no key whose every answer was an error made an order ({unacked})"),
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 7. kill switch flip under load

async fn flag_seen(
    world: &World,
    base: &str,
    probe: &User,
    want_enabled: bool,
    since: Instant,
) -> anyhow::Result<Option<f64>> {
    while since.elapsed() < Duration::from_secs(5) {
        let key = new_key();
        let a = world.http.order(base, &probe.token, Some(&key)).await;
        if a.status == 201 {
            let tracked: bool = sqlx::query_scalar(
                "select exists (select 1 from idempotency_keys where idem_key = $1)",
            )
            .bind(&key)
            .fetch_one(&world.db)
            .await?;
            if tracked == want_enabled {
                return Ok(Some(since.elapsed().as_secs_f64()));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(None)
}

pub(crate) async fn kill_switch(world: &World, secs: u64) -> anyhow::Result<Outcome> {
    let mut out = Outcome::new("7 kill switch under load");
    let clients = 24;
    let users = world.users("flag", clients + 3).await?;
    let (load_users, probes) = users.split_at(clients);
    let bases = world.bases();
    let drained = world.warm(&bases).await?;
    out.fact(format!(
        "warm-up: {drained} answers other than 201 drained from the replicas"
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    // Each key is sent once, and again only after a 503 (nothing committed): with the switch off
    // there is no dedup, so a retry of an unknown outcome could legitimately run twice.
    let mut set = JoinSet::new();
    for (i, user) in load_users.iter().enumerate() {
        let (http, base, user, stop, tally) = (
            world.http.clone(),
            bases[i % bases.len()].clone(),
            user.clone(),
            stop.clone(),
            tally.clone(),
        );
        set.spawn(async move {
            let mut ledger: Vec<(String, Vec<Answer>)> = Vec::new();
            for _ in 0..100_000 {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let key = new_key();
                let mut answers = Vec::new();
                for _ in 0..50 {
                    let a = http.order(&base, &user.token, Some(&key)).await;
                    tally.add(a.label());
                    let again = a.status == 503;
                    answers.push(a);
                    if !again {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                ledger.push((key, answers));
            }
            (user.id, ledger)
        });
    }
    let pause = Duration::from_secs(secs / 3);
    for enabled in [false, true] {
        tokio::time::sleep(pause).await;
        let body = format!(r#"{{"enabled":{enabled}}}"#);
        let put = world
            .http
            .send(
                reqwest::Method::PUT,
                &bases[0],
                "/api/admin/flags/FLAG_IDEMPOTENCY_MIDDLEWARE",
                &world.operator.token,
                None,
                Some(body),
            )
            .await;
        let flipped = Instant::now();
        out.check(
            put.status == 200,
            format!("PUT flag enabled={enabled}: {}", put.label()),
        );
        let mut seen = Vec::new();
        for (base, probe) in bases.iter().zip(probes) {
            seen.push(flag_seen(world, base, probe, enabled, flipped).await?);
        }
        let worst = seen
            .iter()
            .map(|s| s.unwrap_or(f64::INFINITY))
            .fold(0.0, f64::max);
        out.check(
            worst <= 1.0,
            format!(
                "every replica saw enabled={enabled} within 1 s (per replica {:?} s)",
                seen.iter()
                    .map(|s| s.map_or("never".to_owned(), |t| format!("{t:.2}")))
                    .collect::<Vec<_>>()
            ),
        );
    }
    tokio::time::sleep(pause).await;
    stop.store(true, Ordering::Release);
    let mut per_user: Vec<(i32, KeyLedger)> = Vec::new();
    while let Some(joined) = set.join_next().await {
        per_user.push(joined?);
    }
    out.fact(format!("{clients} clients; answers: {}", tally.summary()));
    // Per account: orders in the database == keys answered 201; every received id exists.
    let (mut lost, mut extra, mut unanswered) = (0, 0, 0);
    for (user_id, ledger) in &per_user {
        let ids: Vec<String> =
            sqlx::query_scalar("select id::text from paper_orders where user_id = $1")
                .bind(user_id)
                .fetch_all(&world.db)
                .await?;
        let ids: HashSet<String> = ids.into_iter().collect();
        let mut got = 0;
        for (_, answers) in ledger {
            match answers.last() {
                Some(a) if a.status == 201 => {
                    got += 1;
                    if !a.order_id.as_ref().is_some_and(|id| ids.contains(id)) {
                        lost += 1;
                    }
                }
                Some(a) if a.status == 0 => unanswered += 1,
                _ => {}
            }
        }
        if ids.len() != got {
            extra += ids.len().abs_diff(got);
        }
    }
    out.check(
        lost == 0,
        format!("every 201 names a committed order ({lost} do not)"),
    );
    out.check(
        extra == 0 && unanswered == 0,
        format!("orders per account == 201s per account (off by {extra}; {unanswered} requests unanswered)"),
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// 5. PgBouncer

/// Roles with the session settings the replicas need behind a transaction pooler.
pub(crate) async fn prepare_roles(world: &World) -> anyhow::Result<()> {
    // The store role's timeouts: what the service derives from its store timeout.
    let half =
        raptor_db::StoreBudget::new(Duration::from_millis(env::STORE_TIMEOUT_MS)).session_ms();
    for sql in [
        "do $$ begin
           if not exists (select 1 from pg_roles where rolname = 'raptor') then create role raptor login; end if;
           if not exists (select 1 from pg_roles where rolname = 'raptor_idem') then create role raptor_idem login; end if;
         end $$",
        "grant all on all tables in schema public to raptor, raptor_idem",
        "grant all on all sequences in schema public to raptor, raptor_idem",
        &format!("alter role raptor set lock_timeout = '{}ms'", env::LOCK_TIMEOUT_MS),
        &format!("alter role raptor set statement_timeout = '{}ms'", env::STATEMENT_TIMEOUT_MS),
        "alter role raptor_idem set synchronous_commit = off",
        &format!("alter role raptor_idem set lock_timeout = '{half}ms'"),
        &format!("alter role raptor_idem set statement_timeout = '{half}ms'"),
    ] {
        sqlx::query(sql).execute(&world.db).await.with_context(|| sql.to_owned())?;
    }
    Ok(())
}

pub(crate) async fn bouncer_replicas(
    world: &World,
    bouncer: &Bouncer,
    pool_mode: &str,
) -> anyhow::Result<Vec<Replica>> {
    let mut replicas = Vec::new();
    for i in 0..3 {
        let name = format!("replica-bouncer-{pool_mode}-{i}");
        replicas.push(bouncer_replica(world, bouncer, &name, pool_mode, &[]).await?);
    }
    Ok(replicas)
}

/// One replica through `bouncer` (roles carry the settings), with `extra` environment.
async fn bouncer_replica(
    world: &World,
    bouncer: &Bouncer,
    name: &str,
    pool_mode: &str,
    extra: &[(&str, String)],
) -> anyhow::Result<Replica> {
    let mut vars = vec![
        ("IDEMPOTENCY_STORE_DATABASE_URL", bouncer.url("raptor_idem")),
        ("RAPTOR_DB_SESSION_SETTINGS", "role".to_owned()),
        ("RAPTOR_DB_POOL_MODE", pool_mode.to_owned()),
    ];
    vars.extend(extra.iter().cloned());
    let env = env::base_env(&bouncer.url("raptor"), &vars);
    Replica::spawn(&world.dir, name, env).await
}

/// 5d: a busy store never runs a completed Tier 2 key again (transaction pooling). A replica
/// with a business pool of 4 (so a store pool of 2) and the 2-second store timeout; a profile
/// patch with key K completes; the driver holds K's row as a slow completing original would,
/// while 12 clients retry K twice each, so the waiting claims saturate the store pool. Every
/// answer must be 409 or 503 (none a fresh execution), the profile is not written again, and
/// the replica counts no `fail_open`.
pub(crate) async fn busy_store_tier2(
    world: &World,
    bouncer: &Bouncer,
    name: &str,
) -> anyhow::Result<Outcome> {
    let mut o = Outcome::new(name);
    let mut replica = bouncer_replica(
        world,
        bouncer,
        "replica-bouncer-busy-store",
        "transaction",
        &[("RAPTOR_DB_POOL_SIZE", "4".to_owned())],
    )
    .await?;
    let user = world.users("busy-store", 1).await?.remove(0);
    let key = new_key();
    let body = r#"{"display_name":"Busy Store"}"#.to_owned();
    let patch = |http: Http, base: String, token: String, key: String, body: String| async move {
        http.send(
            reqwest::Method::PATCH,
            &base,
            "/api/account/profile",
            &token,
            Some(&key),
            Some(body),
        )
        .await
    };
    let first = patch(
        world.http.clone(),
        replica.base.clone(),
        user.token.clone(),
        key.clone(),
        body.clone(),
    )
    .await;
    o.check(
        first.status == 200 && first.replayed.as_deref() == Some("false"),
        format!("the first patch executed: {}", first.label()),
    );
    let updated_at = || async {
        sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
            "select updated_at from users where id = $1",
        )
        .bind(user.id)
        .fetch_one(&world.db)
        .await
    };
    let before = updated_at().await?;
    let hold = Duration::from_secs(if world.quick { 5 } else { 8 });
    let lock = RowLock::key(world, &key).await?;
    let held = Instant::now();
    let mut clients = JoinSet::new();
    for _ in 0..12 {
        let (http, base, token, key, body) = (
            world.http.clone(),
            replica.base.clone(),
            user.token.clone(),
            key.clone(),
            body.clone(),
        );
        clients.spawn(async move {
            let mut answers = Vec::new();
            for _ in 0..2 {
                answers.push(
                    patch(
                        http.clone(),
                        base.clone(),
                        token.clone(),
                        key.clone(),
                        body.clone(),
                    )
                    .await,
                );
            }
            answers
        });
    }
    let answers: Vec<Answer> = clients.join_all().await.into_iter().flatten().collect();
    let answered_within_hold = held.elapsed() < hold;
    tokio::time::sleep(hold.saturating_sub(held.elapsed())).await;
    lock.release().await?;
    let mut tally = BTreeMap::new();
    for answer in &answers {
        *tally.entry(answer.label()).or_insert(0) += 1;
    }
    let fresh = answers
        .iter()
        .filter(|a| a.status == 200 && a.replayed.as_deref() == Some("false"))
        .count();
    o.check(
        answered_within_hold,
        format!("all {} answers came while the row was held", answers.len()),
    );
    o.check(
        fresh == 0,
        format!("fresh executions of the completed key while it was held: {fresh}"),
    );
    o.check(
        answers.iter().all(|a| {
            (a.status == 409 && a.code.as_deref() == Some("idempotency_in_flight"))
                || (a.status == 503 && a.code.as_deref() == Some("idempotency_store_unavailable"))
        }),
        format!("every answer was 409 in flight or 503: {tally:?}"),
    );
    let after = updated_at().await?;
    o.check(after == before, "the profile was not written again");
    let audited: i64 = sqlx::query_scalar(
        "select count(*) from audit_log where user_id = $1 and action = 'profile.updated'",
    )
    .bind(user.id)
    .fetch_one(&world.db)
    .await?;
    o.check(
        audited == 1,
        format!("profile.updated audit rows: {audited}"),
    );
    let fail_open = fail_open_count(&world.http, &replica.base).await;
    o.check(
        fail_open == Some(0),
        format!("the replica's outcome=\"fail_open\" count: {fail_open:?}"),
    );
    replica.kill9().await?;
    Ok(o)
}

/// `raptor_idempotency_requests_total{outcome="fail_open"}` summed over endpoints, from a
/// replica's `/metrics` (`None`: not readable).
async fn fail_open_count(http: &Http, base: &str) -> Option<u64> {
    let text = http.text(&format!("{base}/metrics")).await?;
    Some(
        text.lines()
            .filter(|line| {
                line.starts_with("raptor_idempotency_requests_total")
                    && line.contains("outcome=\"fail_open\"")
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum(),
    )
}

/// Statements sent to Postgres through PgBouncer that keep session state, counted from the
/// server log (log_statement = all for the two roles while the scenario runs).
pub(crate) async fn session_state_in_log(
    world: &World,
    from: u64,
) -> anyhow::Result<(usize, usize, Vec<String>)> {
    let log = std::fs::read(world.cluster.dir.join("log"))?;
    let text = String::from_utf8_lossy(log.get(usize::try_from(from)?..).unwrap_or_default());
    let (mut unnamed, mut named) = (0, 0);
    let mut session = Vec::new();
    for line in text.lines() {
        if line.contains("execute <unnamed>") {
            unnamed += 1;
        } else if line.contains("execute sqlx_s_") {
            named += 1;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(idx) = lower.find("statement: ") {
            let stmt = lower[idx + 11..].trim_start();
            // PgBouncer itself re-applies the client's tracked startup parameters on the server
            // session it links (`set timezone=…;set application_name=…`): not the application's.
            let tracked = stmt
                .split(';')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .all(|p| {
                    [
                        "set timezone=",
                        "set application_name=",
                        "set client_encoding=",
                        "set datestyle=",
                        "set standard_conforming_strings=",
                    ]
                    .iter()
                    .any(|prefix| p.starts_with(prefix))
                });
            if tracked {
                continue;
            }
            if (stmt.starts_with("set ") && !stmt.starts_with("set local"))
                || stmt.starts_with("listen")
                || stmt.starts_with("prepare")
                || stmt.contains("pg_advisory_lock(")
                || stmt.starts_with("create temp")
            {
                session.push(stmt.chars().take(120).collect());
            }
        }
    }
    Ok((unnamed, named, session))
}

pub(crate) fn log_len(world: &World) -> u64 {
    std::fs::metadata(world.cluster.dir.join("log")).map_or(0, |m| m.len())
}

/// `pgbouncer --version`'s first line.
pub(crate) fn pgbouncer_version() -> String {
    std::process::Command::new("pgbouncer")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|t| t.lines().next().map(str::to_owned))
        .unwrap_or_else(|| "(version unknown)".to_owned())
}

/// Reads the session settings `n` times per role through PgBouncer, each on a fresh client
/// connection and in the simple query protocol (what a transaction pooler passes through);
/// returns what was seen and whether it matched the role's settings.
pub(crate) async fn role_settings_via(
    bouncer: &Bouncer,
    n: usize,
) -> anyhow::Result<Vec<(String, bool)>> {
    use sqlx::Row;
    // The store role's timeouts: what the service derives from its store timeout.
    let half =
        raptor_db::StoreBudget::new(Duration::from_millis(env::STORE_TIMEOUT_MS)).session_ms();
    let want = [
        (
            "raptor",
            format!(
                "{}ms/{}ms/on",
                env::LOCK_TIMEOUT_MS,
                env::STATEMENT_TIMEOUT_MS
            ),
        ),
        ("raptor_idem", format!("{half}ms/{half}ms/off")),
    ];
    let mut seen = Vec::new();
    for (role, expected) in want {
        let options: sqlx::postgres::PgConnectOptions = bouncer.url(role).parse()?;
        for _ in 0..n {
            let mut conn = sqlx::PgConnection::connect_with(&options).await?;
            let row = sqlx::raw_sql(
                "select (select setting from pg_settings where name = 'lock_timeout'),
                        (select setting from pg_settings where name = 'statement_timeout'),
                        current_setting('synchronous_commit')",
            )
            .fetch_one(&mut conn)
            .await?;
            let text = format!(
                "{}ms/{}ms/{}",
                row.try_get::<String, _>(0)?,
                row.try_get::<String, _>(1)?,
                row.try_get::<String, _>(2)?
            );
            seen.push((format!("{role}: {text}"), text == expected));
            conn.close().await?;
        }
    }
    Ok(seen)
}
