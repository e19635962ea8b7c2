//! Integration tests live in `api/`. This library holds what the two drivers that run release
//! `raptor` processes (`make bench` in `bench/`, `make chaos` in `chaos/`) share, and the
//! server-sent events parser the API tests use too.

pub mod pg;
pub mod sse;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// The order route, and a market order for one share the drivers send to it.
pub const ORDERS: &str = "/api/trading/orders";
/// See [`ORDERS`].
pub const ORDER_BODY: &str =
    r#"{"symbol":"AAPL","qty":"1","side":"buy","type":"market","time_in_force":"day"}"#;

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// `CARGO_TARGET_DIR`, or the workspace's `target/`.
pub fn target_dir() -> anyhow::Result<PathBuf> {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the tests package has no parent directory")?
            .join("target")),
    }
}

/// The release `raptor` binary; `built_by` names the make target that builds it.
pub fn raptor_binary(built_by: &str) -> anyhow::Result<PathBuf> {
    let binary = target_dir()?.join("release/raptor");
    if !binary.exists() {
        bail!(
            "{} is missing: `{built_by}` builds it (cargo build --release -p raptor-server --bin raptor)",
            binary.display()
        );
    }
    Ok(binary)
}

/// A fresh Idempotency-Key.
pub fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}
