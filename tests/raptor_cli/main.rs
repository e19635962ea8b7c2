//! `raptor` for the integration tests that run it as a process: the same entry point as
//! `crates/raptor-server`'s binary, built with the tests (`CARGO_BIN_EXE_raptor-cli`).

#[tokio::main]
async fn main() -> std::process::ExitCode {
    raptor_server::main().await
}
