//! Retention (docs/operations.md, "Retention"): the hourly cleanup deletes sent and given-up
//! outbox messages (personal data; unsent ones hold sign-in tokens in clear), spent or expired sign-in links and Stripe event ids past
//! the resend window, in bounded batches, and keeps everything still in use.

use sqlx::PgPool;

use crate::helpers::{Options, TestApp};

async fn ids(app: &TestApp, sql: &str) -> Vec<String> {
    sqlx::query_scalar(sql)
        .fetch_all(&app.pool)
        .await
        .expect("ids")
}

#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn cleanup_deletes_spent_credentials_in_batches(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        // Outbox: five sent two days ago and one old unsent (deleted); one sent an hour ago and one
        // queued now (kept). The subject says which is which.
        sqlx::query(
            "insert into email_outbox (email, kind, subject, body, created_at, sent_at)
         select 'a@example.com', 'login_link', 'old-sent', 'rpl_x', now() - interval '2 days',
                now() - interval '2 days'
           from generate_series(1, 5)
         union all
         select 'a@example.com', 'login_link', 'stale-unsent', 'rpl_x', now() - interval '8 days', \
                null
         union all
         select 'a@example.com', 'login_link', 'recent-sent', 'rpl_x', now() - interval '1 hour',
                now() - interval '1 hour'
         union all
         select 'a@example.com', 'login_link', 'queued', 'rpl_x', now(), null",
        )
        .execute(&app.pool)
        .await
        .expect("outbox rows");
        // Given up by the mail relay: two days ago (deleted) and an hour ago (kept).
        sqlx::query(
            "insert into email_outbox (email, kind, subject, body, created_at, failed_at)
             values ('a@example.com', 'login_link', 'old-failed', null, now() - interval '2 days',
                     now() - interval '2 days'),
                    ('a@example.com', 'login_link', 'recent-failed', null,
                     now() - interval '2 days', now() - interval '1 hour')",
        )
        .execute(&app.pool)
        .await
        .expect("given-up outbox rows");
        // Links: expired two days ago and used two days ago (deleted); used five minutes ago
        // (within its repeat grace) and live (kept).
        sqlx::query(
            "insert into auth_link_tokens (token_hash, purpose, email, expires_at, used_at)
         values (sha256('expired'), 'login', 'expired', now() - interval '2 days', null),
                (sha256('spent'), 'login', 'spent', now() + interval '1 hour',
                 now() - interval '2 days'),
                (sha256('grace'), 'login', 'grace', now() + interval '1 hour',
                 now() - interval '5 minutes'),
                (sha256('live'), 'login', 'live', now() + interval '1 hour', null)",
        )
        .execute(&app.pool)
        .await
        .expect("link rows");
        // Stripe events: processed 31 days ago (deleted) and yesterday (kept).
        sqlx::query(
            "insert into processed_stripe_events (event_id, type, created, applied, processed_at)
         values ('evt_old', 'invoice.paid', now(), true, now() - interval '31 days'),
                ('evt_recent', 'invoice.paid', now(), true, now() - interval '1 day')",
        )
        .execute(&app.pool)
        .await
        .expect("event rows");

        let deleted = raptor_api::retention::delete_expired(&app.pool, 2)
            .await
            .expect("cleanup");
        assert_eq!(deleted.email_outbox, 7, "{deleted:?}");
        assert_eq!(deleted.sign_in_links, 2, "{deleted:?}");
        assert_eq!(deleted.stripe_events, 1, "{deleted:?}");
        assert_eq!(
            ids(app, "select subject from email_outbox order by subject").await,
            ["queued", "recent-failed", "recent-sent"]
        );
        assert_eq!(
            ids(app, "select email from auth_link_tokens order by email").await,
            ["grace", "live"]
        );
        assert_eq!(
            ids(app, "select event_id from processed_stripe_events").await,
            ["evt_recent"]
        );
        // A second run finds nothing more.
        let again = raptor_api::retention::delete_expired(&app.pool, 2)
            .await
            .expect("cleanup");
        assert_eq!(again, raptor_api::retention::Deleted::default());
    })
    .await;
}
