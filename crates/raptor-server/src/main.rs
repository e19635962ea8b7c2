//! `raptor`: see `raptor --help`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    raptor_server::main().await
}
