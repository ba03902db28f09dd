//! Other Slurm releases for the test bed: Debian chroots built by
//! `tests/testbed/debian-chroot.sh <suite>` under
//! `$GRES_RS_CHROOT_DIR` (default `/var/cache/slurm-gpu-gres/chroot`), and
//! commands run inside them.
//!
//! A command made by [`Chroot::command`] runs as
//! `unshare --mount --propagation private` + a few mounts + `chroot(8)`:
//! the mounts (`/proc`, `/sys` with `/sys/fs/cgroup`, `/dev`, a tmpfs on
//! `/tmp` and `/run`, the host's `/etc/hosts` and `/etc/resolv.conf`, and
//! the caller's directories at the same paths) live only in that process's
//! own mount namespace and vanish when its last process exits.  Every
//! `exec` keeps the PID (`unshare` without `--fork`, `sh -c 'exec ...'`,
//! `chroot`), and the PID namespace is the host's, so the child's PID is
//! the PID of the program inside: stopping by PID works as on the host.
//!
//! ```ignore
//! use gres_test_harness::{chroot, ClusterConfig, Cluster, PluginSet};
//! for rel in chroot::RELEASES {
//!     let Some(root) = rel.chroot() else { continue };   // host or not built
//!     let out = root.command("/usr/sbin/slurmd", &[]).arg("-V").output().unwrap();
//!     let c = Cluster::start(ClusterConfig::gpus(PluginSet::Stock, 2).in_chroot(root));
//! }
//! ```

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

thread_local! {
    /// The chroot of the release the calling thread's per-release test
    /// runs on (set by [`testbed::run_test`](crate::testbed::run_test)).
    static CURRENT: std::cell::RefCell<Option<Chroot>> = const { std::cell::RefCell::new(None) };
}

/// The chroot the calling thread's per-release test runs in (`None`: the
/// host's Slurm, or outside one): [`ClusterConfig::gpus`](crate::ClusterConfig::gpus) puts its
/// configs in it.
pub fn current() -> Option<Chroot> {
    CURRENT.with(|c| c.borrow().clone())
}

pub(crate) fn set_current(root: Option<Chroot>) {
    CURRENT.with(|c| *c.borrow_mut() = root);
}

/// Where `tests/testbed/debian-chroot.sh` puts its chroots (override:
/// `GRES_RS_CHROOT_DIR`).
pub fn chroot_base() -> PathBuf {
    std::env::var_os("GRES_RS_CHROOT_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/var/cache/slurm-gpu-gres/chroot"))
}

/// The file `debian-chroot.sh` writes last (package versions); a chroot
/// directory without it is unfinished and never used.
pub const STAMP: &str = ".gres-rs-chroot-stamp";

/// Where a release of the test bed comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The host's own Debian packages (no chroot).
    Host,
    /// A Debian chroot of that suite's packages (`debian-chroot.sh <suite>`).
    Debian,
    /// A chroot with the release built from SchedMD's source tarball
    /// (`tests/testbed/slurm-source.sh <series>`).
    Source,
}

/// One release of the test bed and the Slurm it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// The chroot's name under [`chroot_base`]: the Debian suite
    /// (`bookworm` for the host, `trixie`, `sid`), or `source-<series>`.
    pub suite: &'static str,
    /// e.g. "Debian 13", or "Debian 12 build base" for a source build.
    pub debian: &'static str,
    /// The Slurm version it holds (what the chroot is expected to hold;
    /// [`Chroot::slurm_version`] reads the real one).
    pub slurm: &'static str,
    /// True for the release of the host itself (no chroot).
    pub host: bool,
    pub origin: Origin,
}

/// The Debian test-bed releases: 22.05.8 on the host itself (Debian 12),
/// 24.11.5 in a trixie chroot, 26.05.5 in a sid chroot.
pub const RELEASES: [Release; 3] = [
    Release { suite: "bookworm", debian: "Debian 12", slurm: "22.05.8", host: true, origin: Origin::Host },
    Release { suite: "trixie", debian: "Debian 13", slurm: "24.11.5", host: false, origin: Origin::Debian },
    Release { suite: "sid", debian: "Debian unstable", slurm: "26.05.5", host: false, origin: Origin::Debian },
];

/// The releases Debian does not ship, each built from the tarball of
/// `../shared/slurm-src` by `tests/testbed/slurm-source.sh <series>` into
/// a chroot over Debian 12 (`source-<series>`, a link to
/// `source-<version>-<tarball checksum>`).
pub const SOURCE_RELEASES: [Release; 5] = [
    Release { suite: "source-23.02", debian: "Debian 12 build base", slurm: "23.02.8", host: false, origin: Origin::Source },
    Release { suite: "source-23.11", debian: "Debian 12 build base", slurm: "23.11.11", host: false, origin: Origin::Source },
    Release { suite: "source-24.05", debian: "Debian 12 build base", slurm: "24.05.8", host: false, origin: Origin::Source },
    Release { suite: "source-25.05", debian: "Debian 12 build base", slurm: "25.05.8", host: false, origin: Origin::Source },
    Release { suite: "source-25.11", debian: "Debian 12 build base", slurm: "25.11.7", host: false, origin: Origin::Source },
];

/// The Debian releases that run in a chroot (trixie, sid).
pub fn chroot_releases() -> impl Iterator<Item = Release> {
    RELEASES.into_iter().filter(|r| !r.host)
}

/// Every release of the test bed, Debian's and those built from source,
/// oldest first.
pub fn all_releases() -> Vec<Release> {
    let mut v: Vec<Release> = RELEASES.into_iter().chain(SOURCE_RELEASES).collect();
    v.sort_by_key(|r| r.slurm.split('.').map(|n| n.parse::<u32>().unwrap_or(0)).collect::<Vec<_>>());
    v
}

impl Release {
    /// Where its chroot is (or would be); `None` for the host's release.
    pub fn chroot_dir(&self) -> Option<PathBuf> {
        (!self.host).then(|| chroot_base().join(self.suite))
    }

    /// Its chroot when built and finished; `None` for the host's release
    /// and for a chroot not built (see [`Release::open`] for why).
    pub fn chroot(&self) -> Option<Chroot> {
        self.open().ok()
    }

    /// The command that builds its chroot.
    pub fn setup_command(&self) -> String {
        match self.origin {
            Origin::Host => "tests/setup-debian.sh".to_string(),
            Origin::Debian => format!("tests/testbed/debian-chroot.sh {}", self.suite),
            Origin::Source => format!("tests/testbed/slurm-source.sh {}", self.suite.trim_start_matches("source-")),
        }
    }

    /// Its chroot, or why there is none.  A source build's link is
    /// resolved: the daemons' `/proc/<pid>/maps` show the real directory.
    pub fn open(&self) -> Result<Chroot, String> {
        match self.chroot_dir() {
            None => Err(format!("{} ({}) is the host's release, not a chroot", self.suite, self.debian)),
            Some(d) => {
                let real = if self.origin == Origin::Source {
                    fs::canonicalize(&d).map_err(|e| format!("{}: {e} (build it with {})", d.display(), self.setup_command()))?
                } else {
                    d
                };
                Chroot::open(&real)
            }
        }
    }
}

/// A finished chroot of `debian-chroot.sh`, or a copy-on-write view of
/// one ([`Overlay`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chroot {
    /// The root directory as the setup script mounts on it and as the
    /// kernel shows the chroot's files from the host (`/proc/<pid>/maps`).
    root: PathBuf,
    /// Where the host reads its files when that is not `root`: an
    /// overlay's `/proc/<holder>/root/<merged>` (the overlay is mounted
    /// in the holder's mount namespace only).
    host_root: Option<PathBuf>,
    /// A process whose mount namespace every command enters first (the
    /// overlay's holder); `None`: the host's.
    enter_ns: Option<u32>,
}

/// The multiarch triplet of Debian's library paths.
pub fn triplet() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "aarch64-linux-gnu"
    } else {
        "x86_64-linux-gnu"
    }
}

impl Chroot {
    /// The chroot at `root` when it is finished (has its stamp, slurmd and
    /// slurm_version.h).
    pub fn open(root: &Path) -> Result<Chroot, String> {
        let c = Chroot { root: root.to_path_buf(), host_root: None, enter_ns: None };
        if !root.join(STAMP).is_file() {
            return Err(format!("{} is not a finished test-bed chroot (no {STAMP}; build it with tests/testbed/debian-chroot.sh)", root.display()));
        }
        if !c.resolve("/usr/sbin/slurmd").is_some_and(|p| p.is_file()) {
            return Err(format!("{} has no /usr/sbin/slurmd", root.display()));
        }
        c.slurm_version()?;
        Ok(c)
    }

    /// The chroot's directory on the host (for an [`Overlay`] its merged
    /// directory, mounted in the overlay's own mount namespace: the path
    /// the kernel shows for its files, [`Chroot::host_path`] reads them).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The host path of a path inside the chroot.
    pub fn host_path(&self, inside: impl AsRef<Path>) -> PathBuf {
        let inside = inside.as_ref();
        self.host_root.as_ref().unwrap_or(&self.root).join(inside.strip_prefix("/").unwrap_or(inside))
    }

    /// True for a copy-on-write [`Overlay`] over a chroot.
    pub fn is_overlay(&self) -> bool {
        self.enter_ns.is_some()
    }

    /// Its Slurm version, e.g. "24.11.5", from `SLURM_VERSION_NUMBER` of
    /// its `/usr/include/slurm/slurm_version.h` (libslurm-dev; Debian's
    /// header has no version string).
    pub fn slurm_version(&self) -> Result<String, String> {
        let (a, b, c) = self.slurm_version_triple()?;
        Ok(format!("{a}.{b:02}.{c}"))
    }

    /// (major, minor, micro) of [`Chroot::slurm_version`].
    pub fn slurm_version_triple(&self) -> Result<(u32, u32, u32), String> {
        let h = self.host_path("/usr/include/slurm/slurm_version.h");
        let text = fs::read_to_string(&h).map_err(|e| format!("reading {}: {e}", h.display()))?;
        let n = text
            .lines()
            .find_map(|l| l.strip_prefix("#define SLURM_VERSION_NUMBER"))
            .and_then(|v| u32::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok())
            .ok_or_else(|| format!("{} has no SLURM_VERSION_NUMBER", h.display()))?;
        Ok((n >> 16 & 0xff, n >> 8 & 0xff, n & 0xff))
    }

    /// The host path of `inside` with its symbolic links resolved inside
    /// the chroot (Debian's `/usr/sbin/slurmd` links to the absolute
    /// `/etc/alternatives/slurmd`, which on the host names the host's);
    /// `None` when it does not exist there.
    pub fn resolve(&self, inside: impl AsRef<Path>) -> Option<PathBuf> {
        let mut cur = PathBuf::from("/");
        let mut todo: Vec<std::ffi::OsString> = inside
            .as_ref()
            .components()
            .rev()
            .filter_map(|c| match c {
                std::path::Component::Normal(n) => Some(n.to_os_string()),
                std::path::Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        let mut links = 0;
        while let Some(name) = todo.pop() {
            if name == ".." {
                cur.pop();
                continue;
            }
            let next = cur.join(&name);
            let host = self.host_path(&next);
            let md = fs::symlink_metadata(&host).ok()?;
            if md.file_type().is_symlink() {
                links += 1;
                if links > 40 {
                    return None;
                }
                let target = fs::read_link(&host).ok()?;
                if target.is_absolute() {
                    cur = PathBuf::from("/");
                }
                todo.extend(target.components().rev().filter_map(|c| match c {
                    std::path::Component::Normal(n) => Some(n.to_os_string()),
                    std::path::Component::ParentDir => Some("..".into()),
                    _ => None,
                }));
            } else {
                cur = next;
            }
        }
        Some(self.host_path(&cur))
    }

    /// Debian's stock plugin directory, as a path inside the chroot (what
    /// `PluginDir=` names); [`Chroot::host_path`] gives it on the host.
    /// Debian's `slurm-wlm`, or `slurm` for a build from source
    /// (configure's default `$(libdir)/slurm`).
    pub fn stock_plugin_dir(&self) -> PathBuf {
        let debian = PathBuf::from(format!("/usr/lib/{}/slurm-wlm", triplet()));
        let source = PathBuf::from(format!("/usr/lib/{}/slurm", triplet()));
        if !self.resolve(&debian).is_some_and(|p| p.is_dir()) && self.resolve(&source).is_some_and(|p| p.is_dir()) {
            source
        } else {
            debian
        }
    }

    /// Its `libslurmfull.so`, as a path inside the chroot.
    pub fn libslurmfull(&self) -> PathBuf {
        self.stock_plugin_dir().join("libslurmfull.so")
    }

    /// The package versions the stamp records (`<package> <version>` lines).
    pub fn stamp(&self) -> String {
        fs::read_to_string(self.root.join(STAMP)).unwrap_or_default()
    }

    /// A program of the chroot, as a path inside it (the sbin and bin
    /// dirs searched on the host side); `None` when it has none.
    pub fn tool(&self, name: &str) -> Option<PathBuf> {
        ["/usr/sbin", "/usr/bin", "/sbin", "/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| self.resolve(p).is_some_and(|h| h.is_file()))
    }

    /// (uid, gid) of a user of the chroot's own `/etc/passwd` (its munge
    /// user's ids are not the host's).
    pub fn user_ids(&self, name: &str) -> Option<(u32, u32)> {
        crate::fsutil::user_ids_in(&self.host_path("/etc/passwd"), name)
    }

    /// Everything missing for running clusters in this chroot (empty when
    /// all is fine).
    pub fn problems(&self) -> Vec<String> {
        let mut v = Vec::new();
        if super::fsutil::euid() != Some(0) {
            v.push("not running as root (chroot and mount need root)".to_string());
        }
        let host_tools: &[&str] = if self.is_overlay() { &["unshare", "chroot", "mount", "nsenter"] } else { &["unshare", "chroot", "mount"] };
        for &t in host_tools {
            if !super::tool(t).is_file() {
                v.push(format!("host tool `{t}` not found (util-linux, coreutils)"));
            }
        }
        for t in ["slurmd", "slurmctld", "srun", "sbatch", "scontrol", "squeue", "scancel", "munged", "setpriv", "sh"] {
            if self.tool(t).is_none() {
                v.push(format!("`{t}` not found in chroot {}", self.root.display()));
            }
        }
        if !self.resolve(self.stock_plugin_dir().join("gres_gpu.so")).is_some_and(|p| p.is_file()) {
            v.push(format!("chroot {} has no stock gres_gpu.so", self.root.display()));
        }
        if self.user_ids("munge").is_none() {
            v.push(format!("chroot {} has no munge user", self.root.display()));
        }
        v
    }

    /// A `Command` running `prog` (a path inside the chroot, or a name
    /// its PATH finds) inside the chroot, in a private mount namespace
    /// where each of `binds` (absolute host directories or files) is
    /// visible at the same path.  The caller adds `prog`'s arguments,
    /// environment and working directory as usual; the working directory
    /// must be visible inside (one of `binds`, or `/`).
    ///
    /// Mounted in the namespace, in this order: `/proc` (a new proc
    /// mount of the host's PID namespace), `/sys` and `/dev` (recursive
    /// binds: `/sys/fs/cgroup`, `/dev/pts`, `/dev/shm`), tmpfs on `/tmp`
    /// and `/run` (the chroot's own stay empty; mount points for `binds`
    /// under them cost nothing), the host's `/etc/hosts` and
    /// `/etc/resolv.conf` (the node's host name resolves as on the host),
    /// then `binds`.  Where the command's environment has
    /// `GRES_RS_TEST_MIG_MINORS` (a host file), that file is the chroot's
    /// `/proc/driver/nvidia-caps/mig-minors`, as the NVIDIA driver makes
    /// it (on a tmpfs over `/proc/driver`): the stock gpu/nvml reads that
    /// path only.  A bind whose mount point is missing in the chroot
    /// gets one made (outside `/tmp` and `/run` that directory stays in
    /// the chroot, empty).
    ///
    /// For an [`Overlay`] the command first enters the overlay's mount
    /// namespace (`nsenter --mount`, in the caller's working directory),
    /// and all of the above is done over its merged directory: what the
    /// program writes lands in the overlay's upper directory.
    pub fn command(&self, prog: impl AsRef<OsStr>, binds: &[PathBuf]) -> Command {
        let mut cmd = match self.enter_ns {
            None => Command::new(super::tool("unshare")),
            Some(pid) => {
                let mut c = Command::new("/bin/sh");
                c.arg("-c").arg(r#"ns=$1; shift; exec "$0" --mount="$ns" --wd="$(pwd)" -- "$@""#).arg(super::tool("nsenter"));
                c.arg(format!("/proc/{pid}/ns/mnt")).arg(super::tool("unshare"));
                c
            }
        };
        cmd.args(["--mount", "--propagation", "private", "--"]).arg("/bin/sh").arg("-c").arg(SETUP_SCRIPT).arg("chroot-setup");
        cmd.arg(&self.root).arg(super::tool("chroot")).arg(binds.len().to_string());
        cmd.args(binds);
        cmd.arg(prog.as_ref());
        cmd
    }
}

/// A copy-on-write view of a test-bed chroot, for a test that changes
/// what is installed in it (a package) while the cached chroot, which
/// every test run shares, stays as it is: an overlayfs with the chroot as
/// its lower layer and `upper/` and `work/` in a directory of the test,
/// mounted on `<dir>/merged` in a mount namespace of its own, held by one
/// small process (the holder: `unshare --mount` + a shell that waits on
/// its stdin).  [`Overlay::chroot`] runs commands in that namespace, so
/// everything they write (dpkg's database, a package's files, mount points
/// for binds) goes to `upper/`; the host never sees the mount.
///
/// Dropping it closes the holder's stdin: the holder exits and, once the
/// last process of a command in it has ended, so does the mount.  Stop
/// what runs in it (a [`crate::Cluster`]) first; [`Overlay::users`] tells
/// which processes still have the overlay mounted.  The holder also ends
/// when this process dies (its stdin reaches end of file).
#[derive(Debug)]
pub struct Overlay {
    holder: Option<std::process::Child>,
    dir: PathBuf,
    chroot: Chroot,
    lower: PathBuf,
}

impl Overlay {
    /// Mounts an overlay over `lower` (a plain chroot, not an overlay) in
    /// `dir` (created; it must not exist or be empty).
    pub fn new(lower: &Chroot, dir: &Path) -> Result<Overlay, String> {
        use std::io::BufRead;
        use std::process::Stdio;
        if lower.is_overlay() {
            return Err(format!("{} is an overlay already", lower.root.display()));
        }
        for d in ["upper", "work", "merged"] {
            fs::create_dir_all(dir.join(d)).map_err(|e| format!("creating {}: {e}", dir.join(d).display()))?;
        }
        let merged = dir.join("merged");
        let opts = format!("lowerdir={},upperdir={},workdir={}", lower.root.display(), dir.join("upper").display(), dir.join("work").display());
        let mut child = Command::new(super::tool("unshare"))
            .args(["--mount", "--propagation", "private", "--", "/bin/sh", "-c", OVERLAY_HOLDER, "overlay-holder"])
            .arg(super::tool("mount"))
            .arg(&opts)
            .arg(&merged)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run unshare: {e}"))?;
        let pid = child.id();
        let mut line = String::new();
        let ready = child.stdout.take().map(|o| std::io::BufReader::new(o).read_line(&mut line));
        if !matches!(ready, Some(Ok(_))) || line.trim() != "ready" {
            drop(child.stdin.take());
            let out = child.wait_with_output().map_err(|e| format!("waiting for the overlay holder: {e}"))?;
            return Err(format!("mounting an overlay over {} failed: {}{}", lower.root.display(), line, String::from_utf8_lossy(&out.stderr)));
        }
        let chroot = Chroot {
            root: merged.clone(),
            host_root: Some(PathBuf::from(format!("/proc/{pid}/root")).join(merged.strip_prefix("/").unwrap_or(&merged))),
            enter_ns: Some(pid),
        };
        let o = Overlay { holder: Some(child), dir: dir.to_path_buf(), chroot, lower: lower.root.clone() };
        if !o.chroot.host_path(STAMP).is_file() {
            return Err(format!("the overlay over {} shows no {STAMP}", lower.root.display()));
        }
        Ok(o)
    }

    /// The chroot to run commands and clusters in ([`crate::ClusterConfig::in_chroot`]).
    pub fn chroot(&self) -> &Chroot {
        &self.chroot
    }

    /// The upper layer: what was written in the overlay.
    pub fn upper(&self) -> PathBuf {
        self.dir.join("upper")
    }

    /// The chroot under it.
    pub fn lower(&self) -> &Path {
        &self.lower
    }

    /// PIDs of the processes that still have this overlay mounted (in
    /// their `/proc/<pid>/mountinfo`): the holder and whatever runs in a
    /// command of [`Overlay::chroot`].
    pub fn users(&self) -> Vec<u32> {
        overlay_users(&self.upper())
    }

    /// Ends the holder and waits (up to `timeout`) until no process has
    /// the overlay mounted; Err names those that still do.
    pub fn unmount(&mut self, timeout: std::time::Duration) -> Result<(), String> {
        if let Some(mut h) = self.holder.take() {
            drop(h.stdin.take());
            let _ = h.wait();
        }
        let t0 = std::time::Instant::now();
        loop {
            let users = self.users();
            if users.is_empty() {
                return Ok(());
            }
            if t0.elapsed() > timeout {
                return Err(format!("the overlay {} is still mounted by pids {users:?}", self.dir.display()));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        match self.unmount(std::time::Duration::from_secs(10)) {
            Ok(()) => {
                let _ = fs::remove_dir_all(&self.dir);
            }
            Err(e) => eprintln!("harness: {e}; {} left in place", self.dir.display()),
        }
    }
}

/// PIDs whose mount table has an overlay with upper directory `upper`.
fn overlay_users(upper: &Path) -> Vec<u32> {
    let want = format!("upperdir={}", upper.display());
    let Ok(rd) = fs::read_dir("/proc") else { return Vec::new() };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|p| {
            fs::read_to_string(format!("/proc/{p}/mountinfo"))
                .is_ok_and(|m| m.lines().any(|l| l.contains(" - overlay ") && l.split([',', ' ']).any(|w| w == want)))
        })
        .collect()
}

/// Run by the host's `/bin/sh` in the overlay's new mount namespace: `$1`
/// mount(8), `$2` the overlay's options, `$3` where to mount it; then it
/// says `ready` and waits for its stdin to end.
const OVERLAY_HOLDER: &str = r#"set -e
"$1" -t overlay overlay -o "$2" "$3"
echo ready
while read -r _; do :; done
"#;

/// One command of [`Chroot::timed_runs`]: a program (a path inside the
/// chroot) and its arguments, the directory it runs in (visible inside)
/// and its environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimedRun {
    pub argv: Vec<String>,
    pub dir: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Chroot {
    /// Runs `commands[order[0]]`, `commands[order[1]]`, ... one after
    /// another inside the chroot, in ONE mount namespace (`binds` as for
    /// [`Chroot::command`]), and returns the wall time of each run in
    /// seconds, in `order`.  The times are taken by the chroot's bash
    /// around each command (`$EPOCHREALTIME`, no process of its own), so
    /// the cost of entering the chroot (`unshare`, the mounts,
    /// `chroot(8)`: tens of milliseconds) is in none of them.  A command
    /// gets its `env` on top of `PATH` (the chroot's sbin and bin
    /// directories) and `LC_ALL=C` (nothing of this process's
    /// environment); its output goes to `<dir>/timed-run.out`, its stdin
    /// is `/dev/null`.  Where a command's `env` has
    /// `GRES_RS_TEST_MIG_MINORS`, the namespace has that mig-minors file
    /// for all runs, as [`Chroot::command`] gives it.  Err at the first run
    /// that fails, with its status and output, or when the chroot has no
    /// bash.
    pub fn timed_runs(&self, binds: &[PathBuf], commands: &[TimedRun], order: &[usize]) -> Result<Vec<f64>, String> {
        let bash = self.tool("bash").ok_or_else(|| format!("chroot {} has no bash", self.root.display()))?;
        if let Some(i) = order.iter().find(|&&i| i >= commands.len()) {
            return Err(format!("timed_runs: run {i} of {} commands", commands.len()));
        }
        // One function a command (its directory apart, outside the time).
        let mut script = String::from("set -u\n");
        for (i, c) in commands.iter().enumerate() {
            let env: Vec<String> = c.env.iter().map(|(k, v)| format!("{k}={} ", sh_quote(v))).collect();
            let argv: Vec<String> = c.argv.iter().map(|a| sh_quote(a)).collect();
            let dir = sh_quote(&c.dir.to_string_lossy());
            script.push_str(&format!("d{i}() {{ cd {dir}; }}\nr{i}() {{ {}{} >timed-run.out 2>&1 </dev/null; }}\n", env.concat(), argv.join(" ")));
        }
        let order: Vec<String> = order.iter().map(usize::to_string).collect();
        script.push_str(&format!(
            "for i in {}; do\n  d$i || exit 97\n  s=$EPOCHREALTIME; r$i; rc=$?; e=$EPOCHREALTIME\n  \
             if [ $rc -ne 0 ]; then echo \"TIMED_RUN_FAILED $i $rc\"; cat timed-run.out; exit 1; fi\n  \
             s=${{s/./}} e=${{e/./}}; echo \"TIMED_RUN $((10#$e - 10#$s))\"\ndone\n",
            order.join(" ")
        ));
        let mut cmd = self.command(&bash, binds);
        cmd.arg("-c").arg(&script).env_clear().env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin").env("LC_ALL", "C").stdin(std::process::Stdio::null());
        // The driver's mig-minors file, which the namespace gets once for
        // every run (see `command`).
        if let Some((k, v)) = commands.iter().flat_map(|c| &c.env).find(|(k, _)| k == "GRES_RS_TEST_MIG_MINORS") {
            cmd.env(k, v);
        }
        let out = cmd.output().map_err(|e| format!("running bash in chroot {}: {e}", self.root.display()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!("timed runs in chroot {} failed ({}):\n{text}{}", self.root.display(), out.status, String::from_utf8_lossy(&out.stderr)));
        }
        let times: Vec<f64> = text.lines().filter_map(|l| l.strip_prefix("TIMED_RUN ")?.trim().parse::<f64>().ok()).map(|us| us / 1e6).collect();
        if times.len() != order.len() {
            return Err(format!("timed runs in chroot {}: {} times for {} runs:\n{text}", self.root.display(), times.len(), order.len()));
        }
        Ok(times)
    }
}

/// `s` as one word of a POSIX shell, in single quotes.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Run by the host's `/bin/sh` inside the new mount namespace: `$1` the
/// chroot, `$2` the host's chroot(8), `$3` the number of binds, then the
/// binds, then the program and its arguments.  The working directory is
/// taken inside by the chroot's own `sh` (chroot(8) changes to `/`).
const SETUP_SCRIPT: &str = r#"set -e
root=$1 chroot=$2 n=$3
shift 3
cwd=$(pwd)
mount -t proc proc "$root/proc"
if [ -n "${GRES_RS_TEST_MIG_MINORS:-}" ]; then
    mount -t tmpfs -o mode=755 tmpfs "$root/proc/driver"
    mkdir -p "$root/proc/driver/nvidia-caps"
    : >"$root/proc/driver/nvidia-caps/mig-minors"
    mount --bind "$GRES_RS_TEST_MIG_MINORS" "$root/proc/driver/nvidia-caps/mig-minors"
fi
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
for f in /etc/hosts /etc/resolv.conf; do
    if [ -f "$f" ]; then
        [ -e "$root$f" ] || : >"$root$f"
        mount --bind "$f" "$root$f"
    fi
done
while [ "$n" -gt 0 ]; do
    b=$1
    shift
    n=$((n - 1))
    if [ -d "$b" ]; then
        mkdir -p "$root$b"
    else
        mkdir -p "$root$(dirname "$b")"
        [ -e "$root$b" ] || : >"$root$b"
    fi
    mount --rbind "$b" "$root$b"
done
exec "$chroot" "$root" /bin/sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' chroot-cwd "$cwd" "$@"
"#;

/// The mount namespace of a process (the inode of `/proc/<pid>/ns/mnt`).
pub fn mount_namespace(pid: u32) -> Option<u64> {
    fs::metadata(format!("/proc/{pid}/ns/mnt")).ok().map(|m| m.ino())
}

/// Live PIDs (other than this process) in mount namespace `ns`: a
/// chroot-run daemon and everything it started (slurmstepd, job tasks).
pub fn pids_in_mount_namespace(ns: u64) -> Vec<u32> {
    let me = std::process::id();
    let Ok(rd) = fs::read_dir("/proc") else { return Vec::new() };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|&p| p != me && super::process::pid_alive(p) && mount_namespace(p) == Some(ns))
        .collect()
}

/// One file mapping of `/proc/<pid>/maps`: the device (major, minor), inode
/// and path as the kernel shows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub dev: (u32, u32),
    pub inode: u64,
    pub path: String,
}

/// The file mappings of a process, one per distinct file.
pub fn mappings(pid: u32) -> Result<Vec<Mapping>, String> {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).map_err(|e| format!("cannot read /proc/{pid}/maps: {e}"))?;
    let mut v: Vec<Mapping> = Vec::new();
    for m in slurm_gpu_gres::proc_maps::mapped_files(&maps) {
        // The path as the kernel shows it, ` (deleted)` included.
        let path = if m.deleted { format!("{} (deleted)", m.path) } else { m.path };
        let m = Mapping { dev: m.dev, inode: m.inode, path };
        if !v.contains(&m) {
            v.push(m);
        }
    }
    Ok(v)
}

/// The mapping of `pid` that is the host file `host_file` (same device
/// and inode, whatever path the kernel shows for it), if any.
pub fn mapping_of(pid: u32, host_file: &Path) -> Result<Option<Mapping>, String> {
    let md = fs::metadata(host_file).map_err(|e| format!("{}: {e}", host_file.display()))?;
    let dev = slurm_gpu_gres::proc_maps::split_dev(md.dev());
    Ok(mappings(pid)?.into_iter().find(|m| m.inode == md.ino() && m.dev == dev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
        assert_eq!(sh_quote(""), "''");
    }

    /// On the first chroot that is built (skipped without one, or not as
    /// root): what a command writes in an overlay over it lands in the
    /// upper layer and not in the chroot, the host reads it through
    /// `host_path`, and once unmounted no process has the overlay.
    #[test]
    fn overlay_over_a_chroot() {
        let Some(lower) = chroot_releases().find_map(|r| r.chroot()).filter(|r| r.problems().is_empty()) else {
            crate::ledger::skipped("overlay_over_a_chroot", "no usable test-bed chroot");
            return;
        };
        let dir = crate::fsutil::make_unique_dir("gres-rs-ovl-test").expect("temp dir");
        let mut ov = Overlay::new(&lower, &dir).unwrap_or_else(|e| panic!("{e}"));
        let c = ov.chroot().clone();
        assert!(c.is_overlay() && c.problems().is_empty(), "{:?}", c.problems());
        assert_eq!(c.slurm_version(), lower.slurm_version());
        let name = format!("gres-rs-overlay-test-{}", std::process::id());
        let out = c.command("/bin/sh", &[]).args(["-c", &format!("echo written >/var/{name} && cat /var/{name}")]).output().expect("sh in the overlay");
        assert!(out.status.success() && String::from_utf8_lossy(&out.stdout) == "written\n", "{out:?}");
        assert_eq!(fs::read_to_string(c.host_path(format!("/var/{name}"))).unwrap_or_default(), "written\n");
        assert!(ov.upper().join("var").join(&name).is_file());
        assert!(!lower.host_path(format!("/var/{name}")).exists(), "written into the chroot itself");
        assert!(!ov.users().is_empty());
        ov.unmount(std::time::Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
        assert!(ov.users().is_empty());
        drop(ov);
        assert!(!dir.exists());
    }

    /// On the first chroot that is built (skipped without one, or not as
    /// root): times in order, each command's environment and directory,
    /// and the first failure with its output.
    #[test]
    fn timed_runs_in_a_chroot() {
        let Some(root) = chroot_releases().find_map(|r| r.chroot()).filter(|r| r.problems().is_empty()) else {
            crate::ledger::skipped("timed_runs_in_a_chroot", "no usable test-bed chroot");
            return;
        };
        let dir = crate::TempDir::new(&format!("gres-rs-timed-{}", std::process::id()));
        let d = dir.0.clone();
        let sh = |script: &str, env: &[(&str, &str)]| TimedRun {
            argv: vec!["/bin/sh".into(), "-c".into(), script.into()],
            dir: d.clone(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        let cmds = [
            sh("[ \"$X\" = \"it's x\" ] && [ \"$(pwd)\" = \"$D\" ] && [ -z \"${HOME:-}\" ] && echo ran >>log", &[("X", "it's x"), ("D", &d.to_string_lossy())]),
            sh("sleep 0.2", &[]),
        ];
        let binds = [d.clone()];
        let t = root.timed_runs(&binds, &cmds, &[0, 1, 0]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.len(), 3);
        assert!(t[1] >= 0.2 && t[1] < 5.0 && t[0] < t[1] && t[2] < t[1], "{t:?}");
        assert_eq!(fs::read_to_string(d.join("log")).unwrap_or_default(), "ran\nran\n");
        let e = root.timed_runs(&binds, &[sh("echo why; exit 3", &[])], &[0]).expect_err("a failing run");
        assert!(e.contains("TIMED_RUN_FAILED 0 3") && e.contains("why"), "{e}");
    }
}
