//! `raptor` itself ([`raptor_server::main`]), built by `cargo test` for the tests that start
//! the server as a process.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    raptor_server::main().await
}
