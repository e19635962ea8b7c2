//! The `raptor` command line, in-process, against the test's database.

use anyhow::Context;
use clap::Parser;
use raptor_server::Cli;
use serde_json::Value;
use sqlx::PgPool;

/// Runs `raptor --database-url <pool's database> <args…>`; what it printed, as JSON.
pub(crate) async fn cli(pool: &PgPool, args: &[&str]) -> anyhow::Result<Value> {
    let url = super::database_url(pool);
    let mut argv = vec!["raptor", "--database-url", url.as_str()];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv)?;
    let mut out = Vec::new();
    raptor_server::run(cli, &mut out).await?;
    serde_json::from_slice(&out)
        .with_context(|| format!("{args:?} printed {:?}", String::from_utf8_lossy(&out)))
}
