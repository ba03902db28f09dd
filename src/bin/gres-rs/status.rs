//! `gres-rs status`: which GRES and gpu plugin files the running Slurm
//! daemons of this host have mapped (slurmd, slurmstepd, slurmctld), ours or
//! stock, their release, and whether what is mapped is what is installed
//! now.  Read from `/proc/<pid>/maps`; the file itself through
//! `/proc/<pid>/map_files/` where the kernel allows (root), so that a file
//! replaced or deleted since the daemon started is still read as mapped.
//!
//! Any user can name a process `slurmd` and map files of any name from any
//! directory, so a process counts as a daemon only when its executable
//! (`/proc/<pid>/exe`) is a Slurm daemon binary that root owns and only
//! root may write, and it runs as root, SlurmUser or SlurmdUser
//! ([`trust`]); the others are listed as ignored.  Everything printed that
//! comes from the system goes through [`escape`], and every read has a
//! bound.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use gres_core::bounded_read::{read_bounded, ReadError, MAX_FILE_LEN};
use slurm_gpu_gres::is_library_file;
use slurm_gpu_gres::predict::slurm_conf::SlurmConf;

use crate::install::plugin_info;
use crate::installed::{uids_of, version_text};
use crate::{default_slurm_conf, StatusArgs, StatusFormat, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE};

/// The daemons whose plugins are shown, by `/proc/<pid>/comm`.
pub const DAEMONS: [&str; 3] = ["slurmd", "slurmstepd", "slurmctld"];

/// The names of the daemons' executables: Slurm's, and Debian's (the
/// `/usr/sbin/slurmd` it installs is a link to `slurmd-wlm`).
pub const DAEMON_BINARIES: [&str; 6] = ["slurmd", "slurmstepd", "slurmctld", "slurmd-wlm", "slurmstepd-wlm", "slurmctld-wlm"];

pub use slurm_gpu_gres::proc_maps::{mapped_files_bytes, split_dev, Mapped, MAX_MAPS_LEN};

/// A mapped file as read from `maps`: its path is bytes.
pub type MappedFile = Mapped<Vec<u8>>;

/// The most read of `/proc/<pid>/status`, `stat` and `comm` (a few KiB).
const MAX_PROC_TEXT_LEN: u64 = 64 << 10;

/// Whether a file name is one of the plugin files shown: GRES plugins of
/// GPUs (`gres_gpu.so`, `gres_mps.so`, `gres_shard.so`), any gpu plugin
/// (`gpu_nvml.so`, `gpu_generic.so`, ...), and our library.
fn shown(name: &str) -> bool {
    matches!(name, "gres_gpu.so" | "gres_mps.so" | "gres_shard.so") || (name.starts_with("gpu_") && name.ends_with(".so")) || is_library_file(name)
}

/// Text from the system (a path, a process name, a file's contents) as it
/// may be printed: a control character (C0, DEL, C1) or a character that
/// reorders or hides text (bidirectional overrides, zero-width characters,
/// line and paragraph separators) is written `\n`, `\t`, `\r`, `\xNN`
/// (ASCII) or `\u{NNNN}`, a byte that is not UTF-8 `\xNN`.  A backslash is
/// kept as it is, so that escaping escaped text changes nothing.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if c.is_ascii_control() => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c if c.is_control() || hides_text(c) => {
                    let _ = write!(out, "\\u{{{:04x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// [`escape`] of a `str`.
pub fn escape_str(s: &str) -> String {
    escape(s.as_bytes())
}

/// Characters that change how the text around them shows: bidirectional
/// marks, embeddings, overrides and isolates, zero-width characters, line
/// and paragraph separators, the byte order mark.
fn hides_text(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// What is known of one mapped plugin file.  `file` and `path` are
/// escaped already.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginUse {
    pub file: String,
    pub path: String,
    /// `plugin_type` (e.g. "gres/gpu"), when the file could be read.
    pub plugin_type: Option<String>,
    /// The Slurm release of its `plugin_version`, when read.
    pub release: Option<String>,
    /// Ours: our library is mapped from the same directory.
    pub ours: bool,
    /// What is installed at the path now differs from what is mapped
    /// (replaced, deleted): the daemon runs the old file until restarted.
    pub replaced: bool,
    /// Why the file's contents could not be read, if so.
    pub unreadable: Option<String>,
}

/// One daemon process and what it has mapped (or why that is unknown).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonStatus {
    pub name: String,
    pub pid: u32,
    pub plugins: Result<Vec<PluginUse>, String>,
}

/// A process named like a daemon that is not one ([`trust`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    pub name: String,
    pub pid: u32,
    pub reason: String,
}

/// Which file is at a path: (`major:minor` of its file system, inode).
pub type FileKey = ((u32, u32), u64);

/// The plugin files of one process, from its mapped files.  `read` gives
/// the contents of a mapped file (from `map_files` or the path);
/// `installed` the current (dev, inode) at a path.
pub fn plugin_uses(
    files: &[MappedFile],
    read: &dyn Fn(&MappedFile) -> Result<Vec<u8>, String>,
    installed: &dyn Fn(&Path) -> Option<FileKey>,
) -> Vec<PluginUse> {
    let library_dirs: Vec<&[u8]> = files.iter().filter(|m| is_library_file(&file_name(&m.path))).map(|m| dir_of(&m.path)).collect();
    let mut out = Vec::new();
    for m in files {
        let file = file_name(&m.path);
        if !shown(&file) {
            continue;
        }
        let replaced = m.deleted || installed(path_of(&m.path)) != Some((m.dev, m.inode));
        let ours = is_library_file(&file) || library_dirs.contains(&dir_of(&m.path));
        let (mut plugin_type, mut release, mut unreadable) = (None, None, None);
        if !is_library_file(&file) {
            match read(m).and_then(|bytes| plugin_info(&bytes)) {
                Ok(info) => {
                    plugin_type = info.plugin_type.as_deref().map(escape_str);
                    release = Some(version_text(info.version));
                }
                Err(e) => unreadable = Some(escape_str(&e)),
            }
        }
        out.push(PluginUse { file, path: escape(&m.path), plugin_type, release, ours, replaced, unreadable });
    }
    out
}

fn path_of(bytes: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(bytes))
}

/// The directory part of a path (without the last `/`).
fn dir_of(path: &[u8]) -> &[u8] {
    path.iter().rposition(|&b| b == b'/').map_or(&path[..0], |i| &path[..i])
}

/// The last part of a path, escaped (a name that is not UTF-8 matches no
/// plugin file's).
fn file_name(path: &[u8]) -> String {
    escape(path.rsplit(|&b| b == b'/').next().unwrap_or(path))
}

/// The users whose daemons are trusted: root, SlurmUser, SlurmdUser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedUsers {
    pub uids: BTreeSet<u32>,
    /// Who they are, for the reasons: "root", "root or SlurmUser slurm
    /// (uid 64030)".
    pub who: String,
    /// Why it is fewer than slurm.conf may mean (an unreadable slurm.conf,
    /// a user not in /etc/passwd).
    pub note: Option<String>,
}

/// [`TrustedUsers`] from slurm.conf's `SlurmUser` and `SlurmdUser` (`Err`:
/// why slurm.conf could not be read) and the text of /etc/passwd.  A user
/// is a name or a number, as Slurm takes it; unset is root.
pub fn trusted_users(settings: Result<[(&str, Option<&str>); 2], String>, passwd: &str) -> TrustedUsers {
    let mut t = TrustedUsers { uids: BTreeSet::from([0]), who: "root".into(), note: None };
    let settings = match settings {
        Ok(s) => s,
        Err(why) => {
            t.note = Some(format!("{why}: SlurmUser unknown, only root's daemons are trusted"));
            return t;
        }
    };
    let mut notes = Vec::new();
    for (key, user) in settings {
        let Some(user) = user.filter(|u| !u.is_empty() && *u != "root") else { continue };
        let uid = user
            .parse::<u32>()
            .ok()
            .or_else(|| passwd.lines().map(|l| l.split(':').collect::<Vec<_>>()).find(|f| f.len() > 2 && f[0] == user).and_then(|f| f[2].parse().ok()));
        match uid {
            Some(0) => {}
            Some(uid) => {
                t.uids.insert(uid);
                let _ = write!(t.who, " or {key} {} (uid {uid})", escape_str(user));
            }
            None => notes.push(format!("{key} {} is not in /etc/passwd: its daemons are not trusted", escape_str(user))),
        }
    }
    t.note = (!notes.is_empty()).then(|| notes.join("; "));
    t
}

/// slurm.conf's [`TrustedUsers`] on this host.
fn trusted_users_of(conf: &Path) -> TrustedUsers {
    let passwd = read_bounded(Path::new("/etc/passwd"), MAX_FILE_LEN).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    match SlurmConf::load(conf) {
        // What is wrong with it `gres-rs check` says, with its lines.
        Err(_) if !conf.exists() => trusted_users(Err(format!("no {}", escape(conf.as_os_str().as_bytes()))), &passwd),
        Err(_) => trusted_users(Err(format!("cannot read {} (`gres-rs check` says why)", escape(conf.as_os_str().as_bytes()))), &passwd),
        Ok(c) => trusted_users(Ok([("SlurmUser", c.get("SlurmUser")), ("SlurmdUser", c.get("SlurmdUser"))]), &passwd),
    }
}

/// What `/proc/<pid>/exe` is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExeFile {
    /// Where the link points (` (deleted)` when the binary was replaced).
    pub path: Vec<u8>,
    pub uid: u32,
    pub mode: u32,
    pub regular: bool,
}

/// What /proc says of a process named like a daemon, for [`trust`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcFacts {
    pub pid: u32,
    pub name: String,
    /// Real and effective uid (`Uid:` of `/proc/<pid>/status`), or why
    /// they are unknown.
    pub uids: Result<(u32, u32), String>,
    /// Its executable; `Err((denied, why))`: `denied` when this user may
    /// not look (another user's process).
    pub exe: Result<ExeFile, (bool, String)>,
}

/// Whether a process named like a daemon is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trust {
    Daemon,
    /// Run by a trusted user, but this user may not see its executable:
    /// shown, as unknown, with why.
    Unverified(String),
    /// Not a daemon: why.
    Ignored(String),
}

/// The decision: a daemon runs a Slurm daemon binary (a regular file of
/// root's that group and others may not write, named as Slurm's are) as
/// a trusted user (real and effective uid).
pub fn trust(p: &ProcFacts, users: &TrustedUsers) -> Trust {
    let mut why = Vec::new();
    match p.uids {
        Err(ref e) => why.push(format!("its uids are unknown ({e})")),
        Ok((real, effective)) => {
            let bad: Vec<u32> = [real, effective].into_iter().filter(|u| !users.uids.contains(u)).collect();
            if !bad.is_empty() {
                let ids = if real == effective { format!("uid {real}") } else { format!("real uid {real}, effective uid {effective}") };
                why.push(format!("runs as {ids}, not as {}", users.who));
            }
        }
    }
    match &p.exe {
        Err((true, e)) if why.is_empty() => return Trust::Unverified(format!("cannot check /proc/{}/exe: {e} (run as root)", p.pid)),
        Err((true, _)) => {}
        Err((false, e)) => why.push(format!("/proc/{}/exe: {e}", p.pid)),
        Ok(exe) => {
            let mut wrong = Vec::new();
            let shown_path = escape(&exe.path);
            let path = exe.path.strip_suffix(b" (deleted)").unwrap_or(&exe.path);
            let base = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
            if !DAEMON_BINARIES.iter().any(|d| d.as_bytes() == base) {
                wrong.push(format!("named {}", escape(base)));
            }
            if !exe.regular {
                wrong.push("not a regular file".into());
            }
            if exe.uid != 0 {
                wrong.push(format!("owned by uid {}", exe.uid));
            }
            if exe.mode & 0o022 != 0 {
                wrong.push(format!("writable by group or others (mode {:04o})", exe.mode & 0o7777));
            }
            if !wrong.is_empty() {
                why.push(format!("/proc/{}/exe is {shown_path}, not a root-owned Slurm binary ({})", p.pid, wrong.join(", ")));
            }
        }
    }
    if why.is_empty() {
        Trust::Daemon
    } else {
        Trust::Ignored(why.join("; "))
    }
}

/// The processes of this host named like a daemon (not zombies), by pid.
fn named_like_daemons() -> Result<Vec<(u32, String)>, String> {
    let entries = fs::read_dir("/proc").map_err(|e| format!("cannot list /proc: {e}"))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(comm) = read_bounded(&entry.path().join("comm"), MAX_PROC_TEXT_LEN) else { continue };
        let Some(name) = DAEMONS.iter().find(|d| comm.strip_suffix(b"\n").unwrap_or(&comm) == d.as_bytes()) else { continue };
        // A daemon that has exited but is not reaped yet maps nothing.
        let zombie = read_bounded(&entry.path().join("stat"), MAX_PROC_TEXT_LEN)
            .ok()
            .and_then(|st| st.iter().rposition(|&b| b == b')').map(|i| st[i + 1..].trim_ascii_start().starts_with(b"Z")))
            .unwrap_or(false);
        if !zombie {
            out.push((pid, name.to_string()));
        }
    }
    out.sort();
    Ok(out)
}

/// What /proc says of process `pid` named `name`; `None` when it is gone.
fn facts_of(pid: u32, name: &str) -> Option<ProcFacts> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let uids = match read_bounded(&proc_dir.join("status"), MAX_PROC_TEXT_LEN) {
        Err(e) if e.is_not_found() => return None,
        Err(e) => Err(e.to_string()),
        Ok(text) => uids_of(&text).ok_or_else(|| "no Uid: line in its status".to_string()),
    };
    let exe_link = proc_dir.join("exe");
    let denied = |e: &std::io::Error| e.kind() == ErrorKind::PermissionDenied;
    let exe = match (fs::read_link(&exe_link), fs::metadata(&exe_link)) {
        (Ok(path), Ok(md)) => Ok(ExeFile { path: path.into_os_string().into_vec(), uid: md.uid(), mode: md.mode(), regular: md.file_type().is_file() }),
        (Err(e), _) | (_, Err(e)) if e.kind() == ErrorKind::NotFound && !proc_dir.exists() => return None,
        (Err(e), _) | (_, Err(e)) => Err((denied(&e), e.to_string())),
    };
    Some(ProcFacts { pid, name: name.to_string(), uids, exe })
}

fn status_of(pid: u32, name: &str) -> DaemonStatus {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let plugins = match read_bounded(&proc_dir.join("maps"), MAX_MAPS_LEN) {
        Err(ReadError::TooLarge { .. }) => Err(format!("maps too large: /proc/{pid}/maps holds more than the {MAX_MAPS_LEN} bytes read")),
        Err(ReadError::Io(e)) if e.kind() == ErrorKind::PermissionDenied => {
            Err(format!("cannot read /proc/{pid}/maps: {e} (run as root to see what it loaded)"))
        }
        Err(e) => Err(format!("cannot read /proc/{pid}/maps: {e}")),
        Ok(maps) if maps.is_empty() => Err(format!("/proc/{pid}/maps is empty (the process is exiting, or another user's process this user may not trace)")),
        Ok(maps) => {
            let files = mapped_files_bytes(&maps);
            let read = |m: &MappedFile| -> Result<Vec<u8>, String> {
                // The mapped file itself (root), else the path if it is
                // still the same file.
                let map_file = proc_dir.join("map_files").join(&m.range);
                if let Ok(bytes) = read_limited(&map_file) {
                    return Ok(bytes);
                }
                let shown = escape(&m.path);
                if m.deleted {
                    return Err(format!("{shown} was deleted since the daemon mapped it, and /proc/{pid}/map_files is not readable (run as root)"));
                }
                read_limited(path_of(&m.path)).map_err(|e| format!("cannot read {shown}: {e}"))
            };
            // What is installed now at that path as the daemon sees it:
            // through its own root (`/proc/<pid>/root`: a daemon in a
            // chroot or another mount namespace, whose maps name paths of
            // its mounts), else the path as this process sees it (the
            // kernel shows a chroot's file by its path from our root).
            // The daemon's root as this process sees it (a chroot's
            // directory, e.g. an overlay's `merged/` mounted only in the
            // daemon's namespace): a mapped path below it is that path
            // inside the daemon's root.
            let root = fs::read_link(proc_dir.join("root")).ok().filter(|r| r != Path::new("/"));
            let installed = |p: &Path| {
                let inside = root.as_ref().and_then(|r| p.strip_prefix(r).ok()).map(|rel| proc_dir.join("root").join(rel));
                let rel = p.strip_prefix("/").unwrap_or(p);
                inside
                    .into_iter()
                    .chain([proc_dir.join("root").join(rel), p.to_path_buf()])
                    .find_map(|c| fs::metadata(c).ok())
                    .map(|md| (split_dev(md.dev()), md.ino()))
            };
            Ok(plugin_uses(&files, &read, &installed))
        }
    };
    DaemonStatus { name: name.to_string(), pid, plugins }
}

fn read_limited(path: &Path) -> Result<Vec<u8>, ReadError> {
    read_bounded(path, crate::elf::MAX_PLUGIN_FILE_LEN)
}

pub fn run(args: &StatusArgs) -> u8 {
    let list = match named_like_daemons() {
        Ok(l) => l,
        Err(e) => {
            crate::tool_error(escape_str(&e));
            return EXIT_USAGE;
        }
    };
    let mut statuses = Vec::new();
    let mut ignored = Vec::new();
    if !list.is_empty() {
        let users = trusted_users_of(&args.slurm_conf.clone().unwrap_or_else(default_slurm_conf));
        if let Some(note) = &users.note {
            eprintln!("gres-rs: {}", escape_str(note));
        }
        for (pid, name) in &list {
            let Some(facts) = facts_of(*pid, name) else { continue };
            match trust(&facts, &users) {
                Trust::Daemon => statuses.push(status_of(*pid, name)),
                Trust::Unverified(why) => statuses.push(DaemonStatus { name: name.clone(), pid: *pid, plugins: Err(why) }),
                Trust::Ignored(reason) => ignored.push(Ignored { name: name.clone(), pid: *pid, reason }),
            }
        }
    }
    match args.format {
        StatusFormat::Text => print!("{}", render_text(&statuses, &ignored)),
        StatusFormat::Json => println!("{}", render_json(&statuses, &ignored)),
    }
    exit_status(&statuses)
}

/// Whether a daemon runs one of our plugin files (not only the library).
fn runs_ours(plugins: &[PluginUse]) -> bool {
    plugins.iter().any(|u| u.ours && !is_library_file(&u.file))
}

/// 0 when a daemon of this host runs one of our plugin files, 1 when the
/// daemons that could be read run none (or no daemon runs), 2 when no
/// daemon could be looked at.  Ignored processes are not daemons.
pub fn exit_status(statuses: &[DaemonStatus]) -> u8 {
    let readable: Vec<&Vec<PluginUse>> = statuses.iter().filter_map(|s| s.plugins.as_ref().ok()).collect();
    if !statuses.is_empty() && readable.is_empty() {
        return EXIT_USAGE;
    }
    if readable.iter().any(|p| runs_ours(p)) {
        EXIT_OK
    } else {
        EXIT_PROBLEMS
    }
}

pub fn render_text(statuses: &[DaemonStatus], ignored: &[Ignored]) -> String {
    let mut s = String::new();
    if statuses.is_empty() {
        s.push_str("no slurmd, slurmstepd or slurmctld runs on this host\n");
    }
    for d in statuses {
        s.push_str(&format!("{} (pid {}):\n", escape_str(&d.name), d.pid));
        match &d.plugins {
            Err(e) => s.push_str(&format!("  unknown: {}\n", escape_str(e))),
            Ok(p) if p.is_empty() => s.push_str("  no GPU GRES or gpu plugin mapped\n"),
            Ok(p) => {
                for u in p {
                    let what = u.plugin_type.clone().unwrap_or_else(|| if is_library_file(&u.file) { "library".into() } else { u.file.clone() });
                    let who = if u.ours { "ours" } else { "stock" };
                    let release = u.release.as_ref().map(|r| format!("Slurm {r}")).unwrap_or_default();
                    let mut line = format!("  {:<12} {who:<6} {release:<14} {}", escape_str(&what), escape_str(&u.path));
                    if u.replaced {
                        line.push_str("  (replaced since the daemon started: restart it to load what is installed)");
                    }
                    if let Some(e) = &u.unreadable {
                        line.push_str(&format!("  ({})", escape_str(e)));
                    }
                    s.push_str(line.trim_end());
                    s.push('\n');
                }
            }
        }
    }
    for i in ignored {
        s.push_str(&format!("ignored: pid {} named {}: {}\n", i.pid, escape_str(&i.name), escape_str(&i.reason)));
    }
    if statuses.is_empty() {
        return s;
    }
    // Every daemon, not one of each name: one slurmstepd may run ours
    // and another, of a step started before an upgrade, not.
    let users: Vec<String> =
        statuses.iter().filter(|d| d.plugins.as_deref().is_ok_and(runs_ours)).map(|d| format!("{} (pid {})", escape_str(&d.name), d.pid)).collect();
    if users.is_empty() {
        s.push_str("our plugins are not in use\n");
    } else {
        s.push_str(&format!("our plugins are in use by: {}\n", users.join(", ")));
    }
    s
}

pub fn render_json(statuses: &[DaemonStatus], ignored: &[Ignored]) -> String {
    let e = |s: &str| serde_json::Value::from(escape_str(s));
    let eo = |s: &Option<String>| s.as_deref().map_or(serde_json::Value::Null, e);
    let daemons: Vec<serde_json::Value> = statuses
        .iter()
        .map(|d| {
            let mut o = serde_json::json!({"name": e(&d.name), "pid": d.pid});
            match &d.plugins {
                Err(err) => o["error"] = e(err),
                Ok(p) => {
                    o["plugins"] = p
                        .iter()
                        .map(|u| {
                            serde_json::json!({"file": e(&u.file), "path": e(&u.path), "plugin_type": eo(&u.plugin_type), "slurm_release": eo(&u.release), "ours": u.ours, "replaced": u.replaced, "unreadable": eo(&u.unreadable)})
                        })
                        .collect()
                }
            }
            o
        })
        .collect();
    let ignored: Vec<serde_json::Value> = ignored.iter().map(|i| serde_json::json!({"name": e(&i.name), "pid": i.pid, "reason": e(&i.reason)})).collect();
    serde_json::json!({"schema": 1, "tool": "gres-rs", "version": env!("CARGO_PKG_VERSION"), "built_for_slurm": slurm_gpu_gres::SLURM_VERSION, "daemons": daemons, "ignored": ignored})
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_gpu_gres::proc_maps::MAX_PATH_LEN;

    const MAPS: &str = "\
55d0c0000000-55d0c0010000 r--p 00000000 fd:01 100 /usr/sbin/slurmd
7f0000000000-7f0000001000 r-xp 00000000 fd:01 200 /opt/ours/gres_gpu.so
7f0000001000-7f0000002000 r--p 00001000 fd:01 200 /opt/ours/gres_gpu.so
7f0000010000-7f0000020000 r-xp 00000000 fd:01 300 /opt/ours/libgres_rs.so (deleted)
7f0000030000-7f0000031000 r-xp 00000000 fd:01 400 /usr/lib/x86_64-linux-gnu/slurm-wlm/gres_mps.so
7f0000040000-7f0000041000 r-xp 00000000 fd:01 500 /usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_generic.so
7f0000050000-7f0000051000 rw-p 00000000 00:00 0 [heap]
7f0000060000-7f0000061000 r-xp 00000000 fd:01 600 /usr/lib/x86_64-linux-gnu/slurm-wlm/select_cons_tres.so
";

    fn no_file(m: &MappedFile) -> Result<Vec<u8>, String> {
        Err(format!("no {}", escape(&m.path)))
    }

    #[test]
    fn ours_stock_and_replaced() {
        let files = mapped_files_bytes(MAPS.as_bytes());
        // gres_gpu.so is still the file mapped; gres_mps.so was replaced.
        let installed = |p: &Path| match p.to_str() {
            Some("/opt/ours/gres_gpu.so") => Some(((0xfd, 1), 200)),
            Some("/usr/lib/x86_64-linux-gnu/slurm-wlm/gres_mps.so") => Some(((0xfd, 1), 999)),
            Some("/usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_generic.so") => Some(((0xfd, 1), 500)),
            _ => None,
        };
        let uses = plugin_uses(&files, &no_file, &installed);
        let got: Vec<(&str, bool, bool)> = uses.iter().map(|u| (u.file.as_str(), u.ours, u.replaced)).collect();
        assert_eq!(got, vec![("gres_gpu.so", true, false), ("libgres_rs.so", true, true), ("gres_mps.so", false, true), ("gpu_generic.so", false, false)]);
        assert_eq!(uses[0].unreadable.as_deref(), Some("no /opt/ours/gres_gpu.so"));
        let d = vec![DaemonStatus { name: "slurmd".into(), pid: 7, plugins: Ok(uses) }];
        assert_eq!(exit_status(&d), EXIT_OK);
        let text = render_text(&d, &[]);
        assert!(text.contains("gres_mps.so  stock"), "{text}");
        assert!(text.ends_with("our plugins are in use by: slurmd (pid 7)\n"), "{text}");
    }

    fn stock() -> PluginUse {
        PluginUse {
            file: "gres_gpu.so".into(),
            path: "/s/gres_gpu.so".into(),
            plugin_type: None,
            release: None,
            ours: false,
            replaced: false,
            unreadable: None,
        }
    }

    #[test]
    fn exit_status_says_whether_ours_is_in_use() {
        let d = |plugins| vec![DaemonStatus { name: "slurmd".into(), pid: 1, plugins }];
        assert_eq!(exit_status(&d(Ok(vec![stock()]))), EXIT_PROBLEMS);
        assert_eq!(exit_status(&d(Err("denied".into()))), EXIT_USAGE);
        assert_eq!(exit_status(&[]), EXIT_PROBLEMS);
        assert!(render_text(&[], &[]).starts_with("no slurmd"));
        assert!(render_text(&d(Err("cannot read /proc/1/maps: Permission denied".into())), &[]).contains("unknown: cannot read /proc/1/maps"));
    }

    #[test]
    fn every_daemon_of_a_name_is_in_the_summary() {
        // Two slurmstepds: the older runs ours, the newer stock.  Keeping
        // one per name (the highest pid) said "not in use".
        let ours = PluginUse { path: "/o/gres_gpu.so".into(), ours: true, ..stock() };
        let d = vec![
            DaemonStatus { name: "slurmd".into(), pid: 5, plugins: Ok(vec![ours.clone()]) },
            DaemonStatus { name: "slurmstepd".into(), pid: 10, plugins: Ok(vec![ours]) },
            DaemonStatus { name: "slurmstepd".into(), pid: 20, plugins: Ok(vec![stock()]) },
        ];
        let text = render_text(&d, &[]);
        assert!(text.ends_with("our plugins are in use by: slurmd (pid 5), slurmstepd (pid 10)\n"), "{text}");
        assert!(text.contains("slurmstepd (pid 10):\n") && text.contains("slurmstepd (pid 20):\n"), "{text}");
    }

    #[test]
    fn escape_shows_what_a_terminal_would_act_on() {
        assert_eq!(escape(b"/opt/gres/gres_gpu.so"), "/opt/gres/gres_gpu.so");
        assert_eq!(escape(b"/tmp/\x1b[31mevil/x"), "/tmp/\\x1b[31mevil/x");
        assert_eq!(escape(b"a\nb\tc\rd\x00e\x7f"), "a\\nb\\tc\\rd\\x00e\\x7f");
        // Not UTF-8; a C1 CSI (U+009B); a right-to-left override; text
        // that is fine.
        assert_eq!(escape(b"\xff\xc3(x"), "\\xff\\xc3(x");
        assert_eq!(escape("\u{9b}31m".as_bytes()), "\\u{009b}31m");
        assert_eq!(escape("a\u{202e}b\u{200b}".as_bytes()), "a\\u{202e}b\\u{200b}");
        assert_eq!(escape("Grüße/日本".as_bytes()), "Grüße/日本");
        // Escaping twice changes nothing: a backslash stays.
        let once = escape(b"\x1b\\x1b\xff\n");
        assert_eq!(once, "\\x1b\\x1b\\xff\\n");
        assert_eq!(escape_str(&once), once);
    }

    #[test]
    fn paths_are_escaped_in_text_and_json() {
        let maps = b"7f00-7f01 r-xp 00000000 fd:01 7 /tmp/\x1b[31mevil\xff/gres_gpu.so\n7f02-7f03 r-xp 00000000 fd:01 8 /tmp/\x1b[31mevil\xff/libgres_rs.so\n";
        let uses = plugin_uses(&mapped_files_bytes(maps), &no_file, &|_: &Path| None);
        assert!(uses.iter().all(|u| u.ours), "{uses:?}");
        let d = vec![DaemonStatus { name: "slurmd".into(), pid: 7, plugins: Ok(uses) }];
        let i = vec![Ignored { name: "slurmd".into(), pid: 8, reason: "/proc/8/exe is /tmp/\x1b]0;x\x07/slurmd".into() }];
        let text = render_text(&d, &i);
        assert!(!text.bytes().any(|b| b.is_ascii_control() && b != b'\n'), "{text:?}");
        assert!(text.contains("/tmp/\\x1b[31mevil\\xff/gres_gpu.so"), "{text}");
        assert!(text.contains("ignored: pid 8 named slurmd: /proc/8/exe is /tmp/\\x1b]0;x\\x07/slurmd\n"), "{text}");
        let json = render_json(&d, &i);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["daemons"][0]["plugins"][0]["path"], "/tmp/\\x1b[31mevil\\xff/gres_gpu.so");
        assert_eq!(v["ignored"][0]["reason"], "/proc/8/exe is /tmp/\\x1b]0;x\\x07/slurmd");
        assert!(!json.contains("\\u001b") && !json.bytes().any(|b| b.is_ascii_control()), "{json}");
    }

    fn users() -> TrustedUsers {
        let passwd = "root:x:0:0::/root:/bin/sh\nslurm:x:64030:64030::/nonexistent:/usr/sbin/nologin\n";
        trusted_users(Ok([("SlurmUser", Some("slurm")), ("SlurmdUser", None)]), passwd)
    }

    fn real_slurmd(pid: u32, uid: u32) -> ProcFacts {
        ProcFacts {
            pid,
            name: "slurmd".into(),
            uids: Ok((uid, uid)),
            exe: Ok(ExeFile { path: b"/usr/sbin/slurmd-wlm".to_vec(), uid: 0, mode: 0o100755, regular: true }),
        }
    }

    #[test]
    fn slurm_user_from_slurm_conf() {
        let u = users();
        assert_eq!(u.uids, BTreeSet::from([0, 64030]));
        assert_eq!(u.who, "root or SlurmUser slurm (uid 64030)");
        assert_eq!(u.note, None);
        let numeric = trusted_users(Ok([("SlurmUser", Some("500")), ("SlurmdUser", Some("root"))]), "");
        assert_eq!(numeric.uids, BTreeSet::from([0, 500]));
        let unknown = trusted_users(Ok([("SlurmUser", Some("ghost")), ("SlurmdUser", None)]), "");
        assert_eq!(unknown.uids, BTreeSet::from([0]));
        assert_eq!(unknown.note.as_deref(), Some("SlurmUser ghost is not in /etc/passwd: its daemons are not trusted"));
        let unread = trusted_users(Err("cannot read /etc/slurm/slurm.conf".into()), "");
        assert_eq!((unread.uids, unread.who.as_str()), (BTreeSet::from([0]), "root"));
        assert_eq!(unread.note.as_deref(), Some("cannot read /etc/slurm/slurm.conf: SlurmUser unknown, only root's daemons are trusted"));
    }

    #[test]
    fn only_slurm_binaries_of_root_run_by_root_or_slurm_user_are_daemons() {
        let u = users();
        assert_eq!(trust(&real_slurmd(1, 0), &u), Trust::Daemon);
        assert_eq!(trust(&real_slurmd(1, 64030), &u), Trust::Daemon);
        let mut stepd = real_slurmd(2, 0);
        stepd.exe.as_mut().unwrap().path = b"/usr/sbin/slurmstepd (deleted)".to_vec();
        assert_eq!(trust(&stepd, &u), Trust::Daemon, "a binary upgraded under a running daemon");

        // The reviewer's process: nobody's, a copy of sleep in /tmp.
        let fake = ProcFacts {
            pid: 123,
            name: "slurmd".into(),
            uids: Ok((65534, 65534)),
            exe: Ok(ExeFile { path: b"/tmp/\x1b[31mevil/slurmd".to_vec(), uid: 65534, mode: 0o100755, regular: true }),
        };
        assert_eq!(
            trust(&fake, &u),
            Trust::Ignored(
                "runs as uid 65534, not as root or SlurmUser slurm (uid 64030); \
                 /proc/123/exe is /tmp/\\x1b[31mevil/slurmd, not a root-owned Slurm binary (owned by uid 65534)"
                    .into()
            )
        );
        // Each check alone.
        let with_exe = |path: &[u8], uid: u32, mode: u32| ProcFacts { exe: Ok(ExeFile { path: path.to_vec(), uid, mode, regular: true }), ..real_slurmd(9, 0) };
        let ignored = |p: ProcFacts| match trust(&p, &u) {
            Trust::Ignored(why) => why,
            t => panic!("{p:?}: {t:?}"),
        };
        assert_eq!(
            ignored(with_exe(b"/usr/bin/python3.11", 0, 0o100755)),
            "/proc/9/exe is /usr/bin/python3.11, not a root-owned Slurm binary (named python3.11)"
        );
        assert_eq!(ignored(with_exe(b"/opt/slurmd", 1000, 0o100755)), "/proc/9/exe is /opt/slurmd, not a root-owned Slurm binary (owned by uid 1000)");
        assert_eq!(
            ignored(with_exe(b"/opt/slurmd", 0, 0o100775)),
            "/proc/9/exe is /opt/slurmd, not a root-owned Slurm binary (writable by group or others (mode 0775))"
        );
        assert!(ignored(with_exe(b"/opt/slurmd", 0, 0o100757)).contains("mode 0757"));
        assert_eq!(
            ignored(ProcFacts { uids: Ok((0, 1000)), ..real_slurmd(9, 0) }),
            "runs as real uid 0, effective uid 1000, not as root or SlurmUser slurm (uid 64030)"
        );
        assert_eq!(
            ignored(ProcFacts { uids: Ok((1000, 0)), ..real_slurmd(9, 0) }),
            "runs as real uid 1000, effective uid 0, not as root or SlurmUser slurm (uid 64030)"
        );
        assert_eq!(ignored(ProcFacts { exe: Err((false, "No such file or directory".into())), ..real_slurmd(9, 0) }), "/proc/9/exe: No such file or directory");
        assert_eq!(
            ignored(ProcFacts { uids: Ok((1000, 1000)), exe: Err((true, "Permission denied".into())), ..real_slurmd(9, 0) }),
            "runs as uid 1000, not as root or SlurmUser slurm (uid 64030)"
        );
        // Root's daemon, whose executable this user may not see: shown as
        // unknown, never as ours.
        assert_eq!(
            trust(&ProcFacts { exe: Err((true, "Permission denied".into())), ..real_slurmd(9, 0) }, &u),
            Trust::Unverified("cannot check /proc/9/exe: Permission denied (run as root)".into())
        );
        // Without slurm.conf, only root.
        let root_only = trusted_users(Err("cannot read x".into()), "");
        assert!(matches!(trust(&real_slurmd(1, 64030), &root_only), Trust::Ignored(why) if why == "runs as uid 64030, not as root"));
    }

    #[test]
    fn uids_from_proc_status() {
        assert_eq!(uids_of(b"Name:\tslurmd\nUid:\t65534\t0\t0\t0\nGid:\t0\t0\t0\t0\n"), Some((65534, 0)));
        assert_eq!(uids_of(b"Name:\tx\n"), None);
        assert_eq!(uids_of(b"Uid:\tx\t0\n"), None);
        let own = uids_of(&read_bounded(Path::new("/proc/self/status"), MAX_PROC_TEXT_LEN).unwrap()).unwrap();
        assert_eq!(own.0, fs::metadata("/proc/self").unwrap().uid());
    }

    #[test]
    fn reads_of_proc_are_bounded() {
        // maps of more than the bound is refused, not read whole.
        let big = std::env::temp_dir().join(format!("gres-rs-status-maps-{}", std::process::id()));
        fs::File::create(&big).unwrap().set_len(MAX_MAPS_LEN + 1).unwrap();
        let e = read_bounded(&big, MAX_MAPS_LEN);
        let _ = fs::remove_file(&big);
        assert!(matches!(e, Err(ReadError::TooLarge { .. })), "{e:?}");
        // A mapped path longer than PATH_MAX is left out.
        let long = format!("7f00-7f01 r-xp 00000000 fd:01 7 /{}/gres_gpu.so\n", "d".repeat(MAX_PATH_LEN));
        assert!(mapped_files_bytes(long.as_bytes()).is_empty());
        assert_eq!(MAX_PATH_LEN, 4096);
        assert_eq!(MAX_MAPS_LEN, 16 << 20);
    }
}
