//! Hardening (review and black-box findings): each test fails on the code before its fix.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{Call, Options, TestApp, TestResponse};

fn buy(symbol: &str, qty: &str) -> Value {
    json!({ "symbol": symbol, "qty": qty, "side": "buy", "type": "market" })
}

async fn keyed(app: &TestApp, token: &str, key: Uuid, body: &Value) -> TestResponse {
    app.post("/api/trading/orders", token, Some(key), body)
        .await
}

/// Defect 1: a key reused after it expired executes (the contract: an expired key is absent),
/// with a new derived client_order_id; within one lifetime every retry derives the same one.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn expired_key_reuse_executes_with_a_new_client_order_id(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("reuse@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let key = Uuid::new_v4();
    let first = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);

    // A day later the key has expired (and the order is as old as its key).
    sqlx::query("update idempotency_keys set expires_at = now() - interval '1 second'")
        .execute(&app.pool)
        .await
        .expect("expire key");
    sqlx::query("update paper_orders set created_at = created_at - interval '25 hours'")
        .execute(&app.pool)
        .await
        .expect("age order");
    let reused = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(reused.status, StatusCode::CREATED, "{}", reused.text);
    assert_eq!(reused.header("idempotent-replayed"), Some("false"));
    assert_ne!(
        reused.body["client_order_id"],
        first.body["client_order_id"]
    );
    assert_ne!(reused.body["id"], first.body["id"]);
    let replay = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        replay.body["client_order_id"],
        reused.body["client_order_id"]
    );
    assert_eq!(app.count("select count(*) from paper_orders").await, 2);
    app.close().await;
}

/// Defect 1, within one lifetime: an attempt released mid-flight (the client gave up) and its
/// retry derive the same client_order_id, which differs from another key's.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn derived_client_order_id_is_stable_across_a_released_attempt(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("stable@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let key = Uuid::new_v4();
    // Hold the account row so that the first attempt waits inside its transaction, then give up.
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("select 1 from paper_accounts for update")
        .execute(&mut *holder)
        .await
        .expect("lock account");
    let call = Call::new(Method::POST, "/api/trading/orders")
        .token(&token)
        .key(key)
        .json(&buy("AAPL", "1"));
    let gave_up = tokio::time::timeout(std::time::Duration::from_millis(300), app.send(call)).await;
    assert!(gave_up.is_err());
    holder.rollback().await.expect("unlock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        let status: Option<String> = sqlx::query_scalar("select status from idempotency_keys")
            .fetch_optional(&app.pool)
            .await
            .expect("status");
        if status.as_deref() == Some("released") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never released: {status:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let lineage_before: Uuid = sqlx::query_scalar("select lineage from idempotency_keys")
        .fetch_one(&app.pool)
        .await
        .expect("lineage");
    let retry = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
    let lineage_after: Uuid = sqlx::query_scalar("select lineage from idempotency_keys")
        .fetch_one(&app.pool)
        .await
        .expect("lineage");
    assert_eq!(lineage_before, lineage_after);
    let other = keyed(&app, &token, Uuid::new_v4(), &buy("AAPL", "1")).await;
    assert_ne!(other.body["client_order_id"], retry.body["client_order_id"]);
    assert_eq!(app.count("select count(*) from paper_orders").await, 2);
    app.close().await;
}

/// Defect 7: with the kill switch off a valid key still derives the client_order_id, so the
/// same request retried after the switch is back on cannot execute a second time.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn kill_switch_off_still_derives_the_client_order_id(pool: PgPool) {
    let mut options = Options::default();
    options.idempotency.flag_default = false;
    let app = TestApp::with(&pool, options).await;
    let (_, token) = app.user("switch@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let key = Uuid::new_v4();
    let off = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(off.status, StatusCode::CREATED, "{}", off.text);
    assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);

    let on = TestApp::new(&pool).await;
    let retry = keyed(&on, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(
        retry.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        retry.text
    );
    assert_eq!(retry.body["error"], "duplicate_client_order_id");
    assert_eq!(app.count("select count(*) from paper_orders").await, 1);
    on.close().await;
    app.close().await;
}

/// Inserts `n` resting limit buys of `symbol` (1 share at `limit`) for `user_id`, directly.
pub(crate) async fn resting_orders(app: &TestApp, user_id: i32, symbol: &str, limit: &str, n: i32) {
    let mut tx = app.pool.begin().await.expect("begin");
    sqlx::query(
        "insert into paper_orders (id, user_id, client_order_id, order_class, order_type,
                                   time_in_force, symbol, side, position_intent, qty,
                                   limit_price, status, reserved_cash)
         select gen_random_uuid(), $1, 'seed-' || g, 'simple', 'limit', 'gtc', $2, 'buy',
                'buy_to_open', 1, $3::numeric, 'new', $3::numeric
           from generate_series(1, $4) g",
    )
    .bind(user_id)
    .bind(symbol)
    .bind(limit)
    .bind(n)
    .execute(&mut *tx)
    .await
    .expect("seed orders");
    sqlx::query(
        "insert into paper_order_legs (order_id, leg_index, symbol, side, position_intent,
                                       ratio_qty, qty)
         select id, 0, symbol, side, position_intent, 1, qty
           from paper_orders where user_id = $1 and client_order_id like 'seed-%'",
    )
    .bind(user_id)
    .execute(&mut *tx)
    .await
    .expect("seed legs");
    tx.commit().await.expect("commit");
}

/// Defect 3: an account with `RAPTOR_MAX_OPEN_ORDERS` open orders cannot rest another one
/// (it can still trade at market).
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn open_orders_per_account_are_capped(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (user_id, token) = app.user("cap@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    resting_orders(&app, user_id, "AAPL", "1.00", 499).await;
    let limit = json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit",
                        "limit_price": "2.00", "time_in_force": "gtc" });
    let five_hundredth = keyed(&app, &token, Uuid::new_v4(), &limit).await;
    assert_eq!(
        five_hundredth.status,
        StatusCode::CREATED,
        "{}",
        five_hundredth.text
    );
    assert_eq!(five_hundredth.body["status"], "new");
    let over = keyed(&app, &token, Uuid::new_v4(), &limit).await;
    assert_eq!(
        over.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        over.text
    );
    assert_eq!(over.body["error"], "too_many_open_orders");
    let market = keyed(&app, &token, Uuid::new_v4(), &buy("AAPL", "1")).await;
    assert_eq!(market.status, StatusCode::CREATED, "{}", market.text);
    assert_eq!(
        app.count("select count(*) from paper_orders where status = 'new'")
            .await,
        500
    );
    app.close().await;
}

/// Defect 5: a multi-leg order with thousands of legs is refused on its shape, before any quote
/// lock or audit write; no audit row can exceed the context cap.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn oversized_orders_are_refused_before_any_lock_or_audit(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("legs@example.com").await;
    let legs: Vec<Value> = (0..5000)
        .map(|_| json!({ "symbol": "AAPL", "ratio_qty": 1, "side": "buy" }))
        .collect();
    let body = json!({ "order_class": "mleg", "qty": "1", "type": "market", "legs": legs });
    // A quote row locked by someone else: an order that tried to lock quotes would wait.
    app.quote("AAPL", "1.00", "1.10").await;
    let audit_before = app.count("select count(*) from audit_log").await;
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("select 1 from quotes where symbol = 'AAPL' for update")
        .execute(&mut *holder)
        .await
        .expect("lock quote");
    let refused = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        keyed(&app, &token, Uuid::new_v4(), &body),
    )
    .await
    .expect("answered without waiting for the quote lock");
    holder.rollback().await.expect("unlock");
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert_eq!(refused.body["error"], "invalid_order");
    assert_eq!(
        app.count("select count(*) from audit_log").await,
        audit_before
    );

    let long_symbol = buy(&"X".repeat(10_000), "1");
    let refused = keyed(&app, &token, Uuid::new_v4(), &long_symbol).await;
    assert_eq!(refused.body["error"], "invalid_symbol");

    let mut conn = app.pool.acquire().await.expect("conn");
    raptor_api::audit::record(
        &mut conn,
        raptor_api::audit::AuditEvent::named(
            None,
            "probe.big",
            json!({ "blob": "x".repeat(100_000) }),
        ),
    )
    .await
    .expect("audit");
    let largest: i32 = sqlx::query_scalar("select max(length(context::text)) from audit_log")
        .fetch_one(&app.pool)
        .await
        .expect("size");
    assert!(
        largest <= raptor_api::audit::MAX_CONTEXT_BYTES as i32,
        "{largest}"
    );
    drop(conn);
    app.close().await;
}

/// Defect 5: a resting order whose re-evaluation is refused is audited when the verdict
/// changes, not on every quote update.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn evaluation_rejections_are_audited_once_per_change(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("ticks@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    assert_eq!(
        keyed(&app, &token, Uuid::new_v4(), &buy("AAPL", "1"))
            .await
            .status,
        StatusCode::CREATED
    );
    let sell = json!({ "symbol": "AAPL", "qty": "1", "side": "sell", "type": "limit",
                       "limit_price": "200.00", "time_in_force": "gtc",
                       "position_intent": "sell_to_close" });
    let resting = keyed(&app, &token, Uuid::new_v4(), &sell).await;
    assert_eq!(resting.body["status"], "new", "{}", resting.text);
    // The holding disappears behind the order's back (a state the engine must refuse to fill).
    sqlx::query("update paper_positions set qty = 0")
        .execute(&app.pool)
        .await
        .expect("flatten");
    for bid in ["201.00", "202.00", "203.00"] {
        app.quote("AAPL", bid, "204.00").await;
    }
    let rows = "select count(*) from audit_log where action = 'order.evaluation_rejected'";
    assert_eq!(app.count(rows).await, 1, "one row for one verdict");
    app.quote("AAPL", "150.00", "151.00").await; // not marketable: the verdict clears
    app.quote("AAPL", "205.00", "206.00").await;
    assert_eq!(
        app.count(rows).await,
        2,
        "a changed verdict is audited again"
    );
    app.close().await;
}

/// Defect 4: a business transaction that waits on a lock past `lock_timeout` answers 503 with
/// `Retry-After`, rolls back and releases its key, so the retry executes once.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn lock_timeout_answers_503_and_the_retry_executes(pool: PgPool) {
    let options = Options {
        db_timeouts: Some((
            std::time::Duration::from_millis(300),
            std::time::Duration::from_secs(5),
        )),
        ..Options::default()
    };
    let app = TestApp::with(&pool, options).await;
    let (_, token) = app.user("busy@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let key = Uuid::new_v4();
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("select 1 from paper_accounts for update")
        .execute(&mut *holder)
        .await
        .expect("lock account");
    let busy = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    holder.rollback().await.expect("unlock");
    assert_eq!(
        busy.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        busy.text
    );
    assert_eq!(busy.body["error"], "database_busy");
    assert!(busy.header("retry-after").is_some());
    assert_eq!(app.count("select count(*) from paper_orders").await, 0);

    let retry = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
    assert_eq!(app.count("select count(*) from paper_orders").await, 1);
    app.close().await;
}

/// Defect 4: 25 concurrent orders on one (locked) account hold at most a few connections; the
/// excess waits briefly and gets 429, and another user's order is never starved of a
/// connection past its store timeout.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn one_busy_account_does_not_starve_other_users(pool: PgPool) {
    let mut options = Options {
        pool_size: 8,
        db_timeouts: Some((
            std::time::Duration::from_secs(3),
            std::time::Duration::from_secs(10),
        )),
        ..Options::default()
    };
    options.idempotency.store_timeout = std::time::Duration::from_millis(1000);
    options.api.account_write_wait = std::time::Duration::from_millis(500);
    let app = TestApp::with(&pool, options).await;
    let (_, busy_token) = app.user("busy@example.com").await;
    let (_, other_token) = app.user("other@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let server = app.spawn().await;

    // The busy account's row is held, so its orders pile up inside their transactions.
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query(
        "select 1 from paper_accounts a join users u on u.id = a.user_id
          where u.email = 'busy@example.com' for update of a",
    )
    .execute(&mut *holder)
    .await
    .expect("lock account");
    let mut pile = tokio::task::JoinSet::new();
    for _ in 0..25 {
        let (client, url, token) = (
            server.client.clone(),
            server.url("/api/trading/orders"),
            busy_token.clone(),
        );
        pile.spawn(crate::helpers::post_http(
            client,
            url,
            token,
            Some(Uuid::new_v4()),
            buy("AAPL", "1"),
        ));
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    let other = server
        .post(
            "/api/trading/orders",
            &other_token,
            Some(Uuid::new_v4()),
            &buy("AAPL", "1"),
        )
        .await;
    let took = started.elapsed();
    assert_eq!(other.status, StatusCode::CREATED, "{}", other.text);
    assert!(
        took < std::time::Duration::from_millis(1000),
        "other user waited {took:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    holder.rollback().await.expect("unlock");

    let (mut created, mut limited) = (0, 0);
    while let Some(answer) = pile.join_next().await {
        let answer = answer.expect("join");
        match answer.status {
            StatusCode::CREATED => created += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                assert_eq!(answer.body["error"], "rate_limited");
                assert!(answer.header("retry-after").is_some());
                limited += 1;
            }
            other => panic!("unexpected {other}: {}", answer.text),
        }
    }
    assert_eq!(created + limited, 25);
    assert!(limited > 0, "the excess was limited");
    assert!(created >= 2, "the permitted writes went through");
    server.stop().await;
    app.close().await;
}

/// Defect 7: a request cancelled while its claim is committing leaves the key released, not in
/// flight until the stale threshold (the commit is slowed down by a deferred trigger).
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn cancelled_during_the_claim_commit_releases_the_key(pool: PgPool) {
    sqlx::query(
        "create function slow_claim_commit() returns trigger language plpgsql as
         $$ begin perform pg_sleep(0.6); return null; end $$",
    )
    .execute(&pool)
    .await
    .expect("function");
    sqlx::query(
        "create constraint trigger slow_claim after insert on idempotency_keys
         deferrable initially deferred for each row execute function slow_claim_commit()",
    )
    .execute(&pool)
    .await
    .expect("trigger");
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("commit@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let key = Uuid::new_v4();
    let call = Call::new(Method::POST, "/api/trading/orders")
        .token(&token)
        .key(key)
        .json(&buy("AAPL", "1"));
    let gave_up = tokio::time::timeout(std::time::Duration::from_millis(250), app.send(call)).await;
    assert!(gave_up.is_err(), "cancelled while the claim commits");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let status: Option<String> = sqlx::query_scalar("select status from idempotency_keys")
            .fetch_optional(&app.pool)
            .await
            .expect("status");
        if status.as_deref() == Some("released") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "left {status:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    sqlx::query("drop trigger slow_claim on idempotency_keys")
        .execute(&app.pool)
        .await
        .expect("drop trigger");
    let retry = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
    assert_eq!(app.count("select count(*) from paper_orders").await, 1);
    app.close().await;
}

/// Defect 7: a kill-switch flip whose transaction does not commit is not applied, even locally.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn a_flag_flip_that_rolls_back_is_not_applied(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, operator) = app
        .user_with_role("ops@example.com", raptor_api::auth::Role::Operator)
        .await;
    // The audit write of the flip fails, so its transaction rolls back.
    let mut blocker = pool.begin().await.expect("begin");
    sqlx::query(
        "create function no_flag_audit() returns trigger language plpgsql as
         $$ begin if new.action = 'flag.set' then raise exception 'audit refused'; end if;
                   return new; end $$",
    )
    .execute(&mut *blocker)
    .await
    .expect("function");
    sqlx::query(
        "create trigger no_flag_audit before insert on audit_log
         for each row execute function no_flag_audit()",
    )
    .execute(&mut *blocker)
    .await
    .expect("trigger");
    blocker.commit().await.expect("commit");
    let flip = app
        .send(
            Call::new(Method::PUT, "/api/admin/flags/FLAG_IDEMPOTENCY_MIDDLEWARE")
                .token(&operator)
                .json(&json!({ "enabled": false })),
        )
        .await;
    assert_eq!(
        flip.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{}",
        flip.text
    );
    assert!(app.state.idempotency.enabled().await, "not applied locally");
    assert_eq!(app.count("select count(*) from feature_flags").await, 0);
    app.close().await;
}

fn at(y: i32, m: u32, d: u32, h: u32, min: u32) -> chrono::DateTime<chrono::Utc> {
    use chrono::TimeZone;
    chrono::Utc
        .with_ymd_and_hms(y, m, d, h, min, 0)
        .single()
        .expect("instant")
}

fn clock_at(now: chrono::DateTime<chrono::Utc>) -> Options {
    Options {
        now,
        ..Options::default()
    }
}

/// Defect 2: a `day` limit resting at 10:00 New York expires at the 16:00 close: the next read
/// or write of the account shows it expired, its reservation freed, audited once.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn day_orders_expire_at_the_session_close(pool: PgPool) {
    // Tuesday 2026-12-01 10:00 New York.
    let morning = TestApp::new(&pool).await;
    let (_, token) = morning.user("day@example.com").await;
    morning.quote("AAPL", "189.00", "190.00").await;
    let limit = json!({ "symbol": "AAPL", "qty": "10", "side": "buy", "type": "limit",
                        "limit_price": "150.00" });
    let resting = keyed(&morning, &token, Uuid::new_v4(), &limit).await;
    assert_eq!(resting.body["status"], "new", "{}", resting.text);
    let gtc = json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit",
                      "limit_price": "150.00", "time_in_force": "gtc" });
    let good = keyed(&morning, &token, Uuid::new_v4(), &gtc).await;
    assert_eq!(good.body["status"], "new");
    let before = morning.get("/api/trading/account", &token).await.body;
    assert_eq!(before["reserved_cash"], "1650.00");

    // 15:59 New York: still good.
    let late = TestApp::with(&pool, clock_at(at(2026, 12, 1, 20, 59))).await;
    let id = resting.body["id"].as_str().expect("id").to_owned();
    let still = late.get(&format!("/api/trading/orders/{id}"), &token).await;
    assert_eq!(still.body["status"], "new");

    // 16:30 New York: expired on the next read, the reservation freed, one audit row.
    let evening = TestApp::with(&pool, clock_at(at(2026, 12, 1, 21, 30))).await;
    let expired = evening
        .get(&format!("/api/trading/orders/{id}"), &token)
        .await;
    assert_eq!(expired.body["status"], "expired", "{}", expired.text);
    let after = evening.get("/api/trading/account", &token).await.body;
    assert_eq!(
        after["reserved_cash"], "150.00",
        "only the gtc order reserves"
    );
    let gtc_id = good.body["id"].as_str().expect("id").to_owned();
    let gtc_now = evening
        .get(&format!("/api/trading/orders/{gtc_id}"), &token)
        .await;
    assert_eq!(gtc_now.body["status"], "new", "gtc orders rest on");
    assert_eq!(
        evening
            .count("select count(*) from audit_log where action = 'order.expired'")
            .await,
        1
    );
    let reason: String = sqlx::query_scalar(
        "select context->>'reason' from audit_log where action = 'order.expired'",
    )
    .fetch_one(&evening.pool)
    .await
    .expect("reason");
    assert_eq!(reason, "session_close");
    // A quote that would have filled it fills nothing now.
    evening.quote("AAPL", "140.00", "149.00").await;
    let gtc_filled = evening
        .get(&format!("/api/trading/orders/{gtc_id}"), &token)
        .await;
    assert_eq!(gtc_filled.body["status"], "filled");
    let still_expired = evening
        .get(&format!("/api/trading/orders/{id}"), &token)
        .await;
    assert_eq!(still_expired.body["status"], "expired");
    late.close().await;
    evening.close().await;
    morning.close().await;
}

/// Defect 2: the sweep (`raptor orders expire`) expires orders on accounts nobody touches, and
/// an order on an option frees its reservation at the expiry's close, not at the next quote.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn the_sweep_expires_day_orders_and_dead_options(pool: PgPool) {
    const NEAR: &str = "XYZ261218C00065000";
    let morning = TestApp::new(&pool).await;
    let (_, token) = morning.user("sweep@example.com").await;
    morning.quote(NEAR, "1.20", "1.25").await;
    let option = json!({ "symbol": NEAR, "qty": "1", "side": "buy", "type": "limit",
                         "limit_price": "1.00", "time_in_force": "gtc",
                         "position_intent": "buy_to_open" });
    let resting = keyed(&morning, &token, Uuid::new_v4(), &option).await;
    assert_eq!(resting.body["status"], "new", "{}", resting.text);
    let id: Uuid = resting.body["id"]
        .as_str()
        .expect("id")
        .parse()
        .expect("uuid");

    // The day before the contract's expiry: nothing to do.
    let before = TestApp::with(&pool, clock_at(at(2026, 12, 17, 22, 0))).await;
    assert_eq!(
        raptor_api::trading::expire_orders(&before.state)
            .await
            .expect("sweep"),
        0
    );
    // After the close of the expiry date (no quote update, no read in between).
    let after = TestApp::with(&pool, clock_at(at(2026, 12, 18, 21, 5))).await;
    assert_eq!(
        raptor_api::trading::expire_orders(&after.state)
            .await
            .expect("sweep"),
        1
    );
    let status: String = sqlx::query_scalar("select status from paper_orders where id = $1")
        .bind(id)
        .fetch_one(&after.pool)
        .await
        .expect("status");
    assert_eq!(status, "expired");
    let reason: String = sqlx::query_scalar(
        "select context->>'reason' from audit_log where action = 'order.expired'",
    )
    .fetch_one(&after.pool)
    .await
    .expect("reason");
    assert_eq!(reason, "contract_expiry");
    assert_eq!(
        raptor_api::trading::expire_orders(&after.state)
            .await
            .expect("sweep"),
        0,
        "each order expires once"
    );
    before.close().await;
    after.close().await;
    morning.close().await;
}

/// Operations: from the shutdown signal on, `/readyz` answers 503 while requests in flight
/// (and new ones during the drain window) are still served; then the server stops cleanly.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn shutdown_drains_with_readyz_503(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("drain@example.com").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (signal, received) = tokio::sync::oneshot::channel::<()>();
    let shutdown = raptor_server::drain_on(
        app.state.clone(),
        async {
            let _ = received.await;
        },
        std::time::Duration::from_millis(800),
    );
    let server = tokio::spawn(raptor_server::serve(listener, app.router.clone(), shutdown));
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{addr}{path}");
    let ready = client.get(url("/readyz")).send().await.expect("readyz");
    assert_eq!(ready.status().as_u16(), 200);

    // A slow request is in flight when the signal arrives.
    let slow = tokio::spawn(
        client
            .post(url("/probe/items"))
            .bearer_auth(&token)
            .header(crate::probe::SLEEP_HEADER, "400")
            .json(&json!({ "label": "in-flight" }))
            .send(),
    );
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    signal.send(()).expect("signal");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let draining = client.get(url("/readyz")).send().await.expect("readyz");
    assert_eq!(draining.status().as_u16(), 503);
    let body: Value = draining.json().await.expect("json");
    assert_eq!(body["status"], "draining");
    let alive = client.get(url("/healthz")).send().await.expect("healthz");
    assert_eq!(alive.status().as_u16(), 200);
    let finished = slow.await.expect("join").expect("in-flight request");
    assert_eq!(finished.status().as_u16(), 201);
    server.await.expect("join").expect("serve");
    app.close().await;
}

/// Operations: `raptor healthcheck` (the image's HEALTHCHECK) exits 0 against a ready server.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn healthcheck_command_reads_readyz(pool: PgPool) {
    use clap::Parser;
    let app = TestApp::new(&pool).await;
    let server = app.spawn().await;
    let addr = server.addr.to_string();
    let cli = raptor_server::Cli::try_parse_from(["raptor", "--addr", &addr, "healthcheck"])
        .expect("parse");
    let mut out = Vec::new();
    raptor_server::run(cli, &mut out).await.expect("healthy");
    let printed: Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(printed["readyz"], 200);
    app.state.begin_drain();
    let cli = raptor_server::Cli::try_parse_from(["raptor", "--addr", &addr, "healthcheck"])
        .expect("parse");
    let mut out = Vec::new();
    assert!(
        raptor_server::run(cli, &mut out).await.is_err(),
        "draining is unhealthy"
    );
    server.stop().await;
    app.close().await;
}

/// Operations: idempotency cleanup and order expiry run inside `serve` by default.
#[test]
fn schedules_are_on_by_default() {
    use clap::Parser;
    let cli = raptor_server::Cli::try_parse_from(["raptor", "serve"]).expect("parse");
    assert_eq!(
        cli.config.idempotency.idempotency_cleanup_interval_secs,
        3600
    );
    assert_eq!(cli.config.trading.order_expiry_interval_secs, 60);
}

/// A request that outlives `RAPTOR_REQUEST_TIMEOUT_SECS` answers `503 request_timeout` with
/// `Retry-After` (the timeout layer answers bare; the error layer adds it), and what it had
/// written rolls back.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn request_timeout_says_when_to_retry(pool: PgPool) {
    let mut options = Options::default();
    options.api.request_timeout = std::time::Duration::from_millis(200);
    let app = TestApp::with(&pool, options).await;
    let (_, token) = app.user("slow@example.com").await;
    let response = app
        .send(
            Call::new(Method::POST, "/probe/items")
                .token(&token)
                .key(Uuid::new_v4())
                .header(crate::probe::SLEEP_HEADER, "2000")
                .json(&json!({ "label": "too slow" })),
        )
        .await;
    assert_eq!(
        response.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        response.text
    );
    assert_eq!(response.body["error"], "request_timeout");
    assert_eq!(response.header("retry-after"), Some("1"));
    assert_eq!(
        app.count("select count(*) from probe_items where label = 'too slow'")
            .await,
        0
    );
    app.close().await;
}
