//! Small filesystem / system helpers (std only).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static DIR_SEQ: AtomicUsize = AtomicUsize::new(0);

/// A directory of one test, `<temp dir>/<name>` (name it with the test
/// process id), emptied when made and removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(name);
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap_or_else(|e| panic!("creating {}: {e}", d.display()));
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Creates a fresh, unique, mode-0755 directory for one cluster.
/// Base: `$GRES_RS_TMPDIR` or `/tmp` (kept short: unix socket paths of
/// slurmstepd live below it and are limited to 107 bytes).
pub fn make_unique_dir(prefix: &str) -> io::Result<PathBuf> {
    let base = std::env::var_os("GRES_RS_TMPDIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp"));
    fs::create_dir_all(&base)?;
    sweep_stale_dirs(&base, prefix);
    for _ in 0..1000 {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let seq = DIR_SEQ.fetch_add(1, Ordering::SeqCst);
        let p = base.join(format!("{prefix}-{}-{seq}-{:04x}", std::process::id(), nanos & 0xffff));
        match fs::create_dir(&p) {
            Ok(()) => {
                fs::set_permissions(&p, fs::Permissions::from_mode(0o755))?;
                fs::write(p.join(IN_USE_MARKER), std::process::id().to_string())?;
                return Ok(p);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("could not create a unique temp dir"))
}

/// Name of the marker file that says "a live harness owns this dir".
pub const IN_USE_MARKER: &str = ".gres-rs-in-use";

/// Removes `<base>/<prefix>-<pid>-...` dirs left behind by harness
/// processes that were killed (marker still present, pid gone). Dirs kept
/// on purpose (GRES_RS_KEEP=1) have no marker and are left alone.
fn sweep_stale_dirs(base: &Path, prefix: &str) {
    let Ok(rd) = fs::read_dir(base) else { return };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&format!("{prefix}-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let path = e.path();
        if !path.join(IN_USE_MARKER).exists() || super::process::pid_alive(pid) {
            continue;
        }
        if super::process::pids_using_dir(&path).is_empty() {
            eprintln!("harness: removing stale dir {} (its process {pid} is gone)", path.display());
            let _ = fs::remove_dir_all(&path);
        }
    }
}

/// Writes `contents` to `path` with `mode`.
pub fn write_file(path: &Path, contents: &str, mode: u32) -> io::Result<()> {
    let _ = fs::remove_file(path);
    let mut f = OpenOptions::new().write(true).create_new(true).mode(mode).open(path)?;
    f.write_all(contents.as_bytes())?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

/// Copies `src` into `dest` atomically (see [`write_atomic`]).
pub fn install_atomic(src: &Path, dest: &Path, mode: u32) -> io::Result<()> {
    write_atomic(&fs::read(src)?, dest, mode)
}

/// Writes `bytes` into `dest` atomically: a temp file in the same
/// directory, then rename(2). Never overwrites a file in place (a running
/// daemon may have it mapped).
pub fn write_atomic(bytes: &[u8], dest: &Path, mode: u32) -> io::Result<()> {
    let dir = dest.parent().ok_or_else(|| io::Error::other("dest has no parent"))?;
    let name = dest.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}.tmp.{}.{}", std::process::id(), DIR_SEQ.fetch_add(1, Ordering::SeqCst)));
    let res = (|| {
        fs::write(&tmp, bytes)?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(mode))?;
        File::open(&tmp)?.sync_all()?;
        fs::rename(&tmp, dest)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// A TCP port that is currently free on all interfaces (slurmd binds
/// 0.0.0.0). There is an unavoidable race until the daemon binds it; the
/// cluster start retries on "Address already in use".
pub fn free_port(avoid: &[u16]) -> io::Result<u16> {
    for _ in 0..50 {
        let l = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        let p = l.local_addr()?.port();
        if !avoid.contains(&p) {
            return Ok(p);
        }
    }
    Err(io::Error::other("no free port"))
}

/// (uid, gid) of a local user from /etc/passwd.
pub fn user_ids(name: &str) -> Option<(u32, u32)> {
    user_ids_in(Path::new("/etc/passwd"), name)
}

/// (uid, gid) of user `name` in the passwd file `passwd`.
pub fn user_ids_in(passwd: &Path, name: &str) -> Option<(u32, u32)> {
    let pw = fs::read_to_string(passwd).ok()?;
    pw.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        if f.len() >= 4 && f[0] == name {
            Some((f[2].parse().ok()?, f[3].parse().ok()?))
        } else {
            None
        }
    })
}

/// Effective uid of this process (from /proc/self/status).
pub fn euid() -> Option<u32> {
    let st = fs::read_to_string("/proc/self/status").ok()?;
    st.lines().find(|l| l.starts_with("Uid:"))?.split_whitespace().nth(2)?.parse().ok()
}

/// Short host name (up to the first '.'), as slurmctld compares it.
pub fn short_hostname() -> String {
    let h = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "localhost".into());
    h.trim().split('.').next().unwrap_or("localhost").to_string()
}

/// `n` random bytes from /dev/urandom (what `dd if=/dev/urandom` would do).
pub fn random_bytes(n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

/// Creates `n` fake NVIDIA GPU device nodes `<dir>/nvidia<i>` as character
/// devices (major 195, minor i) with mknod(1). Slurm rejects regular files.
pub fn make_fake_gpu_nodes(dir: &Path, n: u32) -> io::Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)?;
    let mut v = Vec::new();
    for i in 0..n {
        let p = dir.join(format!("nvidia{i}"));
        if !p.exists() {
            let st = Command::new(super::tool("mknod")).arg("-m").arg("0666").arg(&p).arg("c").arg("195").arg(i.to_string()).status()?;
            if !st.success() {
                return Err(io::Error::other(format!("mknod {} failed: {st}", p.display())));
            }
        }
        v.push(p);
    }
    Ok(v)
}

/// Last `n` lines of a text file ("" if unreadable).
pub fn tail(path: &Path, n: usize) -> String {
    let s = fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].join("\n")
}

/// First `n` lines of a text file ("" if unreadable).
pub fn head(path: &Path, n: usize) -> String {
    let s = fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    s.lines().take(n).collect::<Vec<_>>().join("\n")
}

/// Reads a text file lossily ("" if unreadable).
pub fn read_lossy(path: &Path) -> String {
    fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}
