//! Where the system tools are: a program found on PATH or in the sbin
//! directories.

use std::path::PathBuf;

/// Absolute path of a system tool, searching PATH and the sbin dirs (cargo
/// may run tests with a PATH lacking /usr/sbin). Falls back to the bare name.
pub fn tool(name: &str) -> PathBuf {
    find_tool(name).unwrap_or_else(|| PathBuf::from(name))
}

pub(crate) fn find_tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    for d in ["/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin"] {
        dirs.push(PathBuf::from(d));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}
