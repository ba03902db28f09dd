//! One `gres-rs health` at a time per state directory.  slurmd may start
//! a check while the previous one still runs (a slow NVML, a slurmctld
//! that does not answer), and an admin may run one by hand: two runs at
//! once would each read the cursor, and the one that saves last would put
//! back an older cursor over the newer one, so that the next run acts on
//! an XID again.  The lock is `flock(2)` on `health.lock` in the state
//! directory: the kernel drops it when the process ends, however it ends,
//! so no stale lock survives a killed run.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The lock file's name in the state directory.
pub const LOCK_FILE: &str = "health.lock";

/// How often a waiting run tries again.
const RETRY: Duration = Duration::from_millis(50);

/// The lock, held until dropped.
#[derive(Debug)]
pub struct StateLock {
    _lock: Flock<File>,
}

/// Take the state directory's lock, waiting at most `wait` for a run that
/// holds it; why not, in words, when it cannot.  The directory is made
/// (0700) when missing.
pub fn acquire(dir: &Path, wait: Duration) -> Result<StateLock, String> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| format!("cannot make the state directory {}: {e}", dir.display()))?;
    let path = dir.join(LOCK_FILE);
    let start = Instant::now();
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(StateLock { _lock: lock }),
            Err((f, Errno::EWOULDBLOCK | Errno::EINTR)) if start.elapsed() < wait => {
                file = f;
                std::thread::sleep(RETRY);
            }
            Err((_, Errno::EWOULDBLOCK)) => {
                return Err(format!(
                    "another gres-rs health holds {} (still running after {} s): this run checked nothing and changed nothing",
                    path.display(),
                    wait.as_secs()
                ))
            }
            Err((_, e)) => return Err(format!("cannot lock {}: {e}", path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_waits_then_gives_up_and_the_lock_goes_with_its_holder() {
        let d = std::env::temp_dir().join(format!("gres-rs-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let first = acquire(&d, Duration::ZERO).unwrap();
        let t = Instant::now();
        let e = acquire(&d, Duration::from_millis(200)).unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(200), "{:?}", t.elapsed());
        assert!(e.contains("another gres-rs health holds") && e.contains(LOCK_FILE), "{e}");
        drop(first);
        assert!(acquire(&d, Duration::ZERO).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
