//! Postgres over TLS, against a real cluster that accepts only TLS ([`TlsPg`]), through the
//! `raptor` binary as an operator runs it: `verify-full` with the right CA migrates and serves
//! a keyed order (both pools over TLS, the store's with a client certificate); a wrong CA, a
//! wrong host name (with `verify-ca` too: sqlx checks it), an unreadable CA file and `sslmode=disable` are start-up errors that say
//! what is wrong and name DATABASE_URL's TLS settings.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use raptor_integration_tests::free_port;
use sqlx::{Connection, PgConnection};

use crate::helpers::tls_pg::{TlsPg, CERT_USER};
use crate::helpers::{post_keyed_order, raptor, raptor_ok};

/// The stderr of a `raptor` that must fail.
fn fails(env: &[(&str, String)], args: &[&str]) -> String {
    let out = raptor(env, args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "raptor {args:?} succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// `raptor serve`, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn verify_full_with_the_right_ca_migrates_and_serves_a_keyed_order() {
    let pg = TlsPg::start(&["localhost", "127.0.0.1"]).expect("TLS cluster");
    let store_url = format!(
        "postgres://{CERT_USER}@127.0.0.1:{}/raptor?sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
        pg.port,
        pg.ca.display(),
        pg.client_cert.display(),
        pg.client_key.display()
    );
    let port = free_port().expect("port");
    let env = vec![
        ("DATABASE_URL", pg.verified_url()),
        ("IDEMPOTENCY_STORE_DATABASE_URL", store_url),
        ("RAPTOR_ADDR", format!("127.0.0.1:{port}")),
    ];
    assert_eq!(raptor_ok(&env, &["migrate"])["migrated"], true);
    let user = raptor_ok(&env, &["users", "create", "--email", "tls@example.com"]);
    let token = user["token"].as_str().expect("token").to_owned();
    raptor_ok(
        &env,
        &[
            "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
        ],
    );

    let mut command = Command::new(env!("CARGO_BIN_EXE_raptor-cli"));
    command
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RAPTOR_ENV", "development")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RUST_LOG", "warn")
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _server = Server(command.spawn().expect("spawn raptor serve"));
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = client.get(format!("{base}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        assert!(Instant::now() < deadline, "raptor serve never got ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let key = uuid::Uuid::new_v4().to_string();
    let place = async || post_keyed_order(&client, &base, &token, &key).await;
    let first = place().await;
    assert_eq!(first.status(), 201, "{:?}", first.text().await);
    let replay = place().await;
    assert_eq!(replay.status(), 201);
    assert_eq!(
        replay
            .headers()
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );

    // Both pools talk TLS; the store's with the client certificate.
    let mut conn = PgConnection::connect(&pg.verified_url())
        .await
        .expect("connect");
    let pools: Vec<(String, bool, Option<String>)> = sqlx::query_as(
        "select distinct a.application_name, s.ssl, s.client_dn
           from pg_stat_activity a join pg_stat_ssl s using (pid)
          where a.application_name in ('raptor', 'raptor-idempotency')
          order by 1",
    )
    .fetch_all(&mut conn)
    .await
    .expect("pg_stat_ssl");
    assert_eq!(
        pools,
        vec![
            ("raptor".to_owned(), true, None),
            (
                "raptor-idempotency".to_owned(),
                true,
                Some(format!("/CN={CERT_USER}"))
            ),
        ]
    );
    let orders: i64 = sqlx::query_scalar("select count(*) from paper_orders")
        .fetch_one(&mut conn)
        .await
        .expect("orders");
    assert_eq!(orders, 1, "the replay executed nothing");
    conn.close().await.ok();
}

#[tokio::test]
async fn a_wrong_ca_or_an_unreadable_one_is_a_start_up_error_naming_the_tls_settings() {
    let pg = TlsPg::start(&["localhost", "127.0.0.1"]).expect("TLS cluster");
    let url = pg.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={}", pg.other_ca.display()),
    );
    for command in ["migrate", "serve"] {
        let stderr = fails(&[("DATABASE_URL", url.clone())], &[command]);
        for needle in [
            "could not connect to DATABASE_URL",
            "not signed by a CA of sslrootcert",
            "DATABASE_URL's TLS settings: sslmode=verify-full",
            &format!("sslrootcert={}", pg.other_ca.display()),
        ] {
            assert!(
                stderr.contains(needle),
                "{command}: no {needle:?} in {stderr}"
            );
        }
    }
    // The store's URL is checked at start-up too.
    let env = [
        ("DATABASE_URL", pg.verified_url()),
        ("IDEMPOTENCY_STORE_DATABASE_URL", url),
        (
            "RAPTOR_ADDR",
            format!("127.0.0.1:{}", free_port().expect("port")),
        ),
    ];
    let stderr = fails(&env, &["serve"]);
    assert!(
        stderr.contains("IDEMPOTENCY_STORE_DATABASE_URL's TLS settings: sslmode=verify-full"),
        "{stderr}"
    );
    let missing = pg.url(
        "127.0.0.1",
        "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
    );
    let stderr = fails(&[("DATABASE_URL", missing)], &["migrate"]);
    assert!(
        stderr.contains("DATABASE_URL: sslrootcert=/nonexistent/ca.pem cannot be read"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_host_name_the_certificate_does_not_list_is_a_clear_start_up_error() {
    let pg = TlsPg::start(&["localhost"]).expect("TLS cluster");
    let ca = format!("sslrootcert={}", pg.ca.display());
    let by_ip = pg.url("127.0.0.1", &format!("sslmode=verify-full&{ca}"));
    let stderr = fails(&[("DATABASE_URL", by_ip)], &["migrate"]);
    for needle in [
        "not valid for the host name \"127.0.0.1\"",
        "DATABASE_URL's TLS settings: sslmode=verify-full",
        &ca,
    ] {
        assert!(stderr.contains(needle), "no {needle:?} in {stderr}");
    }
    // The name the certificate lists connects.
    let by_name = pg.url("localhost", &format!("sslmode=verify-full&{ca}"));
    raptor_ok(&[("DATABASE_URL", by_name)], &["migrate"]);
    // sqlx checks the name with verify-ca too (unlike libpq), and the error says so.
    let ca_only = pg.url("127.0.0.1", &format!("sslmode=verify-ca&{ca}"));
    let stderr = fails(&[("DATABASE_URL", ca_only)], &["migrate"]);
    assert!(
        stderr.contains("sqlx checks it even with sslmode=verify-ca"),
        "{stderr}"
    );
}

#[tokio::test]
async fn sslmode_disable_is_refused_by_pg_hba_and_the_error_says_so() {
    let pg = TlsPg::start(&["localhost", "127.0.0.1"]).expect("TLS cluster");
    let url = pg.url("127.0.0.1", "sslmode=disable");
    let stderr = fails(&[("DATABASE_URL", url)], &["migrate"]);
    for needle in [
        "no pg_hba.conf entry",
        "no encryption",
        "accepts only TLS connections",
        "DATABASE_URL's TLS settings: sslmode=disable",
    ] {
        assert!(stderr.contains(needle), "no {needle:?} in {stderr}");
    }
}
