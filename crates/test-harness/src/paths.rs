//! Where the workspace and cargo's build output lie: the workspace root,
//! the target directory, and our built library in it.

use crate::{BUILT_LIBRARY_FILE, LIBRARY_FILE};
use std::path::{Path, PathBuf};

/// Finds the directory holding our built `libgres_rs.so` (the code of all
/// our plugins; the plugin files themselves are built into this crate):
/// `$GRES_RS_PLUGIN_DIR`, else `$CARGO_TARGET_DIR` (or
/// `<workspace>/target`) `/debug` or `/release` (the one matching this
/// build's profile first).
pub fn locate_our_library() -> Result<PathBuf, String> {
    if let Some(d) = std::env::var_os("GRES_RS_PLUGIN_DIR") {
        let d = PathBuf::from(d);
        return if library_in(&d).is_file() {
            Ok(d)
        } else {
            Err(format!("GRES_RS_PLUGIN_DIR={} lacks {LIBRARY_FILE}; run `cargo build --workspace` first", d.display()))
        };
    }
    let target = target_dir();
    // This crate is built in the profile of the test, benchmark or example
    // that links it (cargo builds a target's dependencies in its profile,
    // and Cargo.toml overrides no package's debug-assertions), so this is
    // the caller's profile: debug for tests, release for `cargo bench`.
    let profiles = if cfg!(debug_assertions) { ["debug", "release"] } else { ["release", "debug"] };
    let tried: Vec<PathBuf> = profiles.iter().map(|p| target.join(p)).collect();
    tried.iter().find(|d| d.join(BUILT_LIBRARY_FILE).is_file()).cloned().ok_or_else(|| {
        let looked: Vec<String> = tried.iter().map(|d| d.display().to_string()).collect();
        format!("{BUILT_LIBRARY_FILE} is not built; run `cargo build --workspace` first (or set GRES_RS_PLUGIN_DIR). Looked in: {}", looked.join("; "))
    })
}

/// Our library in `dir`: [`LIBRARY_FILE`] where the directory is laid out
/// as installed (a plugin directory, [`build_for_release`](crate::build_for_release)'s), else
/// [`BUILT_LIBRARY_FILE`], the name cargo gives it in a target directory.
pub fn library_in(dir: &Path) -> PathBuf {
    let installed = dir.join(LIBRARY_FILE);
    if installed.is_file() {
        installed
    } else {
        dir.join(BUILT_LIBRARY_FILE)
    }
}

/// The workspace's root directory (the slurm-gpu-gres checkout: `tests/`,
/// `examples/`, `Cargo.toml` of the workspace), two levels above this
/// crate's `crates/test-harness`.
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_else(|| manifest.join("../.."))
}

/// cargo's target directory: `$CARGO_TARGET_DIR` (relative: to the
/// workspace root), else `<workspace>/target`.
pub fn target_dir() -> PathBuf {
    let root = workspace_root();
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) if Path::new(&t).is_absolute() => PathBuf::from(t),
        Some(t) => root.join(t),
        None => root.join("target"),
    }
}

/// A directory for the test processes' own files: `<target>/tmp`, what
/// cargo gives integration tests and benchmarks as `CARGO_TARGET_TMPDIR`
/// (which a library crate such as this one does not get).
pub fn target_tmp_dir() -> PathBuf {
    target_dir().join("tmp")
}
