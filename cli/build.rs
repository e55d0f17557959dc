//! Records what the benchmark's run_info.txt reports about the build: the
//! compiler version and the versions of the peer crates, from Cargo.lock.

use std::path::Path;
use std::process::Command;

#[path = "src/bench/commit.rs"]
mod commit;

/// Peer and runtime crates whose versions affect the figures.
const CRATES: &[&str] = &["hashbrown", "dashmap", "rayon"];

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=GPUHASH_BENCH_RUSTC={}", version.trim());

    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let lock_path = Path::new(&manifest).join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    println!("cargo:rerun-if-changed=build.rs");
    built_from(Path::new(&manifest));
    let lock = std::fs::read_to_string(&lock_path).unwrap_or_default();
    let deps: Vec<String> = CRATES.iter().map(|c| format!("{c} {}", locked_version(&lock, c))).collect();
    println!("cargo:rustc-env=GPUHASH_BENCH_DEPS={}", deps.join(", "));
}

/// The version of `name` that gpuhash-cli depends on, per Cargo.lock.
fn locked_version(lock: &str, name: &str) -> String {
    // Packages are `[[package]]` blocks of `key = value` lines; a dependency
    // is written "name" when one version is locked, "name version" otherwise.
    let blocks: Vec<&str> = lock.split("[[package]]").collect();
    let field = |block: &str, key: &str| -> Option<String> {
        block.lines().find_map(|l| l.strip_prefix(&format!("{key} = \""))).map(|v| v.trim_end_matches('"').to_string())
    };
    let cli = blocks.iter().find(|b| field(b, "name").as_deref() == Some("gpuhash-cli"));
    let pinned = cli.and_then(|b| {
        b.lines().map(|l| l.trim().trim_matches(|c| c == '"' || c == ',')).find_map(|d| {
            let mut parts = d.split(' ');
            (parts.next() == Some(name)).then(|| parts.next().map(str::to_string)).flatten()
        })
    });
    pinned
        .or_else(|| blocks.iter().find(|b| field(b, "name").as_deref() == Some(name)).and_then(|b| field(b, "version")))
        .unwrap_or_else(|| "unknown".into())
}

/// The commit the binary is built from, with a mark when the sources had
/// changes not committed: run_info reports it next to the commit of the
/// checkout a run starts in, which may be another (a binary copied to a
/// GPU machine). Reruns when the sources or the checked-out commit change.
fn built_from(manifest: &Path) {
    let git = |args: &[&str]| -> Option<String> {
        let o = Command::new("git").args(args).current_dir(manifest).output().ok()?;
        o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = commit::describe(git).unwrap_or_else(|| "unknown (not built in a git checkout)".into());
    println!("cargo:rustc-env=GPUHASH_BENCH_BUILT_FROM={commit}");
    for dir in ["src", "../src", "../kernels"] {
        println!("cargo:rerun-if-changed={}", manifest.join(dir).display());
    }
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        println!("cargo:rerun-if-changed={git_dir}/index");
    }
}
