//! Settings that fit together, through the `raptor` binary: timeouts that must end before the
//! request default to shares of the request timeout, so lowering `RAPTOR_REQUEST_TIMEOUT_SECS`
//! alone starts; explicit values that conflict with it are all listed in one error; `migrate`
//! checks none of them (it uses none).

use sqlx::PgPool;

use crate::helpers::{database_url, raptor};

/// Each explicitly set timeout that conflicts with a 2 s request timeout.
const CONFLICTING: [(&str, &str); 5] = [
    ("STRIPE_TIMEOUT_MS", "5000"),
    ("IDEMPOTENCY_STORE_TIMEOUT_MS", "2000"),
    ("RAPTOR_DB_LOCK_TIMEOUT_MS", "3000"),
    ("RAPTOR_DB_STATEMENT_TIMEOUT_MS", "2000"),
    ("IDEMPOTENCY_STALE_AFTER_SECS", "1"),
];

#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn lowering_the_request_timeout_alone_starts(pool: PgPool) {
    let env = [
        ("DATABASE_URL", database_url(&pool)),
        ("RAPTOR_REQUEST_TIMEOUT_SECS", "2".to_owned()),
    ];
    let out = raptor(&env, &["idempotency", "cleanup"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(printed["deleted"], 0);
}

/// The claim's deadline follows the request timeout like the other dependent timeouts: a
/// quarter of a 2 s request timeout, and 2 s under the default 30 s; an explicit value is kept.
#[test]
fn the_claim_deadline_follows_the_request_timeout() {
    use clap::Parser;

    let claim = |args: &[&str]| {
        let mut argv = vec!["raptor"];
        argv.extend_from_slice(args);
        argv.extend(["idempotency", "cleanup"]);
        let cli = raptor_server::Cli::try_parse_from(argv).expect("parse");
        let settings = cli.config.pool_settings().expect("pool settings");
        let idempotency = cli.config.idempotency().expect("idempotency settings");
        assert_eq!(settings.store.timeout, idempotency.store_timeout);
        idempotency.store_timeout
    };
    let url = "--database-url=postgres://postgres@127.0.0.1:5432/unused";
    assert_eq!(
        claim(&[url, "--request-timeout-secs=2"]),
        std::time::Duration::from_millis(500)
    );
    assert_eq!(
        claim(&[url, "--request-timeout-secs=30"]),
        std::time::Duration::from_millis(2000)
    );
    assert_eq!(
        claim(&[
            url,
            "--request-timeout-secs=2",
            "--idempotency-store-timeout-ms=800"
        ]),
        std::time::Duration::from_millis(800)
    );
}

#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn every_explicit_conflict_is_listed_in_one_error(pool: PgPool) {
    let mut env = vec![
        ("DATABASE_URL", database_url(&pool)),
        ("RAPTOR_REQUEST_TIMEOUT_SECS", "2".to_owned()),
    ];
    env.extend(CONFLICTING.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let out = raptor(&env, &["idempotency", "cleanup"]);
    assert!(!out.status.success(), "conflicting settings started");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("RAPTOR_REQUEST_TIMEOUT_SECS (2 s)"),
        "{stderr}"
    );
    for (name, value) in CONFLICTING {
        assert!(
            stderr.contains(&format!("{name} ({value})")),
            "{name} missing from {stderr}"
        );
    }
    assert_eq!(stderr.trim().lines().count(), 1, "one message: {stderr}");

    // `migrate` uses none of them.
    let out = raptor(&env, &["migrate"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `.env.example` names every variable of `raptor --help`, and each value it sets is the
/// variable's default (where the default is a fixed value).
#[test]
fn env_example_lists_every_variable_with_its_default() {
    use clap::CommandFactory;

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../.env.example");
    let text = std::fs::read_to_string(path).expect(".env.example");
    // `NAME=value` and commented-out `# NAME=value` lines.
    let mut listed = std::collections::HashMap::new();
    for line in text.lines() {
        let line = line.trim_start_matches('#').trim();
        if let Some((name, value)) = line.split_once('=') {
            if !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            {
                listed.insert(
                    name.to_owned(),
                    (value.to_owned(), !text.contains(&format!("\n{line}"))),
                );
            }
        }
    }
    let command = raptor_server::Cli::command();
    let mut wrong = Vec::new();
    for arg in command.get_arguments() {
        let Some(env) = arg.get_env() else { continue };
        let name = env.to_string_lossy().into_owned();
        match listed.get(&name) {
            None => wrong.push(format!("{name} is not in .env.example")),
            Some((value, commented)) => {
                let defaults: Vec<String> = arg
                    .get_default_values()
                    .iter()
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect();
                if !commented && !defaults.is_empty() && defaults.join(",") != *value {
                    wrong.push(format!(
                        "{name}={value} in .env.example, default {}",
                        defaults.join(",")
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// `raptor serve` with `env` only (and PATH; `RAPTOR_ENV` unset is production), expected to
/// refuse to start within 20 s; what it wrote to stderr.
fn serve_refuses(env: &[(&str, String)]) -> String {
    let mut env = env.to_vec();
    env.push(("RAPTOR_ADDR", "127.0.0.1:0".to_owned()));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_raptor-cli"))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RUST_LOG", "warn")
        .current_dir(std::env::temp_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start raptor serve");
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(!status.success(), "serve exited successfully");
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
                .expect("stderr");
            return stderr;
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("raptor serve started although it should have refused");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `raptor serve` refuses sessions that do not fit the service, each in one clear message:
/// a `default_transaction_isolation` other than READ COMMITTED (set on the role, the
/// database or, here, the URL), and an `IDEMPOTENCY_STORE_DATABASE_URL` that reaches another
/// database than `DATABASE_URL` (its claims would guard nothing).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn serve_refuses_sessions_that_do_not_fit(pool: PgPool) {
    let url = database_url(&pool);
    let serializable = format!("{url}?options=-c%20default_transaction_isolation%3Dserializable");
    let development = ("RAPTOR_ENV", "development".to_owned());
    let stderr = serve_refuses(&[("DATABASE_URL", serializable), development.clone()]);
    assert!(
        stderr.contains(
            "DATABASE_URL: default_transaction_isolation is serializable, want read committed"
        ),
        "{stderr}"
    );

    let options = pool.connect_options();
    let elsewhere = format!(
        "postgres://{}@{}:{}/postgres",
        options.get_username(),
        options.get_host(),
        options.get_port()
    );
    let stderr = serve_refuses(&[
        ("DATABASE_URL", url.clone()),
        ("IDEMPOTENCY_STORE_DATABASE_URL", elsewhere),
        development,
    ]);
    assert!(
        stderr.contains("IDEMPOTENCY_STORE_DATABASE_URL does not reach DATABASE_URL's database"),
        "{stderr}"
    );
    assert_eq!(
        sqlx::query_scalar::<_, i64>("select count(*) from startup_checks")
            .fetch_one(&pool)
            .await
            .expect("count"),
        0,
        "the nonce is removed"
    );
}

/// Both pools' sessions bound what a dead client host holds: an idle transaction ends just
/// above the request timeout (its row locks given back), and the server probes a silent
/// connection by TCP keepalive, instead of waiting for the kernel's two hours.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn sessions_bound_what_a_dead_host_holds(pool: PgPool) {
    let settings = raptor_db::PoolSettings {
        url: database_url(&pool),
        size: 2,
        lock_timeout: std::time::Duration::from_secs(5),
        statement_timeout: std::time::Duration::from_secs(10),
        statement_cache: 10,
        session_settings: raptor_db::SessionSettings::Connect,
        idle_in_transaction: std::time::Duration::from_secs(35),
        store: raptor_db::StoreSettings {
            url: None,
            timeout: std::time::Duration::from_secs(2),
        },
    };
    let business = raptor_db::pool::business(&settings)
        .await
        .expect("business");
    let store = raptor_db::pool::store(&settings, &business).expect("store");
    for (name, pool) in [("business", &business), ("store", &store)] {
        let (idle, keepalive, count): (String, String, String) = sqlx::query_as(
            "select current_setting('idle_in_transaction_session_timeout'),
                    current_setting('tcp_keepalives_idle'),
                    current_setting('tcp_keepalives_count')",
        )
        .fetch_one(pool)
        .await
        .expect("settings");
        assert_eq!(idle, "35s", "{name}");
        assert_eq!(keepalive, "60", "{name}");
        assert_eq!(count, "3", "{name}");
    }
    // An idle transaction past its bound is ended by the server.
    let mut conn = business.acquire().await.expect("conn");
    sqlx::query("set idle_in_transaction_session_timeout = '200ms'")
        .execute(&mut *conn)
        .await
        .expect("shorter");
    sqlx::query("begin")
        .execute(&mut *conn)
        .await
        .expect("begin");
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let after = sqlx::query("select 1").execute(&mut *conn).await;
    assert!(after.is_err(), "the idle transaction survived its bound");
    drop(conn);
    store.close().await;
    business.close().await;
}

/// `RAPTOR_ENV=production` is the default: `raptor serve` refuses to start without what a
/// deployment needs, every problem in one message, before it touches the database.
#[test]
fn production_refuses_to_start_without_what_a_deployment_needs() {
    let env = [
        (
            "DATABASE_URL",
            "postgres://nobody@127.0.0.1:1/none".to_owned(),
        ),
        ("RAPTOR_ENV", "production".to_owned()),
        ("STRIPE_SECRET_KEY", "sk_test_x".to_owned()),
    ];
    let stderr = serve_refuses(&env);
    for problem in [
        "RAPTOR_SMTP_URL is not set",
        "RAPTOR_RESPONSE_KEYS is not set",
        "RAPTOR_SESSION_KEY is not set",
        "STRIPE_SECRET_KEY is set without STRIPE_WEBHOOK_SECRET",
    ] {
        assert!(stderr.contains(problem), "{problem} missing from {stderr}");
    }
    assert_eq!(stderr.trim().lines().count(), 1, "one message: {stderr}");
    // Unset, RAPTOR_ENV is production too.
    let stderr = serve_refuses(&env[..1]);
    assert!(
        stderr.contains("RAPTOR_ENV=production (the default)"),
        "{stderr}"
    );
}

/// In production, a database URL whose TLS does not verify the server, to a host that is not
/// this machine, is warned about at start-up; loopback and `verify-ca`/`verify-full` are not.
#[test]
fn production_warns_on_unverified_tls_to_another_host() {
    use clap::Parser;
    let warnings = |environment: &str, url: &str| {
        let cli = raptor_server::Cli::try_parse_from([
            "raptor",
            "--env",
            environment,
            "--database-url",
            url,
            "serve",
        ])
        .expect("parses");
        cli.config.production_warnings()
    };
    let remote = "postgres://app@db.example.com/raptor?sslmode=require";
    let warned = warnings("production", remote);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0]
        .contains("DATABASE_URL reaches db.example.com with sslmode weaker than verify-ca"));
    assert!(warnings("development", remote).is_empty());
    assert!(warnings("production", "postgres://app@127.0.0.1/raptor").is_empty());
    assert!(warnings(
        "production",
        "postgres://app@db.example.com/raptor?sslmode=verify-full"
    )
    .is_empty());
}

/// `RAPTOR_LISTEN_DATABASE_URL` must be a Postgres URL (checked when the settings are read),
/// reaches the API's configuration without showing its password, is warned about when it is
/// weak TLS to another host, and transaction pooling without it is refused.
#[test]
fn the_listener_has_a_url_of_its_own() {
    use clap::Parser;
    let parse = |args: &[&str]| {
        let mut all = vec!["raptor", "--env", "production"];
        all.extend_from_slice(args);
        all.push("serve");
        raptor_server::Cli::try_parse_from(all)
    };
    let Err(refused) = parse(&["--listen-database-url", "postgres://app@db:port/raptor"]) else {
        panic!("a listen URL that is not a Postgres URL was accepted");
    };
    assert!(
        refused.to_string().contains("not a Postgres URL"),
        "{refused}"
    );
    let cli = parse(&[
        "--database-url",
        "postgres://app@127.0.0.1:6432/raptor",
        "--listen-database-url",
        "postgres://app:hunter2@db.example.com:5432/raptor?sslmode=require",
    ])
    .expect("parses");
    let api = cli.config.api();
    let target = format!("{:?}", api.trade_streams_listen.expect("a listen target"));
    assert_eq!(target, "ListenTarget(db.example.com:5432/raptor)");
    let warned = cli.config.production_warnings();
    assert!(
        warned
            .iter()
            .any(|w| w.contains("RAPTOR_LISTEN_DATABASE_URL reaches db.example.com")),
        "{warned:?}"
    );
    let pooled = |listen: Option<&str>| {
        let mut args = vec![
            "--database-url",
            "postgres://app@127.0.0.1:6432/raptor",
            "--db-pool-mode",
            "transaction",
            "--db-session-settings",
            "role",
            "--idempotency-store-database-url",
            "postgres://idem@127.0.0.1:6432/raptor",
        ];
        if let Some(listen) = listen {
            args.extend(["--listen-database-url", listen]);
        }
        parse(&args).expect("parses").config.validate()
    };
    let refused = pooled(None).expect_err("transaction pooling without the listener's URL");
    assert!(
        refused
            .to_string()
            .contains("RAPTOR_DB_POOL_MODE=transaction needs RAPTOR_LISTEN_DATABASE_URL"),
        "{refused}"
    );
    pooled(Some("postgres://app@127.0.0.1:5432/raptor")).expect("with it");
}

/// The bounds on open trade-updates streams come from `RAPTOR_TRADE_STREAMS_PER_USER` and
/// `RAPTOR_TRADE_STREAMS_PER_PROCESS` (5 and 1,000 by default); a bound of 0 is refused.
#[test]
fn trade_stream_bounds_are_settings() {
    use clap::Parser;
    let parse = |extra: &[&str]| {
        let mut argv = vec![
            "raptor",
            "--database-url",
            "postgres://app@127.0.0.1/raptor",
        ];
        argv.extend_from_slice(extra);
        argv.push("serve");
        raptor_server::Cli::try_parse_from(argv)
    };
    let defaults = parse(&[]).expect("parses").config.api().trade_streams;
    assert_eq!((defaults.per_user, defaults.per_process), (5, 1000));
    let set = parse(&[
        "--trade-streams-per-user",
        "2",
        "--trade-streams-per-process",
        "50",
    ])
    .expect("parses")
    .config
    .api()
    .trade_streams;
    assert_eq!((set.per_user, set.per_process), (2, 50));
    assert!(parse(&["--trade-streams-per-user", "0"]).is_err());
}
