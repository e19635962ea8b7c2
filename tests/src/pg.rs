//! Throwaway PostgreSQL clusters of the tests and the chaos driver: the server binaries, and
//! running their tools as `postgres` when the process is root (initdb and postgres refuse root).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{bail, Context};

/// Is this process root?
pub fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

/// Runs a PostgreSQL tool, as `postgres` via runuser when root (initdb and postgres refuse root).
pub fn pg_tool(bindir: &Path, tool: &str, args: &[&str]) -> anyhow::Result<std::process::Output> {
    let program = bindir.join(tool);
    let mut command = if is_root() {
        let mut c = std::process::Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&program);
        c
    } else {
        std::process::Command::new(&program)
    };
    let output = command
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not run {tool}"))?;
    Ok(output)
}

pub fn chown_postgres(path: &Path) -> anyhow::Result<()> {
    if is_root() {
        let status = std::process::Command::new("chown")
            .args(["-R", "postgres"])
            .arg(path)
            .status()?;
        if !status.success() {
            bail!("chown postgres {} failed", path.display());
        }
    }
    Ok(())
}

/// The newest PostgreSQL's server binaries (`/usr/lib/postgresql/<major>/bin`).
pub fn pg_bindir() -> anyhow::Result<PathBuf> {
    std::fs::read_dir("/usr/lib/postgresql")
        .context("no /usr/lib/postgresql (scripts/db.sh installs postgresql with apt-get)")?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("bin/initdb").exists())
        // The newest major version, compared as a number (as `sort -V` does in db.sh).
        .max_by_key(|e| {
            e.file_name()
                .to_string_lossy()
                .parse::<f64>()
                .unwrap_or(0.0) as u64
        })
        .map(|e| e.path().join("bin"))
        .context("no PostgreSQL binaries under /usr/lib/postgresql/*/bin")
}

/// `initdb` of a throwaway cluster in `data`: superuser `postgres`, trust authentication, UTF8.
pub fn initdb(bindir: &Path, data: &Path) -> anyhow::Result<()> {
    let data = data.to_string_lossy();
    let out = pg_tool(
        bindir,
        "initdb",
        &["-D", &data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
    )?;
    if !out.status.success() {
        bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}
