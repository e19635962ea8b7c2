//! The `raptor` command line: in-process against the test's database ([`cli`]), or the
//! binary as a process with an environment of the test's ([`raptor`]).

use anyhow::Context;
use clap::Parser;
use raptor_server::Cli;
use serde_json::Value;
use sqlx::PgPool;

/// Runs `raptor --database-url <pool's database> <args…>`; what it printed, as JSON.
pub(crate) async fn cli(pool: &PgPool, args: &[&str]) -> anyhow::Result<Value> {
    let url = super::database_url(pool);
    // A developer's environment unless a test says otherwise (RAPTOR_ENV).
    let mut argv = vec![
        "raptor",
        "--env",
        "development",
        "--database-url",
        url.as_str(),
    ];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv)?;
    let mut out = Vec::new();
    raptor_server::run(cli, &mut out).await?;
    serde_json::from_slice(&out)
        .with_context(|| format!("{args:?} printed {:?}", String::from_utf8_lossy(&out)))
}

/// `raptor <args>` as a process with `env` only (and PATH, and `RAPTOR_ENV=development` and
/// `RUST_LOG=warn` unless `env` sets them), in the temp directory (no `.env` of the checkout is read).
pub(crate) fn raptor(env: &[(&str, String)], args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_raptor-cli"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RAPTOR_ENV", "development")
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(std::env::temp_dir())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run raptor")
}

/// `raptor <args>` as a process ([`raptor`]) that must succeed; what it printed, as JSON.
pub(crate) fn raptor_ok(env: &[(&str, String)], args: &[&str]) -> Value {
    let out = raptor(env, args);
    assert!(
        out.status.success(),
        "raptor {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// A keyed market order (`ORDER_BODY`) by `token` with `key`, over HTTP to `base` — the call of
/// the tests that drive a `raptor serve` process.
pub(crate) async fn post_keyed_order(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    key: &str,
) -> reqwest::Response {
    client
        .post(format!("{base}{}", raptor_integration_tests::ORDERS))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(raptor_integration_tests::ORDER_BODY)
        .send()
        .await
        .expect("order")
}
