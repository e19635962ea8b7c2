//! `raptor`: see `raptor --help`.

/// mimalloc instead of glibc's malloc: allocation was a tenth of the server's CPU samples
/// under keyed load, and the swap measured about 5 % less server CPU per keyed order
/// (docs/benchmarks/history.md, "Profile").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    raptor_server::main().await
}
