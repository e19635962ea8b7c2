//! Sign-in email over TLS to a private relay: the real SMTP sink (tests/smtp/sink.py) speaks
//! STARTTLS or implicit TLS with a certificate signed by a CA made here, and `raptor mail relay`
//! trusts that CA through `RAPTOR_SMTP_CA_FILE`. The message arrives encrypted either way; with
//! the wrong CA the handshake fails, the row stays unsent with an error that names the setting,
//! and the attempt is counted.

use std::path::PathBuf;

use axum::http::StatusCode;
use sqlx::PgPool;

use crate::helpers::test_ca::Ca;
use crate::helpers::{cli, Options, TestApp};
use crate::smtp_sink::{SinkOptions, SinkTls, SmtpSink};

const PUBLIC_URL: &str = "https://app.raptor.test";
const FROM: &str = "Raptor <no-reply@raptor.test>";

/// The files of one TLS setup: the relay's certificate and key (for 127.0.0.1 and localhost),
/// the CA that signed them and another CA; removed on drop.
struct Certificates {
    dir: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    other_ca: PathBuf,
}

impl Certificates {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("raptor-smtp-tls-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("certificate directory");
        let ca = Ca::new("Raptor mail test CA").expect("CA");
        let other = Ca::new("Some other CA").expect("other CA");
        let (cert, key) = ca
            .sign(&["127.0.0.1", "localhost"], "smtp relay")
            .expect("server certificate");
        let this = Self {
            cert: dir.join("relay.crt"),
            key: dir.join("relay.key"),
            ca: dir.join("ca.crt"),
            other_ca: dir.join("other-ca.crt"),
            dir,
        };
        for (path, text) in [
            (&this.cert, cert),
            (&this.key, key),
            (&this.ca, ca.pem()),
            (&this.other_ca, other.pem()),
        ] {
            std::fs::write(path, text).expect("write a PEM file");
        }
        this
    }

    fn sink_tls(&self, mode: &'static str) -> SinkTls {
        SinkTls {
            mode,
            cert: self.cert.clone(),
            key: self.key.clone(),
        }
    }
}

impl Drop for Certificates {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn options() -> Options {
    let mut options = Options::default();
    options.api.public_url = PUBLIC_URL.to_owned();
    options
}

/// `raptor mail relay` to `url`, trusting `ca`: what it printed.
async fn relay_cli(
    pool: &PgPool,
    url: &str,
    ca: &std::path::Path,
) -> anyhow::Result<serde_json::Value> {
    let ca = ca.to_str().expect("a UTF-8 path");
    cli(
        pool,
        &[
            "--smtp-url",
            url,
            "--smtp-ca-file",
            ca,
            "--mail-from",
            FROM,
            "--public-url",
            PUBLIC_URL,
            "--mail-retry-base-ms",
            "1",
            "mail",
            "relay",
        ],
    )
    .await
}

/// Registers `email` and relays its message through a sink speaking `mode` at `url_of(port)`:
/// it arrives, over an encrypted session, with a link, and its row is marked sent.
async fn delivered_over(pool: &PgPool, mode: &'static str, url_of: fn(u16) -> String) {
    let files = Certificates::new();
    let sink = SmtpSink::start(SinkOptions {
        tls: Some(files.sink_tls(mode)),
        ..SinkOptions::default()
    })
    .await;
    TestApp::run(pool, options(), async |app| {
        let registered = app.register("tls@example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );
        let pass = relay_cli(&app.pool, &url_of(sink.port), &files.ca)
            .await
            .expect("raptor mail relay");
        assert_eq!(
            pass,
            serde_json::json!({"sent": 1, "retried": 0, "given_up": 0}),
            "{mode}"
        );
        let messages = sink.wait_for(1).await;
        assert_eq!(messages[0].rcpt_tos, ["tls@example.com"]);
        assert!(messages[0].tls, "{mode}: the session was encrypted");
        assert!(messages[0].link().starts_with(PUBLIC_URL));
        assert_eq!(
            app.count("select count(*) from email_outbox where sent_at is not null")
                .await,
            1
        );
    })
    .await;
}

#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn mail_is_delivered_over_starttls_to_a_relay_of_a_private_ca(pool: PgPool) {
    delivered_over(&pool, "starttls", |port| {
        format!("smtp://127.0.0.1:{port}?tls=required")
    })
    .await;
}

#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn mail_is_delivered_over_implicit_tls_to_a_relay_of_a_private_ca(pool: PgPool) {
    delivered_over(&pool, "implicit", |port| {
        format!("smtps://127.0.0.1:{port}")
    })
    .await;
}

/// Trusting another CA, the handshake fails: nothing arrives, the row stays unsent and due
/// again, its error says the certificate did not verify and names `RAPTOR_SMTP_CA_FILE`, and
/// the attempt is counted in `raptor_mail_messages_total{outcome="retried"}`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_relay_of_another_ca_is_refused_and_the_row_stays_unsent(pool: PgPool) {
    let files = Certificates::new();
    let sink = SmtpSink::start(SinkOptions {
        tls: Some(files.sink_tls("starttls")),
        ..SinkOptions::default()
    })
    .await;
    TestApp::run(&pool, options(), async |app| {
        let registered = app.register("wrong-ca@example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );
        let url = format!("smtp://127.0.0.1:{}?tls=required", sink.port);
        let pass = relay_cli(&app.pool, &url, &files.other_ca)
            .await
            .expect("raptor mail relay");
        assert_eq!(
            pass,
            serde_json::json!({"sent": 0, "retried": 1, "given_up": 0})
        );
        assert!(sink.messages().is_empty(), "nothing was delivered");
        assert_eq!(
            app.count(
                "select count(*) from email_outbox
                  where sent_at is null and failed_at is null and attempts = 1"
            )
            .await,
            1,
            "the row stays unsent, to be tried again"
        );
        let error: String = app.scalar("select last_error from email_outbox").await;
        assert!(
            error.contains("certificate") && error.contains("RAPTOR_SMTP_CA_FILE"),
            "{error}"
        );
        let metrics = app.metrics().await;
        assert!(
            metrics
                .lines()
                .any(|line| line.starts_with("raptor_mail_messages_total{outcome=\"retried\"}")),
            "{metrics}"
        );

        // With the right CA the waiting message goes out.
        let mut sent = false;
        for _ in 0..100 {
            let pass = relay_cli(&app.pool, &url, &files.ca)
                .await
                .expect("raptor mail relay");
            if pass["sent"] == 1 {
                sent = true;
                break;
            }
            // The retry's 1 ms backoff has not passed yet.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(sent, "the waiting message was sent with the right CA");
        assert!(sink.wait_for(1).await[0].tls);
    })
    .await;
}

/// A CA file that cannot be used stops the command with the variable's name: one that holds no
/// certificate, and one given with a plain (unencrypted) SMTP URL.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_unusable_smtp_ca_file_is_refused(pool: PgPool) {
    let files = Certificates::new();
    let err = relay_cli(&pool, "smtps://127.0.0.1:465", &files.key)
        .await
        .expect_err("a key is not a CA");
    assert!(err.to_string().contains("RAPTOR_SMTP_CA_FILE"), "{err}");
    let err = relay_cli(&pool, "smtp://127.0.0.1:25", &files.ca)
        .await
        .expect_err("plain SMTP verifies nothing");
    assert!(
        err.to_string().contains("RAPTOR_SMTP_CA_FILE") && err.to_string().contains("TLS"),
        "{err}"
    );
    let err = relay_cli(
        &pool,
        "smtps://127.0.0.1:465",
        &files.dir.join("missing.pem"),
    )
    .await
    .expect_err("a missing file");
    assert!(err.to_string().contains("RAPTOR_SMTP_CA_FILE"), "{err}");
}
