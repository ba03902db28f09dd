//! Files the health check replaces whole: a reader (the next run,
//! node_exporter's textfile collector) sees the old file or the new one,
//! never a part.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Write `bytes` to `path` so that a reader sees the old file or the new
/// one, never a part: a hidden temporary file beside it (`.<name>.tmp.<pid>`,
/// no reader's pattern matches it), synced, renamed over it, and the
/// directory synced; the temporary file is removed on failure.  The
/// temporary file is made new (`O_EXCL`): whatever stands at its name (a
/// stale one of an earlier process with this pid, or a link a local user
/// planted in a directory others may write) is removed first, never
/// followed or written through.  Every file the health check writes goes
/// through it (the state file, the NVLinks seen up, node_exporter's
/// textfile).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let result = (|| {
        let mut f = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn temp_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gres-health-atomic-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_file() {
        let d = temp_dir("replace");
        let path = d.join("metrics.prom");
        fs::write(&path, "old\n").unwrap();
        write_atomically(&path, b"new\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
        assert_eq!(fs::read_dir(&d).unwrap().count(), 1);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_link_at_the_temporary_name_is_not_written_through() {
        let d = temp_dir("link");
        let victim = d.join("victim");
        fs::write(&victim, "keep\n").unwrap();
        let path = d.join("metrics.prom");
        symlink(&victim, d.join(format!(".metrics.prom.tmp.{}", std::process::id()))).unwrap();
        write_atomically(&path, b"new\n").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep\n");
        assert_eq!(fs::read_to_string(&path).unwrap(), "new\n");
        assert!(fs::symlink_metadata(&path).unwrap().file_type().is_file());
        let _ = fs::remove_dir_all(&d);
    }
}
