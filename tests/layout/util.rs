//! Small helpers: paths, root and CI, and the scratch directory.

use std::fs;
use std::path::{Path, PathBuf};

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn s(p: &Path) -> String {
    p.to_str().expect("non-UTF-8 path").to_string()
}

pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| st.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0")))
        .unwrap_or(false)
}

pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
}

/// Prints a skip notice, or fails when `CI=true`.
pub fn skip_or_fail(why: &str) {
    if ci() {
        panic!("{why} (CI=true: not skipping)");
    }
    println!("layout: SKIP: {why}");
}

/// A scratch directory removed on drop unless `keep()` was called (or
/// GRES_RS_LAYOUT_KEEP is set).
pub struct TempDir {
    pub path: PathBuf,
    pub keep: std::cell::Cell<bool>,
}

impl TempDir {
    pub fn new(prefix: &str) -> Self {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&path).unwrap();
        let keep = std::env::var_os("GRES_RS_LAYOUT_KEEP").is_some_and(|v| !v.is_empty() && v != "0");
        if keep {
            println!("layout: keeping generated files in {}", path.display());
        }
        TempDir { path, keep: keep.into() }
    }

    pub fn keep(&self) {
        self.keep.set(true);
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !self.keep.get() {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}
