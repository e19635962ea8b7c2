//! The user's profile: reads, patches with validation codes, `null` clears, and a keyed
//! retry that runs again (the answer is personal data, so nothing of it is stored).

use axum::http::StatusCode;
use raptor_api::codes::ErrorCode;
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, Options, TestApp};

/// Patch, validation codes, `null` clears, unknown fields, a keyed retry runs again (nothing
/// stored), audit of field names.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn profile_patch(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("pro@example.com").await;
        let read = app.profile(&token).await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.text);
        assert_eq!(read.body["email"], "pro@example.com");
        assert_eq!(read.body["display_name"], Value::Null);
        assert_eq!(read.body["marketing_opt_in"], false);

        let key = Uuid::new_v4();
        let body = json!({ "display_name": "  Ada L.  ", "time_zone": "America/New_York",
                       "marketing_opt_in": true });
        let patched = app.patch_profile(&token, key, &body).await;
        assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
        assert_eq!(patched.header("idempotent-replayed"), Some("false"));
        assert_eq!(patched.body["user_id"].as_i64(), Some(i64::from(user_id)));
        assert_eq!(patched.body["display_name"], "Ada L.");
        assert_eq!(patched.body["time_zone"], "America/New_York");
        assert_eq!(patched.body["marketing_opt_in"], true);
        let stored: (Option<String>, Option<String>, bool) = sqlx::query_as(
            "select display_name, time_zone, marketing_opt_in from users where id = $1",
        )
        .bind(user_id)
        .fetch_one(&app.pool)
        .await
        .expect("user");
        assert_eq!(
            stored,
            (Some("Ada L.".into()), Some("America/New_York".into()), true)
        );

        // The answer is personal data: nothing of it is stored on the key row, and the retry runs
        // the patch again, which changes nothing the first run did not (no second audit row) and
        // answers the profile as it is.
        let (body_kept, headers_kept, status): (Option<Value>, Option<Value>, String) =
            sqlx::query_as(
                "select response_body, response_headers, status from idempotency_keys
              where idem_key = $1",
            )
            .bind(key.to_string())
            .fetch_one(&app.pool)
            .await
            .expect("key row");
        assert_eq!((body_kept, headers_kept), (None, None), "nothing stored");
        assert_eq!(status, "completed");
        let again = app.patch_profile(&token, key, &body).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.text);
        assert_eq!(again.header("idempotent-replayed"), Some("false"));
        assert_eq!(again.body, patched.body);
        // Another body with the same key is still a mismatch.
        let other = app
            .patch_profile(&token, key, &json!({ "display_name": "Eve" }))
            .await;
        assert_problem(
            &other,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::IdempotencyKeyBodyMismatch,
        );
        let audit: Vec<Value> = sqlx::query_scalar(
            "select context from audit_log where action = 'profile.updated' order by id",
        )
        .fetch_all(&app.pool)
        .await
        .expect("audit");
        assert_eq!(
            audit,
            [json!({ "fields": ["display_name", "time_zone", "marketing_opt_in"] })],
            "one row for the execution, naming fields only"
        );

        for (body, code) in [
            (
                json!({ "display_name": "x".repeat(65) }),
                ErrorCode::InvalidDisplayName,
            ),
            (
                json!({ "display_name": "tab\there" }),
                ErrorCode::InvalidDisplayName,
            ),
            (
                json!({ "time_zone": "Mars/Olympus" }),
                ErrorCode::InvalidTimeZone,
            ),
            (json!({ "time_zone": "" }), ErrorCode::InvalidTimeZone),
            (
                json!({ "marketing_opt_in": null }),
                ErrorCode::InvalidMarketingOptIn,
            ),
            (json!({ "marketing_opt_in": "yes" }), ErrorCode::InvalidBody),
            (
                json!({ "email": "evil@example.com" }),
                ErrorCode::InvalidBody,
            ),
        ] {
            let refused = app.patch_profile(&token, None, &body).await;
            assert_problem(&refused, StatusCode::UNPROCESSABLE_ENTITY, code);
        }
        let ok = app
            .patch_profile(&token, None, &json!({ "display_name": "é".repeat(64) }))
            .await;
        assert_eq!(ok.status, StatusCode::OK, "64 characters fit: {}", ok.text);

        let cleared = app
            .patch_profile(
                &token,
                Uuid::new_v4(),
                &json!({ "display_name": null, "time_zone": null }),
            )
            .await;
        assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.text);
        assert_eq!(cleared.body["display_name"], Value::Null);
        assert_eq!(cleared.body["time_zone"], Value::Null);
        assert_eq!(
            cleared.body["marketing_opt_in"], true,
            "absent is untouched"
        );
        let read = app.profile(&token).await;
        assert_eq!(read.body, cleared.body);
    })
    .await;
}

/// Control characters in a time zone (a NUL, which Postgres text cannot hold, a newline, DEL)
/// are `422 invalid_time_zone`, not a database error.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn control_characters_in_a_time_zone_are_refused(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("tz@example.com").await;
        for zone in ["\u{0}Europe/Paris", "Europe/Paris\n", "Europe/\u{7f}Paris"] {
            let answer = app
                .patch_profile(&token, Uuid::new_v4(), &json!({ "time_zone": zone }))
                .await;
            assert_problem(
                &answer,
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidTimeZone,
            );
        }
    })
    .await;
}
