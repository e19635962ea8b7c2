//! The commit the binary is built from, for `raptor_build_info{git_sha}`: `RAPTOR_GIT_SHA` when
//! set at build time (a container build has no `.git`), else `git rev-parse --short=12 HEAD`,
//! else `unknown`. Reruns only when the checked-out commit (or that variable) changes.

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
}
