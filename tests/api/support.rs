//! What support staff do for a user: the command line revokes a token or every session of a
//! user and shows a user; an operator reads a user's audit trail over HTTP, a page at a time.
//! Each of them is audited on the user's trail, naming who did it.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use raptor_api::codes::ErrorCode;
use serde_json::Value;
use sqlx::PgPool;

use crate::helpers::{assert_problem, cli, Options, TestApp};

/// The actions of `user_id`'s trail written by support (`by.via` = `via`), oldest first.
async fn support_actions(app: &TestApp, user_id: i32, via: &str) -> Vec<String> {
    sqlx::query_scalar(
        "select action from audit_log
          where user_id = $1 and context->'by'->>'via' = $2 order by id",
    )
    .bind(user_id)
    .bind(via)
    .fetch_all(&app.pool)
    .await
    .expect("audit")
}

/// `raptor users show` by id and by email (any case), `raptor tokens revoke` for a service
/// token (again: nothing left to revoke), `raptor users sessions revoke` for a user with two
/// sessions: the tokens are refused from then on, and each action is on the user's trail.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn support_revokes_tokens_and_sessions_and_shows_users(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let run = async |args: &[&str]| cli(&pool, args).await.expect("command succeeds");
        let (user_id, token) = app.user("Support.Case@example.com").await;
        // A second session of the same user (another device).
        let second = "rpt_second_device".to_owned();
        sqlx::query(
            "insert into api_tokens (token_hash, kind, user_id, expires_at)
             values ($1, 'session', $2, now() + interval '1 day')",
        )
        .bind(raptor_api::auth::hash_token(&second))
        .bind(user_id)
        .execute(&app.pool)
        .await
        .expect("a second session");

        let shown = run(&["users", "show", "--id", &user_id.to_string()]).await;
        assert_eq!(shown["id"], user_id);
        assert_eq!(shown["email"], "Support.Case@example.com");
        assert_eq!(shown["role"], "user");
        assert_eq!(shown["account_mode"], "paper");
        assert_eq!(shown["active_sessions"], 2, "{shown}");
        let by_email = run(&["users", "show", "--email", "support.case@EXAMPLE.com"]).await;
        assert_eq!(by_email["id"], user_id);
        let missing = cli(&pool, &["users", "show", "--id", "999999"]).await;
        assert!(
            missing.is_err_and(|err| err.to_string().contains("no user with id 999999")),
            "an unknown user is an error"
        );

        let service = run(&["service-tokens", "create", "--name", "ledger"]).await;
        let service = service["token"].as_str().expect("token").to_owned();
        assert_eq!(
            app.get("/api/trading/quotes", &service)
                .await
                .status
                .as_u16()
                / 100,
            4
        );
        let revoked = run(&["tokens", "revoke", "--token", &service]).await;
        assert_eq!(revoked["revoked"], true, "{revoked}");
        assert_eq!(revoked["kind"], "service");
        assert_eq!(revoked["service_name"], "ledger");
        let again = run(&["tokens", "revoke", "--token", &service]).await;
        assert_eq!(again["revoked"], false, "{again}");

        assert_eq!(app.profile(&token).await.status, StatusCode::OK);
        let signed_out = run(&[
            "users",
            "sessions",
            "revoke",
            "--user-id",
            &user_id.to_string(),
        ])
        .await;
        assert_eq!(signed_out["revoked"], 2, "{signed_out}");
        for token in [&token, &second] {
            assert_eq!(app.profile(token).await.status, StatusCode::UNAUTHORIZED);
        }

        assert_eq!(
            support_actions(app, user_id, "cli").await,
            ["user.shown", "user.shown", "sessions.revoked"]
        );
        let service_revoked = app
            .count(
                "select count(*) from audit_log where action = 'token.revoked'
                   and user_id is null and context->>'service_name' = 'ledger'
                   and context->'by'->>'via' = 'cli'",
            )
            .await;
        assert_eq!(
            service_revoked, 1,
            "one revocation, the second found nothing"
        );
    })
    .await;
}

/// `GET /api/admin/audit?user_id=` answers an operator a user's trail, newest first, in pages
/// that together hold every row once; each page read is itself on the trail (`audit.read`, with
/// the operator). A user is refused, and so are a missing `user_id` and a made-up cursor.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn operators_page_through_a_users_audit_trail(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (operator_id, operator) = app.operator("support-desk@example.com").await;
        let (user_id, token) = app.user("trail@example.com").await;
        for i in 0..4 {
            let patched = app
                .patch_profile(
                    &token,
                    uuid::Uuid::new_v4(),
                    &serde_json::json!({"display_name": format!("Trail {i}")}),
                )
                .await;
            assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
        }
        let expected: Vec<i64> = sqlx::query_scalar(
            "select id from audit_log where user_id = $1 order by created_at desc, id desc",
        )
        .bind(user_id)
        .fetch_all(&app.pool)
        .await
        .expect("trail");
        assert!(expected.len() >= 5, "{expected:?}");

        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10 {
            let mut path = format!("/api/admin/audit?user_id={user_id}&limit=2");
            if let Some(cursor) = &cursor {
                path.push_str(&format!("&cursor={cursor}"));
            }
            let page = app.get(&path, &operator).await;
            assert_eq!(page.status, StatusCode::OK, "{}", page.text);
            for row in page.body["data"].as_array().expect("data") {
                assert!(
                    row["action"].is_string() && row["created_at"].is_string(),
                    "{row}"
                );
                seen.push(row["id"].as_i64().expect("id"));
            }
            cursor = page.body["next_cursor"].as_str().map(str::to_owned);
            assert_eq!(page.body["has_more"], cursor.is_some(), "{}", page.text);
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(seen, expected, "every row once, newest first");
        let unique: BTreeSet<i64> = seen.iter().copied().collect();
        assert_eq!(unique.len(), seen.len());

        let reads: Vec<Value> = sqlx::query_scalar(
            "select context from audit_log where user_id = $1 and action = 'audit.read'",
        )
        .bind(user_id)
        .fetch_all(&app.pool)
        .await
        .expect("reads");
        assert_eq!(reads.len(), expected.len().div_ceil(2), "{reads:?}");
        assert!(reads
            .iter()
            .all(|c| c["by"]["operator_id"] == operator_id && c["by"]["via"] == "api"));

        let as_user = app
            .get(&format!("/api/admin/audit?user_id={user_id}"), &token)
            .await;
        assert_problem(&as_user, StatusCode::FORBIDDEN, ErrorCode::Forbidden);
        let no_user = app.get("/api/admin/audit", &operator).await;
        assert_problem(&no_user, StatusCode::BAD_REQUEST, ErrorCode::InvalidQuery);
        let made_up = app
            .get(
                &format!("/api/admin/audit?user_id={user_id}&cursor=abc"),
                &operator,
            )
            .await;
        assert_problem(&made_up, StatusCode::BAD_REQUEST, ErrorCode::InvalidQuery);
    })
    .await;
}
