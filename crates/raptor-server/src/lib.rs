#![doc = include_str!("../README.md")]

mod cli;
pub mod config;
mod db_spans;
mod edge;
mod http;
mod jobs;
mod serve;
pub mod telemetry;

use clap::Parser;

pub use cli::{
    run, Cli, Command, GdprCommand, IdempotencyCommand, MailCommand, OrdersCommand, QuotesCommand,
    ServiceTokensCommand, UsersCommand,
};
pub use config::{Config, PoolMode, RaptorEnv};
pub use http::{
    drain_on, serve, serve_state, serve_state_with, serve_with, shutdown_signal, Edge,
    BACKGROUND_DRAIN, MAX_HEADER_BYTES,
};
pub use jobs::{spawn_cleanup, spawn_mail_relay, spawn_order_expiry, spawn_quote_sweeper};

/// The commit this binary was built from (`build.rs`: `RAPTOR_GIT_SHA` at build time, `git
/// rev-parse`, or `unknown`), in `raptor_build_info{git_sha}`.
pub const GIT_SHA: &str = env!("RAPTOR_GIT_SHA");

/// The version this binary reports (`build.rs`: `RAPTOR_VERSION` at build time, the release's
/// tag, else the crate's version), in `raptor_build_info{version}`, `raptor --version` and the
/// traces' `service.version`.
pub const VERSION: &str = env!("RAPTOR_VERSION");

/// The `raptor` binary's whole `main`: reads `.env` (development), parses the command line,
/// starts telemetry and runs the command (the tests' copy of the binary runs this too).
pub async fn main() -> std::process::ExitCode {
    // Development convenience only: a missing .env is fine.
    let _ = dotenvy::dotenv();
    let cli = Cli::parse();
    // Only `serve` exports traces; the one-shot commands log.
    let traces = matches!(cli.command, Command::Serve).then_some(&cli.config.traces);
    let telemetry = match telemetry::init(cli.config.server.log_format, traces) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("raptor: {err:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout();
    let result = run(cli, &mut stdout).await;
    // The end of the graceful shutdown: the spans still queued are exported.
    telemetry.shutdown().await;
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("raptor: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
