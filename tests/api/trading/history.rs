//! Order history: pages newest first on a keyset that orders placed meanwhile cannot disturb,
//! its filters and bounds, and finding an order by its `client_order_id`.

use std::collections::HashSet;

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use raptor_api::codes::ErrorCode;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, test_now, Options, Order, TestApp};

/// Writes a filled one-share market order on `symbol` created at `at`, with its leg, as the
/// book would have (fast: the paging test needs hundreds).
async fn seed_order(
    app: &TestApp,
    user_id: i32,
    symbol: &str,
    status: &str,
    at: DateTime<Utc>,
) -> Uuid {
    let id = Uuid::new_v4();
    sqlx::query(
        "with o as (
            insert into paper_orders (id, user_id, client_order_id, order_class, order_type,
                                      time_in_force, symbol, side, position_intent, qty, status,
                                      created_at, updated_at)
            values ($1, $2, $1::text, 'simple', 'market', 'day', $3, 'buy', 'buy_to_open', 1, $4,
                    $5, $5)
            returning id)
         insert into paper_order_legs (order_id, leg_index, symbol, side, position_intent,
                                       ratio_qty, qty)
         select id, 0, $3, 'buy', 'buy_to_open', 1, 1 from o",
    )
    .bind(id)
    .bind(user_id)
    .bind(symbol)
    .bind(status)
    .bind(at)
    .execute(&app.pool)
    .await
    .expect("seed order");
    id
}

/// The ids of a page's orders.
fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .map(|orders| {
            orders
                .iter()
                .filter_map(|o| o["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Every page of `query`, following `next_cursor`, calling `between` after each page.
async fn all_pages(
    app: &TestApp,
    token: &str,
    query: &str,
    mut between: impl AsyncFnMut(),
) -> Vec<Value> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("{query}&cursor={c}"),
            None => query.to_owned(),
        };
        let page = app.list_orders(token, &q).await;
        assert_eq!(page.status, StatusCode::OK, "{q}: {}", page.text);
        let body = page.body.clone();
        pages.push(body.clone());
        between().await;
        match body["next_cursor"].as_str() {
            Some(next) => {
                assert_eq!(body["has_more"], true, "a cursor only when there is more");
                cursor = Some(next.to_owned());
            }
            None => {
                assert_eq!(body["has_more"], false, "{}", page.text);
                assert!(
                    body["next_cursor"].is_null(),
                    "next_cursor is present, null"
                );
                break;
            }
        }
        assert!(pages.len() < 100, "paging does not end");
    }
    pages
}

/// 520 orders (three to a timestamp, so pages end inside a tie) and two placed before the
/// first page are listed exactly once each, newest first, in pages of the default 50, while two
/// orders are placed after every page: those never show up on a later page, nothing repeats and
/// nothing older is skipped.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn order_history_pages_without_duplicates_or_gaps_while_orders_arrive(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("history@example.com").await;
        app.quote("AAPL", "9.90", "10.00").await;
        let start = test_now() - Duration::hours(1);
        let mut expected = HashSet::new();
        for i in 0..520 {
            let at = start + Duration::seconds(i / 3);
            expected.insert(
                seed_order(app, user_id, "AAPL", "filled", at)
                    .await
                    .to_string(),
            );
        }
        for _ in 0..2 {
            let placed = app
                .create_order(
                    &token,
                    Uuid::new_v4(),
                    &Order::market("AAPL").buy().qty("1").json(),
                )
                .await;
            assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
            expected.insert(placed.id());
        }

        let mut placed_later = HashSet::new();
        let pages = all_pages(app, &token, "status=all", async || {
            let placed = app
                .create_order(
                    &token,
                    Uuid::new_v4(),
                    &Order::market("AAPL").buy().qty("1").json(),
                )
                .await;
            assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
            placed_later.insert(placed.id());
        })
        .await;

        let sizes: Vec<usize> = pages.iter().map(|p| ids(p).len()).collect();
        assert_eq!(sizes, [vec![50; 10], vec![22]].concat(), "default limit 50");
        let listed: Vec<String> = pages.iter().flat_map(ids).collect();
        let unique: HashSet<String> = listed.iter().cloned().collect();
        assert_eq!(unique.len(), listed.len(), "no order listed twice");
        assert_eq!(
            unique, expected,
            "every order that existed, nothing placed meanwhile"
        );
        assert!(placed_later.is_disjoint(&unique));
        // Newest first on (created_at, id).
        let keys: Vec<(DateTime<Utc>, Uuid)> = pages
            .iter()
            .flat_map(|p| p["data"].as_array().cloned().unwrap_or_default())
            .map(|o| {
                let at = o["created_at"]
                    .as_str()
                    .and_then(|t| t.parse().ok())
                    .expect("created_at");
                let id = o["id"].as_str().and_then(|t| t.parse().ok()).expect("id");
                (at, id)
            })
            .collect();
        assert!(
            keys.windows(2).all(|w| w[0] > w[1]),
            "strictly newest first"
        );

        // A fresh first page starts with what was placed meanwhile.
        let first = app.list_orders(&token, "limit=500").await;
        assert_eq!(ids(&first.body).len(), 500);
        assert_eq!(first.body["has_more"], true);
        let newest: HashSet<String> = ids(&first.body)[..2 + placed_later.len()]
            .iter()
            .cloned()
            .collect();
        assert!(
            placed_later.is_subset(&newest),
            "the orders placed meanwhile are the newest"
        );
    })
    .await;
}

/// `status`, `symbol` (any leg), `after` and `until` (both exclusive) select, and compose with
/// the cursor.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn order_history_filters_by_status_symbol_and_time(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("filters@example.com").await;
        let (other_id, _) = app.user("other@example.com").await;
        let t = |minutes: i64| test_now() - Duration::minutes(minutes);
        let old_aapl = seed_order(app, user_id, "AAPL", "filled", t(40)).await;
        let msft = seed_order(app, user_id, "MSFT", "canceled", t(30)).await;
        let open_aapl = seed_order(app, user_id, "AAPL", "new", t(20)).await;
        let new_aapl = seed_order(app, user_id, "AAPL", "filled", t(10)).await;
        seed_order(app, other_id, "AAPL", "filled", t(15)).await;
        let token = token.as_str();
        let listed = |query: &'static str| async move {
            let page = app.list_orders(token, query).await;
            assert_eq!(page.status, StatusCode::OK, "{query}: {}", page.text);
            ids(&page.body)
        };
        let s = |ids: &[Uuid]| ids.iter().map(Uuid::to_string).collect::<Vec<_>>();

        assert_eq!(listed("").await, s(&[new_aapl, open_aapl, msft, old_aapl]));
        assert_eq!(listed("status=open").await, s(&[open_aapl]));
        assert_eq!(
            listed("status=closed").await,
            s(&[new_aapl, msft, old_aapl])
        );
        assert_eq!(
            listed("symbol=AAPL").await,
            s(&[new_aapl, open_aapl, old_aapl])
        );
        assert_eq!(listed("symbol=MSFT&status=open").await, s(&[]));
        assert_eq!(listed("symbol=NVDA").await, s(&[]));
        // after 14:30 is exclusive of the order at 14:30 (t(30)); until 14:50 of the one at 14:50.
        assert_eq!(
            listed("after=2026-12-01T14:30:00Z&until=2026-12-01T14:50:00Z").await,
            s(&[open_aapl])
        );
        assert_eq!(
            listed("after=2026-12-01T14:25:00Z").await,
            s(&[new_aapl, open_aapl, msft])
        );
        assert_eq!(listed("until=2026-12-01T14:25:00Z").await, s(&[old_aapl]));

        // Filters hold across pages.
        let first = app.list_orders(token, "symbol=AAPL&limit=2").await;
        assert_eq!(ids(&first.body), s(&[new_aapl, open_aapl]));
        let cursor = first.body["next_cursor"].as_str().expect("more").to_owned();
        let second = app
            .list_orders(token, &format!("symbol=AAPL&limit=2&cursor={cursor}"))
            .await;
        assert_eq!(ids(&second.body), s(&[old_aapl]));
        assert_eq!(second.body["has_more"], false);
        assert!(second.body["next_cursor"].is_null());
    })
    .await;
}

/// A cursor the API did not hand out, a time that is not RFC 3339, or a limit outside 1–500 is
/// `400 invalid_query`; 1 and 500 are accepted.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn order_history_refuses_a_malformed_cursor_time_or_limit(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("cursor@example.com").await;
        for query in [
            "cursor=garbage!",
            "cursor=bm90IGEgY3Vyc29y",
            "cursor=MjAyNi0xMi0wMVQxNTowMDowMFp8bm90LWEtdXVpZA",
            "symbol=",
            "symbol=A%00B",
            "after=yesterday",
            "until=2026-13-01T00:00:00Z",
            "limit=0",
            "limit=501",
        ] {
            let answer = app.list_orders(&token, query).await;
            assert_problem(&answer, StatusCode::BAD_REQUEST, ErrorCode::InvalidQuery);
        }
        for query in ["limit=1", "limit=500"] {
            let answer = app.list_orders(&token, query).await;
            assert_eq!(answer.status, StatusCode::OK, "{query}: {}", answer.text);
        }
    })
    .await;
}

/// After a lost answer, the order is found by the `client_order_id` the client chose, or the
/// one the server derived; another account's, or an unknown one, is `404 not_found`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_order_is_found_by_its_client_order_id(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("coid@example.com").await;
        let (_, stranger) = app.user("stranger@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        let chosen = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("AAPL")
                    .buy()
                    .qty("1")
                    .client_order_id("antlers-42")
                    .json(),
            )
            .await;
        assert_eq!(chosen.status, StatusCode::CREATED, "{}", chosen.text);
        let derived = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("AAPL").buy().qty("1").json(),
            )
            .await;
        let derived_id = derived.body["client_order_id"]
            .as_str()
            .expect("derived")
            .to_owned();

        let path = |id: &str| format!("/api/trading/orders/by-client-order-id/{id}");
        let found = app.get(&path("antlers-42"), &token).await;
        assert_eq!(found.status, StatusCode::OK, "{}", found.text);
        assert_eq!(found.body, chosen.body_without_marker());
        let found = app.get(&path(&derived_id), &token).await;
        assert_eq!(found.body["id"], derived.body["id"]);

        for (id, who) in [("antlers-42", &stranger), ("antlers-43", &token)] {
            let missing = app.get(&path(id), who).await;
            assert_problem(&missing, StatusCode::NOT_FOUND, ErrorCode::NotFound);
        }
    })
    .await;
}

/// Both list cursors, fuzzed: whatever a client sends as `cursor` (random text, base64 of
/// random bytes, and well-formed cursors around ids with NULs, control characters, other
/// lists' ids, huge numbers), the answer is a page or `400 invalid_query`, never a 5xx (an
/// activities cursor holding U+0000 reached Postgres, which refuses NUL in text: 500).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn list_cursors_refuse_whatever_they_did_not_hand_out(pool: PgPool) {
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("cursors@example.com").await;
        let b64 = |bytes: &[u8]| {
            use base64::Engine as _;
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
        };
        let ids = prop_oneof![
            any::<String>(),
            "(fill|cancel|reset|expiry|order_expiry|refund)[:][0-9a-f\\-]{0,40}",
            "[\\x00-\\x1f\\x7f]{1,3}[a-z:0-9]{0,8}",
            Just("fill:1\u{0}".to_owned()),
            Just("fill:99999999999999999999".to_owned()),
            Just(Uuid::new_v4().to_string()),
        ];
        let at = prop_oneof![
            Just("2026-12-01T15:00:00.000000Z".to_owned()),
            Just("9999-12-31T23:59:59Z".to_owned()),
            Just("0001-01-01T00:00:00Z".to_owned()),
            any::<String>(),
        ];
        let cursors = prop_oneof![
            any::<String>(),
            proptest::collection::vec(any::<u8>(), 0..80).prop_map(move |b| b64(&b)),
            (at, ids).prop_map(move |(at, id)| b64(format!("{at}|{id}").as_bytes())),
        ];
        let mut runner = TestRunner::deterministic();
        for _ in 0..150 {
            let cursor = cursors.new_tree(&mut runner).expect("a cursor").current();
            let mut query = String::new();
            for byte in cursor.bytes() {
                query.push_str(&format!("%{byte:02X}"));
            }
            for list in ["/api/trading/activities", "/api/trading/orders"] {
                let answer = app.get(&format!("{list}?cursor={query}"), &token).await;
                assert!(
                    answer.status == StatusCode::OK
                        || (answer.status == StatusCode::BAD_REQUEST
                            && answer.body["error"] == "invalid_query"),
                    "{list} with cursor {cursor:?}: {} {}",
                    answer.status,
                    answer.text
                );
            }
        }
    })
    .await;
}
