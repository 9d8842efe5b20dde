//! What the build tells the binary, and when to build again:
//!
//! - the embedded component library: rebuild when it changes, including files added to it
//!   (`include_dir!` alone only notices edits to files that were already there);
//! - `MLKUBE_GIT_COMMIT`: the commit the source is (`git rev-parse HEAD`), or `unknown` when the
//!   source is not a git checkout of its own (a source tarball, an image build without `.git`,
//!   no git installed); rebuilt when HEAD moves;
//! - `MLKUBE_RUSTC_VERSION`: the compiler's version.
//!
//! Both feed the operator's `mlkube_build_info` metric.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    for dir in ["components", "crds", "environments"] {
        println!("cargo:rerun-if-changed={dir}");
    }
    let source = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let commit = if is_own_checkout(&source) {
        watch_head(&source);
        git(&source, &["rev-parse", "HEAD"]).filter(|sha| is_commit(sha))
    } else {
        None
    };
    println!(
        "cargo:rustc-env=MLKUBE_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let version = output(Command::new(rustc).arg("--version"));
    println!(
        "cargo:rustc-env=MLKUBE_RUSTC_VERSION={}",
        version
            .as_deref()
            .map_or("unknown", |v| v.trim_start_matches("rustc "))
    );
}

/// Whether `source` is the top of a git work tree: not a directory without git, and not a
/// tarball unpacked inside some other repository, whose commit says nothing about this source.
fn is_own_checkout(source: &Path) -> bool {
    let Some(top) = git(source, &["rev-parse", "--show-toplevel"]) else {
        return false;
    };
    match (Path::new(&top).canonicalize(), source.canonicalize()) {
        (Ok(top), Ok(source)) => top == source,
        _ => false,
    }
}

/// Build again when HEAD moves: HEAD itself (another branch checked out, a detached commit)
/// and the ref it points at, loose or packed (a new commit on the branch). In a linked work
/// tree these live in different directories, so git names each path.
fn watch_head(source: &Path) {
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(source, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        let Some(path) = git(source, &["rev-parse", "--git-path", &name]) else {
            continue;
        };
        let path = source.join(path);
        // A path that does not exist would make cargo run this script on every build.
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    output(Command::new("git").arg("-C").arg(dir).args(args))
}

/// What a command printed, trimmed, when it ran and succeeded.
fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

fn is_commit(sha: &str) -> bool {
    matches!(sha.len(), 40 | 64) && sha.bytes().all(|b| b.is_ascii_hexdigit())
}
