//! What a test-bed chroot holds, to check that a test left it unchanged.

use std::path::{Path, PathBuf};

/// What a test-bed chroot holds: its dpkg status file, and each file and
/// symbolic link (path, kind, size, modification time, link target).
/// Directories and empty files are left out: the harness makes those as
/// mount points for binds in the chroot (empty, and kept), and other tests
/// running at the same time may add them.
pub struct ChrootSnapshot {
    status: Vec<u8>,
    pub files: std::collections::BTreeMap<PathBuf, String>,
}

impl ChrootSnapshot {
    pub fn take(root: &Path) -> ChrootSnapshot {
        use std::os::unix::fs::MetadataExt;
        let status = std::fs::read(root.join("var/lib/dpkg/status")).expect("the chroot's dpkg status");
        let mut files = std::collections::BTreeMap::new();
        let mut todo = vec![root.to_path_buf()];
        while let Some(d) = todo.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                let Ok(md) = std::fs::symlink_metadata(&p) else { continue };
                let rel = p.strip_prefix(root).unwrap_or(&p).to_path_buf();
                if md.is_dir() {
                    todo.push(p);
                } else if md.file_type().is_symlink() {
                    files.insert(rel, format!("link {}", std::fs::read_link(&p).map(|t| t.display().to_string()).unwrap_or_default()));
                } else if md.len() > 0 {
                    files.insert(rel, format!("{:o} {} {}.{}", md.mode(), md.len(), md.mtime(), md.mtime_nsec()));
                }
            }
        }
        ChrootSnapshot { status, files }
    }

    pub fn assert_same(&self, after: &ChrootSnapshot) {
        assert!(self.status == after.status, "the chroot's dpkg status file changed");
        let changed: Vec<String> = self
            .files
            .iter()
            .filter(|(p, v)| after.files.get(*p) != Some(v))
            .map(|(p, v)| format!("- {} {v} (now {:?})", p.display(), after.files.get(p)))
            .chain(after.files.iter().filter(|(p, _)| !self.files.contains_key(*p)).map(|(p, v)| format!("+ {} {v}", p.display())))
            .collect();
        assert!(changed.is_empty(), "the chroot changed ({} files):\n{}", changed.len(), changed.iter().take(40).cloned().collect::<Vec<_>>().join("\n"));
    }
}

/// Every path (files, links, directories) under `dir`, relative to it.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(p.clone());
            }
            v.push(p.strip_prefix(dir).unwrap_or(&p).to_path_buf());
        }
    }
    v.sort();
    v
}
