//! `raptor`: see `raptor --help`.

use clap::Parser;

/// mimalloc instead of glibc's malloc: allocation was a tenth of the server's CPU samples
/// under keyed load, and the swap measured about 5 % less server CPU per keyed order
/// (BENCHMARKS.md, "Profile").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // Development convenience only: a missing .env is fine.
    let _ = dotenvy::dotenv();
    let cli = raptor_server::Cli::parse();
    raptor_server::telemetry::init(cli.config.server.log_format);
    let mut stdout = std::io::stdout();
    match raptor_server::run(cli, &mut stdout).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("raptor: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
