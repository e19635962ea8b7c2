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
