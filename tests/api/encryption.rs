//! Stored responses encrypted at rest, key rotation and `reencrypt`, undecryptable replays (503,
//! never re-executed), the export, and required keys with the keyless-request metric
//! (docs/idempotency.md).

use axum::http::{Method, StatusCode};
use clap::Parser;
use raptor_api::codes::ErrorCode;
use raptor_idempotency::{IdempotencyConfig, RequireKey, ResponseKeys};
use raptor_server::Cli;
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, cli, label, Call, Options, Order, TestApp, TestResponse};

/// Two throwaway 32-byte keys (standard base64).
const KEY_A: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const KEY_B: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

fn keyed(keys: &str) -> Options {
    with_config(IdempotencyConfig {
        response_keys: ResponseKeys::parse(keys).expect("test keys"),
        ..Options::default().idempotency
    })
}

fn with_config(idempotency: IdempotencyConfig) -> Options {
    Options {
        idempotency,
        ..Options::default()
    }
}

fn requiring(level: RequireKey) -> Options {
    with_config(IdempotencyConfig {
        require_key: level,
        ..Options::default().idempotency
    })
}

/// A resting limit order (below the bid of [`quote`]); the tests add the client order id their
/// body carries as a marker.
fn resting_limit() -> Order {
    Order::limit("AAPL", "91.37").buy().qty("1").gtc()
}

async fn quote(app: &TestApp) {
    app.quote("AAPL", "99.00", "99.10").await;
}

/// The key row as text (every column, bytea as hex), for "is it readable" checks.
async fn row_text(app: &TestApp, key: Uuid) -> String {
    app.scalar_where(
        "select row_to_json(k)::text from idempotency_keys k where idem_key = $1",
        key.to_string(),
    )
    .await
}

async fn kid_of(app: &TestApp, key: Uuid) -> Option<String> {
    app.scalar_where(
        "select response_kid from idempotency_keys where idem_key = $1",
        key.to_string(),
    )
    .await
}

/// A stored response that cannot be opened: 503 (retry later), never a replay.
#[track_caller]
fn assert_unreadable(response: &TestResponse) {
    assert_problem(
        response,
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::IdempotencyStoreUnavailable,
    );
    assert!(response.header("retry-after").is_some());
    assert_ne!(response.header("idempotent-replayed"), Some("true"));
}

#[track_caller]
fn assert_replay_of(replay: &TestResponse, original: &TestResponse) {
    assert_eq!(replay.status, original.status, "{}", replay.text);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.body_without_marker(), original.body);
    assert_eq!(replay.header("location"), original.header("location"));
}

/// `response_body`, `response_headers`, `response_kid`, `response_nonce`, `response_ciphertext`.
type SealedColumns = (
    Option<Value>,
    Option<Value>,
    Option<String>,
    Vec<u8>,
    Vec<u8>,
);

/// A sealed order replays as the text it was sent as: the same members in the same order, the
/// replay marker added as the last one.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_sealed_answer_replays_as_the_text_it_was_sent_as(pool: PgPool) {
    TestApp::run(&pool, keyed(&format!("k1:{KEY_A}")), async |app| {
        let (_, token) = app.user("text@example.com").await;
        quote(app).await;
        let key = Uuid::new_v4();
        let body = resting_limit().json();
        let original = app.create_order(&token, key, &body).await;
        assert_eq!(original.status, StatusCode::CREATED, "{}", original.text);
        let replay = app.create_order(&token, key, &body).await;
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        let sent = original.text.strip_suffix('}').expect("an object");
        assert_eq!(
            replay.text,
            format!("{sent},\"idempotency_replayed\":true}}")
        );
    })
    .await;
}

/// No plaintext of a known field in any column of the key row; the replay is identical.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn stored_bodies_are_not_readable_in_the_table(pool: PgPool) {
    TestApp::run(&pool, keyed(&format!("k1:{KEY_A}")), async |app| {
        let (_, token) = app.user("sealed@example.com").await;
        quote(app).await;

        let label = "label-4b1d-secret";
        let probe_key = Uuid::new_v4();
        let body = json!({ "label": label });
        let first = app.post("/probe/items", &token, probe_key, &body).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);

        let marker = "coid-9f2e-secret";
        let order_key = Uuid::new_v4();
        let order = app
            .create_order(
                &token,
                order_key,
                &resting_limit().client_order_id(marker).json(),
            )
            .await;
        assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
        assert_eq!(order.body["client_order_id"], marker);

        // The `Location` header names the new order: it is sealed with the body.
        let order_id = order.body["id"].as_str().expect("order id").to_owned();
        assert!(order
            .header("location")
            .is_some_and(|l| l.contains(&order_id)));
        for (key, secrets) in [
            (probe_key, vec![label.to_owned()]),
            (
                order_key,
                vec![
                    marker.to_owned(),
                    "91.37".to_owned(),
                    "AAPL".to_owned(),
                    order_id.clone(),
                ],
            ),
        ] {
            let text = row_text(app, key).await;
            for secret in secrets {
                let hex: String = secret.bytes().map(|b| format!("{b:02x}")).collect();
                assert!(!text.contains(&secret), "{secret} readable in {text}");
                assert!(!text.contains(&hex), "{secret} readable as hex in {text}");
            }
            let (body, headers, kid, nonce, sealed): SealedColumns = sqlx::query_as(
                "select response_body, response_headers, response_kid, response_nonce,
                    response_ciphertext
               from idempotency_keys where idem_key = $1",
            )
            .bind(key.to_string())
            .fetch_one(&app.pool)
            .await
            .expect("sealed columns");
            assert_eq!(body, None, "no plain body");
            assert_eq!(headers, None, "no plain headers");
            assert_eq!(kid.as_deref(), Some("k1"));
            assert_eq!(nonce.len(), 12);
            assert!(sealed.len() > 16);
        }
        let distinct_nonces = app
            .count("select count(distinct response_nonce) from idempotency_keys")
            .await;
        assert_eq!(distinct_nonces, 2, "a fresh nonce per row");

        assert_replay_of(
            &app.post("/probe/items", &token, probe_key, &body).await,
            &first,
        );
        assert_replay_of(
            &app.create_order(
                &token,
                order_key,
                &resting_limit().client_order_id(marker).json(),
            )
            .await,
            &order,
        );
        assert_eq!(app.probe_items(label).await, 1);
        assert_eq!(app.order_count().await, 1);
    })
    .await;
}

/// Old key second in the list: old rows replay, new rows use the new key; `reencrypt` moves
/// plain and old-key rows to the new key, after which the old key can go. Without the key a
/// row was sealed under, the replay is 503 and nothing runs again.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn rotation_and_reencrypt_keep_replays_working(pool: PgPool) {
    // Written before encryption was turned on: plain JSON.
    TestApp::run(&pool, Options::default(), async |plain_app| {
        let (_, token) = plain_app.user("rotate@example.com").await;
        let plain_key = Uuid::new_v4();
        let plain = plain_app
            .post("/probe/items", &token, plain_key, &label("plain"))
            .await;
        assert_eq!(plain.status, StatusCode::CREATED);
        assert_eq!(kid_of(plain_app, plain_key).await, None);

        let old_app = plain_app.replica(keyed(&format!("old:{KEY_A}"))).await;
        let old_key = Uuid::new_v4();
        let old = old_app
            .post("/probe/items", &token, old_key, &label("old"))
            .await;
        assert_eq!(old.status, StatusCode::CREATED);
        assert_eq!(kid_of(&old_app, old_key).await.as_deref(), Some("old"));
        // Plain rows still replay once keys are configured.
        assert_replay_of(
            &old_app
                .post("/probe/items", &token, plain_key, &label("plain"))
                .await,
            &plain,
        );

        // Rotation: the new key first, the old one still there to decrypt.
        let rotated_keys = format!("new:{KEY_B},old:{KEY_A}");
        let rotated = plain_app.replica(keyed(&rotated_keys)).await;
        assert_replay_of(
            &rotated
                .post("/probe/items", &token, old_key, &label("old"))
                .await,
            &old,
        );
        let new_key = Uuid::new_v4();
        let new = rotated
            .post("/probe/items", &token, new_key, &label("new"))
            .await;
        assert_eq!(new.status, StatusCode::CREATED);
        assert_eq!(kid_of(&rotated, new_key).await.as_deref(), Some("new"));

        // Batches of one, so the walk over several batches is exercised.
        let done = cli(
            &pool,
            &[
                "--response-keys",
                &rotated_keys,
                "idempotency",
                "reencrypt",
                "--batch-size",
                "1",
            ],
        )
        .await
        .expect("reencrypt");
        assert_eq!(done, json!({ "reencrypted": 2, "unreadable": 0 }));
        for key in [plain_key, old_key, new_key] {
            assert_eq!(kid_of(&rotated, key).await.as_deref(), Some("new"));
        }
        assert_eq!(
            rotated
                .count("select count(*) from idempotency_keys where response_body is not null")
                .await,
            0
        );
        let again = cli(
            &pool,
            &["--response-keys", &rotated_keys, "idempotency", "reencrypt"],
        )
        .await
        .expect("reencrypt again");
        assert_eq!(again["reencrypted"], 0, "nothing left to move");

        // The old key removed: every row still replays.
        let new_only = plain_app.replica(keyed(&format!("new:{KEY_B}"))).await;
        for (key, name, original) in [
            (plain_key, "plain", &plain),
            (old_key, "old", &old),
            (new_key, "new", &new),
        ] {
            let replay = new_only
                .post("/probe/items", &token, key, &label(name))
                .await;
            assert_replay_of(&replay, original);
            assert_eq!(new_only.probe_items(name).await, 1);
        }

        // A process that lacks the key: 503, never a second execution.
        let wrong = plain_app.replica(keyed(&format!("old:{KEY_A}"))).await;
        let refused = wrong
            .post("/probe/items", &token, new_key, &label("new"))
            .await;
        assert_unreadable(&refused);
        assert_eq!(wrong.probe_items("new").await, 1);
        assert!(wrong.metrics().await.contains(
            "raptor_idempotency_decrypt_failures_total\
             {endpoint=\"POST /probe/items\",reason=\"unknown_kid\"}"
        ));
        // Keys removed altogether: still 503 (no plaintext fallback, no re-execution).
        let keyless = plain_app.replica(Options::default()).await;
        assert_unreadable(
            &keyless
                .post("/probe/items", &token, new_key, &label("new"))
                .await,
        );
        assert_eq!(keyless.probe_items("new").await, 1);
    })
    .await;
}

/// A tampered ciphertext, nonce or key id, or sealed columns that do not fit together, answer
/// 503 and never execute: checked on the real order route (business rows counted) and on the
/// probe.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn tampered_ciphertext_answers_503_and_never_executes(pool: PgPool) {
    let options = keyed(&format!("k1:{KEY_A},k0:{KEY_B}"));
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("tamper@example.com").await;
        quote(app).await;

        let order_key = Uuid::new_v4();
        let order_body = resting_limit().client_order_id("tamper-1").json();
        let order = app.create_order(&token, order_key, &order_body).await;
        assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
        let before = (
            app.order_count().await,
            app.count("select count(*) from audit_log").await,
        );

        app.execute_where(
            "update idempotency_keys
                    set response_ciphertext = set_byte(response_ciphertext, 3,
                                                       get_byte(response_ciphertext, 3) # 1)
                  where idem_key = $1",
            order_key.to_string(),
        )
        .await;
        for _ in 0..3 {
            assert_unreadable(&app.create_order(&token, order_key, &order_body).await);
        }
        assert_eq!(
            (
                app.order_count().await,
                app.count("select count(*) from audit_log").await
            ),
            before,
            "no order, and no replay audit row, from an unreadable key"
        );
        assert_eq!(
            app.key_status(order_key).await.as_deref(),
            Some("completed"),
            "the key is kept, not released"
        );

        // The nonce and the key id are authenticated too.
        for (label, tamper) in [
            (
                "nonce",
                "set response_nonce = \
                 set_byte(response_nonce, 0, get_byte(response_nonce, 0) # 128)",
            ),
            ("kid", "set response_kid = 'k0'"),
            ("code", "set response_code = 200"),
            // Columns that do not fit together (no table check keeps them together; the one
            // statement that writes them does): not opened either.
            ("half-sealed", "set response_ciphertext = null"),
            ("layout", "set response_seal = 3"),
            (
                "short-nonce",
                "set response_nonce = substring(response_nonce from 1 for 8)",
            ),
        ] {
            let key = Uuid::new_v4();
            let body = json!({ "label": label });
            let first = app.post("/probe/items", &token, key, &body).await;
            assert_eq!(first.status, StatusCode::CREATED);
            assert_replay_of(&app.post("/probe/items", &token, key, &body).await, &first);
            app.execute_where(
                &format!("update idempotency_keys {tamper} where idem_key = $1"),
                key.to_string(),
            )
            .await;
            assert_unreadable(&app.post("/probe/items", &token, key, &body).await);
            assert_eq!(app.probe_items(label).await, 1, "{label}: executed once");
        }

        let text = app.metrics().await;
        assert!(
            text.contains(
                "raptor_idempotency_decrypt_failures_total\
                 {endpoint=\"POST /api/trading/orders\",reason=\"authentication\"}"
            ),
            "{text}"
        );
        assert!(text.contains(
            "raptor_idempotency_requests_total\
             {endpoint=\"POST /api/trading/orders\",outcome=\"store_unavailable\"}"
        ));
    })
    .await;
}

/// The associated data binds a ciphertext to its row: copied (with nonce and key id) onto
/// another key's row of the same user, route and body, it does not decrypt.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn associated_data_stops_a_body_moved_to_another_row(pool: PgPool) {
    TestApp::run(&pool, keyed(&format!("k1:{KEY_A}")), async |app| {
        let (_, token) = app.user("moved@example.com").await;
        let (_, other_token) = app.user("other@example.com").await;
        let body = label("same");
        let (key_a, key_b, key_c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let a = app.post("/probe/items", &token, key_a, &body).await;
        let b = app.post("/probe/items", &token, key_b, &body).await;
        let c = app.post("/probe/items", &other_token, key_c, &body).await;
        for response in [&a, &b, &c] {
            assert_eq!(response.status, StatusCode::CREATED);
        }

        let moved = sqlx::query(
            "update idempotency_keys t
            set response_kid = s.response_kid, response_nonce = s.response_nonce,
                response_ciphertext = s.response_ciphertext
           from idempotency_keys s
          where s.idem_key = $1 and t.idem_key = any($2)",
        )
        .bind(key_a.to_string())
        .bind(vec![key_b.to_string(), key_c.to_string()])
        .execute(&app.pool)
        .await
        .expect("move")
        .rows_affected();
        assert_eq!(moved, 2);

        assert_replay_of(&app.post("/probe/items", &token, key_a, &body).await, &a);
        assert_unreadable(&app.post("/probe/items", &token, key_b, &body).await);
        assert_unreadable(&app.post("/probe/items", &other_token, key_c, &body).await);
        assert_eq!(app.probe_items("same").await, 3, "nothing ran again");
    })
    .await;
}

/// The associated data binds a ciphertext to the key's lifetime too: the first lifetime's
/// sealed response, restored onto the same row after the key expired and was used again, does
/// not open (503, nothing runs again), though row id, user, route, key id and status match.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_seal_from_an_earlier_lifetime_does_not_open(pool: PgPool) {
    TestApp::run(&pool, keyed(&format!("k1:{KEY_A}")), async |app| {
        let (_, token) = app.user("lifetimes@example.com").await;
        let key = Uuid::new_v4();
        let body = label("lifetimes");
        let first = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
        let (kid, nonce, ciphertext): (String, Vec<u8>, Vec<u8>) = sqlx::query_as(
            "select response_kid, response_nonce, response_ciphertext
           from idempotency_keys where idem_key = $1",
        )
        .bind(key.to_string())
        .fetch_one(&app.pool)
        .await
        .expect("first seal");

        app.expire_keys().await;
        let second = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(second.status, StatusCode::CREATED, "{}", second.text);
        assert_eq!(second.header("idempotent-replayed"), Some("false"));
        assert_ne!(second.body["id"], first.body["id"], "a new lifetime ran");
        assert_eq!(app.probe_items("lifetimes").await, 2);

        let restored = sqlx::query(
            "update idempotency_keys
            set response_kid = $2, response_nonce = $3, response_ciphertext = $4
          where idem_key = $1",
        )
        .bind(key.to_string())
        .bind(kid)
        .bind(nonce)
        .bind(ciphertext)
        .execute(&app.pool)
        .await
        .expect("restore")
        .rows_affected();
        assert_eq!(restored, 1);
        assert_unreadable(&app.post("/probe/items", &token, key, &body).await);
        assert_eq!(app.probe_items("lifetimes").await, 2, "nothing ran again");
    })
    .await;
}

/// The GDPR export shows the user's own stored responses decrypted.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn export_shows_stored_responses_decrypted(pool: PgPool) {
    TestApp::run(&pool, keyed(&format!("k1:{KEY_A}")), async |app| {
        let (_, token) = app.user("export@example.com").await;
        quote(app).await;
        let (_, other) = app.user("bystander@example.com").await;
        let key = Uuid::new_v4();
        let order = app
            .create_order(
                &token,
                key,
                &resting_limit().client_order_id("export-1").json(),
            )
            .await;
        assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
        let theirs = app
            .post(
                "/probe/items",
                &other,
                Uuid::new_v4(),
                &label("bystander-secret"),
            )
            .await;
        assert_eq!(theirs.status, StatusCode::CREATED);

        let export = app.export(&token).await;
        assert_eq!(export.status, StatusCode::OK, "{}", export.text);
        let rows = export.body["idempotency_keys"]
            .as_array()
            .expect("idempotency_keys");
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0]["idem_key"], key.to_string());
        assert_eq!(rows[0]["response_encrypted"], true);
        assert_eq!(rows[0]["response_body"], order.body);
        assert!(!export.text.contains("bystander-secret"));
    })
    .await;
}

/// `IDEMPOTENCY_REQUIRE_KEY=tier1`: keyless orders (probe Tier 1 route and the real order
/// route) are refused before anything runs, a keyless Tier 2 call still runs, and the keyless
/// metric counts all of them by route and client.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn tier1_requires_keys_and_keyless_requests_are_counted(pool: PgPool) {
    TestApp::run(&pool, requiring(RequireKey::Tier1), async |app| {
        let (_, token) = app.user("keyless@example.com").await;
        quote(app).await;
        let agent = "Enc-Tier1-Client/3.1 (test)";
        let keyless = |path: &str, body: &Value| {
            Call::new(Method::POST, path)
                .token(&token)
                .header("user-agent", agent)
                .json(body)
        };

        let probe = app.send(keyless("/probe/items", &label("t1"))).await;
        assert_problem(
            &probe,
            StatusCode::BAD_REQUEST,
            ErrorCode::IdempotencyKeyRequired,
        );
        assert_eq!(app.probe_items("t1").await, 0);

        let order = app
            .send(keyless(
                "/api/trading/orders",
                &resting_limit().client_order_id("keyless-1").json(),
            ))
            .await;
        assert_problem(
            &order,
            StatusCode::BAD_REQUEST,
            ErrorCode::IdempotencyKeyRequired,
        );
        assert_eq!(app.order_count().await, 0);

        let open = app.send(keyless("/probe/open", &label("t2"))).await;
        assert_eq!(open.status, StatusCode::CREATED, "{}", open.text);
        assert_eq!(app.probe_items("t2").await, 1);
        assert_eq!(
            app.count("select count(*) from idempotency_keys").await,
            0,
            "keyless calls leave no key rows"
        );

        // With a key, Tier 1 runs as before.
        let keyed = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &resting_limit().client_order_id("keyed-1").json(),
            )
            .await;
        assert_eq!(keyed.status, StatusCode::CREATED, "{}", keyed.text);

        let text = app.metrics().await;
        for endpoint in [
            "POST /probe/items",
            "POST /api/trading/orders",
            "POST /probe/open",
        ] {
            let needle = format!(
                "raptor_idempotency_keyless_requests_total\
                 {{endpoint=\"{endpoint}\",client=\"enc-tier1-client\"}}"
            );
            assert!(text.contains(&needle), "{needle} missing from:\n{text}");
        }
    })
    .await;
}

/// `IDEMPOTENCY_REQUIRE_KEY=all` refuses keyless calls on both tiers; `none` refuses neither.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn all_requires_keys_on_both_tiers(pool: PgPool) {
    TestApp::run(&pool, requiring(RequireKey::All), async |app| {
        let (_, token) = app.user("all@example.com").await;
        for path in ["/probe/items", "/probe/open"] {
            let refused = app.post(path, &token, None, &label("all")).await;
            assert_problem(
                &refused,
                StatusCode::BAD_REQUEST,
                ErrorCode::IdempotencyKeyRequired,
            );
            let keyed = app.post(path, &token, Uuid::new_v4(), &label("all")).await;
            assert_eq!(keyed.status, StatusCode::CREATED, "{path}");
        }
        assert_eq!(app.probe_items("all").await, 2);
        let text = app.metrics().await;
        assert!(text.contains(
            "raptor_idempotency_keyless_requests_total\
             {endpoint=\"POST /probe/open\",client=\"unknown\"}"
        ));

        let default = app.replica(Options::default()).await;
        for path in ["/probe/items", "/probe/open"] {
            let runs = default.post(path, &token, None, &label("none")).await;
            assert_eq!(runs.status, StatusCode::CREATED, "{path}");
        }
    })
    .await;
}

/// Bad keys are a clear start-up error naming the variable, never echoing the key; the config's
/// `Debug` never shows it; the setting parses from its documented values.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn response_keys_configuration(pool: PgPool) {
    for bad in [
        "c2hvcnQ=",
        "k1:c2hvcnQ=",
        "k1:!!notbase64!!",
        &format!("k1:{KEY_A},k1:{KEY_B}"),
    ] {
        // (`migrate` does not read the keys, so it does not check them.)
        let err = cli(&pool, &["--response-keys", bad, "idempotency", "reencrypt"])
            .await
            .expect_err("bad keys refused");
        let message = format!("{err:#}");
        assert!(message.contains("RAPTOR_RESPONSE_KEYS"), "{message}");
        for secret in ["c2hvcnQ=", "!!notbase64!!", KEY_A, KEY_B] {
            assert!(!message.contains(secret), "{message} echoes the key");
        }
    }
    let parsed = Cli::try_parse_from([
        "raptor",
        "--response-keys",
        &format!("k1:{KEY_A}"),
        "--idempotency-require-key",
        "tier1",
        "serve",
    ])
    .expect("parses");
    let debug = format!("{:?}", parsed.config);
    assert!(!debug.contains(KEY_A), "{debug}");
    let config = parsed.config.idempotency().expect("config");
    assert_eq!(config.require_key, RequireKey::Tier1);
    assert_eq!(config.response_keys.current_kid(), Some("k1"));
    assert!(!format!("{config:?}").contains(KEY_A));

    let err = Cli::try_parse_from(["raptor", "--idempotency-require-key", "tier2", "serve"])
        .expect_err("unknown level");
    assert!(err.to_string().contains("IDEMPOTENCY_REQUIRE_KEY"), "{err}");

    // Explicitly blank: a developer's .env (which `#[sqlx::test]` loads) may hold a key.
    let err = cli(&pool, &["--response-keys=", "idempotency", "reencrypt"])
        .await
        .expect_err("no keys");
    assert!(
        format!("{err:#}").contains("RAPTOR_RESPONSE_KEYS"),
        "{err:#}"
    );
}
