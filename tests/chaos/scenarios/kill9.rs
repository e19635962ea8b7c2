//! 1. Kill -9 mid-transaction.

use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::PgPool;

use raptor_integration_tests::new_key;

use crate::env::{self, until_final, Replica, STALE_AFTER_SECS};

use super::{label_counts, lock_waiters_reach, Outcome, RowLock, World};

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
