//! Sign-in email (docs/operations.md, "Sign-in email"): the relay sends what register and login
//! queue to a real SMTP server (tests/smtp/sink.py), with a link that signs in; a server that
//! refuses, then recovers, gets each message once; two relays never send one message twice; a
//! sent or given-up row no longer holds the token.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use raptor_api::mail::{Relay, RetryPolicy};
use sqlx::PgPool;

use crate::helpers::{cli, count, metric, Options, TestApp};
use crate::smtp_sink::{free_port, smtp_url, SinkOptions, SmtpSink};

const PUBLIC_URL: &str = "https://app.raptor.test";
const FROM: &str = "Raptor <no-reply@raptor.test>";

fn options() -> Options {
    let mut options = Options::default();
    options.api.public_url = PUBLIC_URL.to_owned();
    options
}

/// A relay to `url` that retries at once (1 ms backoff), up to `attempts` times.
fn relay(url: &str, attempts: u32) -> Relay {
    let retry = RetryPolicy {
        max_attempts: attempts,
        base: Duration::from_millis(1),
        max_delay: Duration::from_millis(1),
    };
    Relay::smtp(url, FROM, Duration::from_secs(5), retry, None).expect("relay")
}

/// `raptor mail relay` with the SMTP settings of `url`; what it printed.
async fn relay_cli(pool: &PgPool, url: &str) -> serde_json::Value {
    cli(
        pool,
        &[
            "--smtp-url",
            url,
            "--mail-from",
            FROM,
            "--public-url",
            PUBLIC_URL,
            "mail",
            "relay",
        ],
    )
    .await
    .expect("raptor mail relay")
}

/// Rows of `email_outbox` that still hold a token in clear.
async fn rows_with_token(app: &TestApp) -> i64 {
    app.count(
        "select count(*) from email_outbox
          where coalesce(body, '') like '%rpl_%' or link is not null",
    )
    .await
}

/// Register, receive the email through SMTP (authenticated), open its link's token: a session
/// for the new user; then log in the same way. Each sent row has lost its token.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_sign_up_email_arrives_with_a_link_that_signs_in(pool: PgPool) {
    let sink = SmtpSink::start(SinkOptions {
        auth: Some(("relay", "s3cret")),
        ..SinkOptions::default()
    })
    .await;
    TestApp::run(&pool, options(), async |app| {
        let registered = app.register("Ada@Example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );
        assert_eq!(
            rows_with_token(app).await,
            1,
            "the queued message holds its token"
        );

        let pass = relay_cli(&app.pool, &sink.url()).await;
        assert_eq!(
            pass,
            serde_json::json!({"sent": 1, "retried": 0, "given_up": 0})
        );
        let messages = sink.wait_for(1).await;
        let mail = &messages[0];
        assert_eq!(
            mail.rcpt_tos,
            ["Ada@Example.com"],
            "the address as registered"
        );
        assert!(
            mail.authenticated,
            "the relay authenticated with the URL's credentials"
        );
        assert_eq!(
            mail.header("Subject").as_deref(),
            Some("Confirm your email for Raptor")
        );
        assert!(mail
            .header("From")
            .is_some_and(|from| from.contains("no-reply@raptor.test")));
        let link = mail.link();
        let token = link
            .strip_prefix(&format!("{PUBLIC_URL}/verify?token="))
            .unwrap_or_else(|| panic!("a sign-up link, not {link}"));
        assert!(
            mail.body().contains(&format!("\n{token}\n")),
            "the token on its own too"
        );

        let verified = app.verify(token).await;
        assert_eq!(verified.status, StatusCode::OK, "{}", verified.text);
        let user_id = verified.body["user_id"].as_i64().expect("user_id");
        assert_eq!(rows_with_token(app).await, 0, "a sent row keeps no token");
        assert_eq!(
            app.count(
                "select count(*) from email_outbox where sent_at is not null and attempts = 1"
            )
            .await,
            1
        );

        let login = app.login("ada@example.com").await;
        assert_eq!(login.status, StatusCode::ACCEPTED, "{}", login.text);
        let deadline = Instant::now() + Duration::from_secs(5);
        while app
            .count("select count(*) from email_outbox where sent_at is null")
            .await
            == 0
        {
            assert!(Instant::now() < deadline, "the login link was not queued");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(relay_cli(&app.pool, &sink.url()).await["sent"], 1);
        let messages = sink.wait_for(2).await;
        let mail = &messages[1];
        assert_eq!(mail.header("Subject").as_deref(), Some("Sign in to Raptor"));
        let link = mail.link();
        let token = link
            .strip_prefix(&format!("{PUBLIC_URL}/login?token="))
            .unwrap_or_else(|| panic!("a login link, not {link}"));
        let session = app.verify(token).await;
        assert_eq!(session.status, StatusCode::OK, "{}", session.text);
        assert_eq!(session.body["user_id"].as_i64(), Some(user_id));
        assert_eq!(rows_with_token(app).await, 0);
        assert_eq!(
            relay_cli(&app.pool, &sink.url()).await["sent"],
            0,
            "nothing sent twice"
        );
        assert_eq!(sink.messages().len(), 2);
    })
    .await;
}

/// Passes of `relay` until `done` says so (bounded).
async fn relay_until(relay: &Relay, pool: &PgPool, done: impl Fn(raptor_api::mail::Pass) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pass = relay.run_pass(pool, 100).await.expect("relay pass");
        if done(pass) {
            return;
        }
        assert!(Instant::now() < deadline, "the relay never got there");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Nothing listening, then a server that answers 451, then one that accepts: the message is
/// retried and delivered exactly once, after three attempts.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_server_that_refuses_then_recovers_gets_the_message_once(pool: PgPool) {
    TestApp::run(&pool, options(), async |app| {
        let port = free_port();
        let relay = relay(&smtp_url(port, None), 10);
        let sends = "raptor_smtp_send_duration_seconds_count";
        let before = app.metrics().await;
        let registered = app.register("grace@example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );

        let pass = relay.run_pass(&app.pool, 100).await.expect("pass");
        assert_eq!((pass.sent, pass.retried), (0, 1), "no server: retried");
        assert_eq!(
            app.count(
                "select count(*) from email_outbox
                  where attempts = 1 and last_error is not null and sent_at is null
                    and body like '%rpl_%'"
            )
            .await,
            1,
            "still queued, with its token, after a failure"
        );

        let sink = SmtpSink::start(SinkOptions {
            port: Some(port),
            refuse: 1,
            ..SinkOptions::default()
        })
        .await;
        relay_until(&relay, &app.pool, |pass| pass.retried > 0).await;
        assert!(sink.messages().is_empty(), "the 451 kept nothing");
        relay_until(&relay, &app.pool, |pass| pass.sent > 0).await;

        let messages = sink.wait_for(1).await;
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].rcpt_tos, ["grace@example.com"]);
        assert_eq!(
            app.count(
                "select count(*) from email_outbox where attempts = 3 and sent_at is not null"
            )
            .await,
            1
        );
        let again = relay.run_pass(&app.pool, 100).await.expect("pass");
        assert_eq!(again.total(), 0);
        assert_eq!(sink.messages().len(), 1, "delivered once");
        assert_eq!(rows_with_token(app).await, 0);
        // Each SMTP attempt is timed by outcome (other tests of this process may add theirs).
        let after = app.metrics().await;
        let delta = |outcome| {
            let labels = [("outcome", outcome)];
            count(&after, sends, &labels) - count(&before, sends, &labels)
        };
        assert!(delta("transient_failure") >= 2.0, "{after}");
        assert!(delta("sent") >= 1.0, "{after}");
    })
    .await;
}

/// A message that cannot be delivered within its attempts is given up: never tried again, its
/// token cleared, counted in `raptor_mail_messages_total{outcome="given_up"}`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_undeliverable_message_is_given_up_and_counted(pool: PgPool) {
    TestApp::run(&pool, options(), async |app| {
        let relay = relay(&smtp_url(free_port(), None), 2);
        let registered = app.register("gone@example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );
        relay_until(&relay, &app.pool, |pass| pass.given_up > 0).await;
        assert_eq!(
            app.count(
                "select count(*) from email_outbox
                  where failed_at is not null and attempts = 2 and sent_at is null
                    and last_error is not null"
            )
            .await,
            1
        );
        assert_eq!(
            rows_with_token(app).await,
            0,
            "a given-up row keeps no token"
        );
        assert_eq!(
            relay.run_pass(&app.pool, 100).await.expect("pass").total(),
            0
        );
        let metrics = app.metrics().await;
        assert!(
            metrics
                .lines()
                .any(|line| line.starts_with("raptor_mail_messages_total{outcome=\"given_up\"}")),
            "{metrics}"
        );
    })
    .await;
}

/// Two relays on two pools (two replicas) drain 40 messages together: each message arrives
/// exactly once, and both relays did part of the work.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn two_relays_never_send_a_message_twice(pool: PgPool) {
    let sink = SmtpSink::start(SinkOptions::default()).await;
    TestApp::run(&pool, options(), async |app| {
        app.execute(
            "insert into email_outbox (email, kind, subject, body, link)
             select 'user' || n || '@example.com', 'verify_email', 'Confirm your email for Raptor',
                    'message ' || n || E'\n', 'https://app.raptor.test/verify?token=rpl_' || n
               from generate_series(1, 40) n",
        )
        .await;
        let replica = app.replica(options()).await;
        let (one, two) = (relay(&sink.url(), 3), relay(&sink.url(), 3));
        let (first, second) = tokio::join!(
            one.run_pass(&app.pool, 1000),
            two.run_pass(&replica.pool, 1000)
        );
        let (first, second) = (first.expect("first relay"), second.expect("second relay"));
        assert_eq!(first.sent + second.sent, 40, "{first:?} {second:?}");
        assert!(
            first.sent > 0 && second.sent > 0,
            "both relays worked: {first:?} {second:?}"
        );

        let messages = sink.wait_for(40).await;
        assert_eq!(messages.len(), 40, "no message sent twice");
        let ids: HashSet<String> = messages
            .iter()
            .map(|mail| mail.header("Message-ID").expect("Message-ID"))
            .collect();
        assert_eq!(ids.len(), 40, "40 distinct messages");
        let recipients: HashSet<&str> = messages
            .iter()
            .flat_map(|mail| mail.rcpt_tos.iter().map(String::as_str))
            .collect();
        assert_eq!(recipients.len(), 40, "every recipient once");
        assert_eq!(rows_with_token(app).await, 0);
    })
    .await;
}

/// Without RAPTOR_SMTP_URL the relay logs the link instead of sending it, and the row is done
/// (no token kept).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn without_smtp_the_link_is_logged_not_sent(pool: PgPool) {
    TestApp::run(&pool, options(), async |app| {
        let registered = app.register("dev@example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );
        let pass = cli(&app.pool, &["mail", "relay"])
            .await
            .expect("mail relay");
        assert_eq!(
            pass,
            serde_json::json!({"sent": 1, "retried": 0, "given_up": 0})
        );
        assert_eq!(rows_with_token(app).await, 0);
    })
    .await;
}

/// SMTP settings that cannot work stop the command with the variable's name.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn smtp_without_a_sender_or_public_url_is_refused(pool: PgPool) {
    let err = cli(
        &pool,
        &["--smtp-url", "smtp://127.0.0.1:25", "mail", "relay"],
    )
    .await
    .expect_err("refused");
    let message = err.to_string();
    assert!(
        message.contains("RAPTOR_MAIL_FROM") && message.contains("RAPTOR_PUBLIC_URL"),
        "{message}"
    );
    let err = cli(
        &pool,
        &[
            "--smtp-url",
            "http://mail",
            "--mail-from",
            FROM,
            "--public-url",
            PUBLIC_URL,
            "mail",
            "relay",
        ],
    )
    .await
    .expect_err("refused");
    assert!(err.to_string().contains("RAPTOR_SMTP_URL"), "{err}");
}

/// The relay `raptor serve` runs ([`raptor_server::spawn_mail_relay`]) sends a message queued
/// while it runs, without anyone asking.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_relay_of_serve_sends_what_is_queued(pool: PgPool) {
    let sink = SmtpSink::start(SinkOptions::default()).await;
    TestApp::run(&pool, options(), async |app| {
        let task = raptor_server::spawn_mail_relay(
            app.pool.clone(),
            relay(&sink.url(), 3),
            Duration::from_millis(20),
        );
        let registered = app.register("loop@example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );
        let messages = sink.wait_for(1).await;
        assert_eq!(messages[0].rcpt_tos, ["loop@example.com"]);
        assert!(messages[0].link().starts_with(PUBLIC_URL));
        // The schedule reports its last success once its pass returns, and samples the queue
        // when it goes idle.
        let mut metrics = app.metrics().await;
        for _ in 0..100 {
            if metric(&metrics, "raptor_mail_outbox_unsent", &[]).is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            metrics = app.metrics().await;
        }
        task.abort();
        let relayed = metric(
            &metrics,
            "raptor_schedule_last_success_timestamp_seconds",
            &[("schedule", "mail_relay")],
        );
        assert!(relayed.is_some_and(|at| at > 1.7e9), "{metrics}");
        assert!(metric(&metrics, "raptor_mail_outbox_unsent", &[]).is_some());
    })
    .await;
}

/// The relay holds no transaction while it talks to the SMTP server: it leases the message in
/// one statement and records the outcome in another. With an SMTP server that accepts the
/// connection and never greets, the message's row is not locked and no session of ours sits
/// idle in a transaction for the whole conversation (before, both were held, and for ever: the
/// SMTP timeout does not bound a server that never greets); the conversation ends within five
/// SMTP timeouts and the failure is recorded as a retry.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_relay_holds_no_transaction_while_it_talks_smtp(pool: PgPool) {
    TestApp::run(&pool, options(), async |app| {
        let port = crate::helpers::peers::silent_listener().await;
        let retry = RetryPolicy {
            max_attempts: 5,
            base: Duration::from_secs(60),
            max_delay: Duration::from_secs(60),
        };
        let relay = Relay::smtp(
            &format!("smtp://127.0.0.1:{port}"),
            FROM,
            Duration::from_secs(1),
            retry,
            None,
        )
        .expect("relay");
        let registered = app.register("hung@example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );

        let pass = {
            let (relay, pool) = (relay.clone(), app.pool.clone());
            tokio::spawn(async move { relay.run_pass(&pool, 10).await })
        };
        // The relay is now waiting for the server's greeting.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let mut probe = app.pool.begin().await.expect("begin");
        let locked = sqlx::query("select id from email_outbox for update nowait")
            .fetch_all(&mut *probe)
            .await;
        probe.rollback().await.expect("rollback");
        assert!(
            locked.is_ok(),
            "the row is locked mid-conversation: {locked:?}"
        );
        let idle = app
            .count(
                "select count(*) from pg_stat_activity
                  where datname = current_database() and state like 'idle in transaction%'",
            )
            .await;
        assert_eq!(
            idle, 0,
            "a session sits idle in a transaction mid-conversation"
        );

        let pass = pass.await.expect("join").expect("pass");
        assert_eq!((pass.sent, pass.retried), (0, 1));
        assert_eq!(
            app.count(
                "select count(*) from email_outbox
                  where attempts = 1 and sent_at is null and failed_at is null
                    and next_attempt_at > now() + interval '50 seconds'"
            )
            .await,
            1,
            "the failure is recorded as a retry after the back-off"
        );
    })
    .await;
}

/// Outside development (`RAPTOR_ENV=production`, the default) a sign-in link is never written to
/// the log, whoever reads it could sign in with it: `raptor mail relay` without an SMTP relay
/// sends nothing, logs no link, and the message waits (retried) with its link for a relay that
/// can send it. In development the same pass logs the link.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn outside_development_no_link_is_logged(pool: PgPool) {
    TestApp::run(&pool, options(), async |app| {
        let registered = app.register("prod@example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );
        let link: String = app
            .scalar("select link from email_outbox where email = 'prod@example.com'")
            .await;
        let token = link.rsplit('=').next().expect("token").to_owned();
        let run = |environment: &str| {
            crate::helpers::raptor(
                &[
                    ("DATABASE_URL", crate::helpers::database_url(&app.pool)),
                    ("RAPTOR_ENV", environment.to_owned()),
                    ("RUST_LOG", "info".to_owned()),
                ],
                &["mail", "relay"],
            )
        };
        let production = run("production");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&production.stdout),
            String::from_utf8_lossy(&production.stderr),
        );
        assert!(production.status.success(), "{stderr}");
        assert!(stdout.contains(r#""retried":1"#), "{stdout}");
        assert!(!stderr.contains(&token), "the link was logged: {stderr}");
        assert_eq!(
            rows_with_token(app).await,
            1,
            "the message waits with its link"
        );

        sqlx::query("update email_outbox set next_attempt_at = now()")
            .execute(&app.pool)
            .await
            .expect("due again");
        let development = run("development");
        let stderr = String::from_utf8_lossy(&development.stderr);
        assert!(development.status.success(), "{stderr}");
        assert!(
            stderr.contains(&token),
            "development logs the link: {stderr}"
        );
    })
    .await;
}
