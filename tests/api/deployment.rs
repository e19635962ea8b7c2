//! A production deployment, end to end, with every part real: Postgres that accepts only TLS
//! (`verify-full`), an SMTP server, HAProxy in front of a `raptor serve` process that trusts it.
//! A new user registers through the proxy, the sign-in email arrives over SMTP (sent by serve's
//! own relay), the link's token opens a session, and the user places a keyed order whose retry
//! is a replay. The access log names the user's own address, not the proxy's.

use std::process::Stdio;
use std::time::{Duration, Instant};

use raptor_integration_tests::free_port;
use reqwest::StatusCode;
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};
use tokio::process::{Child, Command};

use crate::behind_a_proxy::{request_lines, start_haproxy, wait_for_health};
use crate::helpers::tls_pg::TlsPg;
use crate::helpers::{post_keyed_order, raptor_ok};
use crate::smtp_sink::{SinkOptions, SmtpSink};

const PUBLIC_URL: &str = "https://app.raptor.test";

async fn stop(mut child: Child) {
    let _ = child.start_kill();
    let _ = child.wait().await;
}

#[tokio::test]
async fn a_new_user_signs_up_by_email_and_trades_through_the_proxy_on_tls_postgres() {
    let dir = std::env::temp_dir().join(format!("raptor-deployment-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("dir");
    let pg = TlsPg::start(&["127.0.0.1"]).expect("TLS cluster");
    let sink = SmtpSink::start(SinkOptions {
        auth: Some(("relay", "s3cret")),
        ..SinkOptions::default()
    })
    .await;
    let (api_port, proxy_port) = (
        free_port().expect("a free port"),
        free_port().expect("a free port"),
    );
    let env: Vec<(&str, String)> = vec![
        ("DATABASE_URL", pg.verified_url()),
        ("RAPTOR_ADDR", format!("127.0.0.1:{api_port}")),
        ("RAPTOR_LOG_FORMAT", "json".to_owned()),
        ("RAPTOR_TRUSTED_PROXIES", "127.0.0.1/32".to_owned()),
        ("RAPTOR_SMTP_URL", sink.url()),
        (
            "RAPTOR_MAIL_FROM",
            "Raptor <no-reply@raptor.test>".to_owned(),
        ),
        ("RAPTOR_PUBLIC_URL", PUBLIC_URL.to_owned()),
        ("RAPTOR_MAIL_RELAY_INTERVAL_MS", "100".to_owned()),
        (
            "RAPTOR_SESSION_KEY",
            "3q2+7wXrYb0Pp1zL4nQ8mA6tVdK9cF2sH5jU0gBiRwE=".to_owned(),
        ),
        (
            "RAPTOR_RESPONSE_KEYS",
            "k1:Dl0E4uXxdSCORwTWta+GN0XvbYLZMwZOmlH5sQinn/o=".to_owned(),
        ),
        // As deployed: nothing a production start needs is missing.
        ("RAPTOR_ENV", "production".to_owned()),
    ];
    assert_eq!(raptor_ok(&env, &["migrate"])["migrated"], true);
    raptor_ok(
        &env,
        &[
            "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
        ],
    );

    let log = dir.join("raptor.log");
    let server = Command::new(env!("CARGO_BIN_EXE_raptor-cli"))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .kill_on_drop(true)
        .spawn()
        .expect("start raptor serve");
    wait_for_health(api_port, &log).await;
    let proxy = start_haproxy(&dir, proxy_port, api_port).await;

    // The user's connections leave from 127.0.0.2; the proxy's from 127.0.0.1.
    let client = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().expect("ip"))
        .build()
        .expect("client");
    let base = format!("http://127.0.0.1:{proxy_port}");

    let registered = client
        .post(format!("{base}/api/auth/register"))
        .json(&json!({ "email": "grace@example.com" }))
        .send()
        .await
        .expect("register");
    assert_eq!(registered.status(), StatusCode::ACCEPTED);

    // serve's relay sends it; nobody runs a relay pass by hand.
    let messages = sink.wait_for(1).await;
    let mail = &messages[0];
    assert_eq!(mail.rcpt_tos, ["grace@example.com"]);
    assert!(mail.authenticated, "the relay signed in to the SMTP server");
    let link = mail.link();
    let link_token = link
        .strip_prefix(&format!("{PUBLIC_URL}/verify?token="))
        .unwrap_or_else(|| panic!("a sign-up link, not {link}"))
        .to_owned();

    let verified = client
        .post(format!("{base}/api/auth/register/verify-with-token"))
        .json(&json!({ "token": link_token }))
        .send()
        .await
        .expect("verify");
    assert_eq!(verified.status(), StatusCode::OK);
    let session: Value = verified.json().await.expect("session");
    let token = session["token"].as_str().expect("session token").to_owned();

    let key = uuid::Uuid::new_v4().to_string();
    let place = async || post_keyed_order(&client, &base, &token, &key).await;
    let first = place().await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let order: Value = first.json().await.expect("order body");
    let replay = place().await;
    assert_eq!(replay.status(), StatusCode::CREATED);
    assert_eq!(
        replay
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    let replayed: Value = replay.json().await.expect("replay body");
    assert_eq!(replayed["id"], order["id"], "the retry is the same order");

    // On the TLS database: one order, its key completed, the sent mail without its token; and
    // every connection of the server is encrypted.
    let mut conn = PgConnection::connect(&pg.verified_url())
        .await
        .expect("connect");
    let (orders, completed): (i64, i64) = sqlx::query_as(
        "select (select count(*) from paper_orders),
                (select count(*) from idempotency_keys where status = 'completed')",
    )
    .fetch_one(&mut conn)
    .await
    .expect("counts");
    assert_eq!((orders, completed), (1, 1));
    let unsent_or_with_token: i64 = sqlx::query_scalar(
        "select count(*) from email_outbox\n          where sent_at is null or body is not null or link is not null",
    )
    .fetch_one(&mut conn)
    .await
    .expect("outbox");
    assert_eq!(unsent_or_with_token, 0, "sent, and the token is gone");
    let plain: i64 = sqlx::query_scalar(
        "select count(*) from pg_stat_activity a join pg_stat_ssl s using (pid)
          where a.application_name like 'raptor%' and not s.ssl",
    )
    .fetch_one(&mut conn)
    .await
    .expect("pg_stat_ssl");
    assert_eq!(plain, 0, "no connection of the server without TLS");

    // The access log names the user's address (through the trusted proxy) and the user.
    let deadline = Instant::now() + Duration::from_secs(5);
    let line = loop {
        if let Some(line) = request_lines(&log, "/api/trading/orders")
            .into_iter()
            .next()
        {
            break line;
        }
        assert!(
            Instant::now() < deadline,
            "no access-log line for the order"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(line["fields"]["client_addr"], "127.0.0.2", "{line}");
    assert_eq!(line["fields"]["user_id"], session["user_id"], "{line}");

    stop(proxy).await;
    stop(server).await;
    let _ = std::fs::remove_dir_all(&dir);
}
