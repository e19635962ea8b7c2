//! What the binary is, for `raptor_build_info{version, git_sha}` and `raptor --version`:
//! - the commit: `RAPTOR_GIT_SHA` when set at build time (a container build has no `.git`), else
//!   `git rev-parse --short=12 HEAD`, else `unknown`;
//! - the version: `RAPTOR_VERSION` when set at build time (the release's tag, passed by the
//!   image's build), else the crate's version.
//!
//! Reruns only when the checked-out commit (or one of those variables) changes.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Watches `file` for the next build. Only a file that exists: Cargo counts a missing one as
/// changed, so watching `packed-refs` in a clone that has none reran this script, and rebuilt the
/// binary, on every build. A ref that moves into `packed-refs` (`git gc`) deletes its own file,
/// which is watched, so the packed file is found on that rerun.
fn watch(file: &str) {
    if std::path::Path::new(file).exists() {
        println!("cargo:rerun-if-changed={file}");
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=RAPTOR_GIT_SHA");
    let from_env = std::env::var("RAPTOR_GIT_SHA")
        .ok()
        .map(|sha| sha.trim().to_owned())
        .filter(|sha| !sha.is_empty());
    let sha = from_env.or_else(|| {
        // HEAD, the branch it names, and packed refs: what moves when a commit is made.
        for path in ["HEAD", "packed-refs"] {
            if let Some(file) = git(&["rev-parse", "--git-path", path]) {
                watch(&file);
            }
        }
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            if let Some(file) = git(&["rev-parse", "--git-path", &branch]) {
                watch(&file);
            }
        }
        git(&["rev-parse", "--short=12", "HEAD"])
    });
    let sha: String = sha
        .unwrap_or_else(|| "unknown".to_owned())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(40)
        .collect();
    println!("cargo:rustc-env=RAPTOR_GIT_SHA={sha}");

    println!("cargo:rerun-if-env-changed=RAPTOR_VERSION");
    let version: String = std::env::var("RAPTOR_VERSION")
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'))
        .take(64)
        .collect();
    println!("cargo:rustc-env=RAPTOR_VERSION={version}");
}
