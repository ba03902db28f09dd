//! `gres-rs status`: which GRES and gpu plugin files the running Slurm
//! daemons of this host have mapped (slurmd, slurmstepd, slurmctld), ours or
//! stock, their release, and whether what is mapped is what is installed
//! now.  Read from `/proc/<pid>/maps`; the file itself through
//! `/proc/<pid>/map_files/` where the kernel allows (root), so that a file
//! replaced or deleted since the daemon started is still read as mapped.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use slurm_gpu_gres::LIBRARY_FILE;

use crate::install::{plugin_info, version_text};
use crate::{StatusArgs, StatusFormat, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE};

/// The daemons whose plugins are shown, by `/proc/<pid>/comm`.
pub const DAEMONS: [&str; 3] = ["slurmd", "slurmstepd", "slurmctld"];

pub use slurm_gpu_gres::core::proc_maps::{mapped_files, split_dev, Mapped};

/// Whether a file name is one of the plugin files shown: GRES plugins of
/// GPUs (`gres_gpu.so`, `gres_mps.so`, `gres_shard.so`), any gpu plugin
/// (`gpu_nvml.so`, `gpu_generic.so`, ...), and our library.
fn shown(name: &str) -> bool {
    matches!(name, "gres_gpu.so" | "gres_mps.so" | "gres_shard.so") || (name.starts_with("gpu_") && name.ends_with(".so")) || name == LIBRARY_FILE
}

/// What is known of one mapped plugin file.
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

/// Which file is at a path: (`major:minor` of its file system, inode).
pub type FileKey = ((u32, u32), u64);

/// The plugin files of one process, from its mapped files.  `read` gives
/// the contents of a mapped file (from `map_files` or the path);
/// `installed` the current (dev, inode) at a path.
pub fn plugin_uses(files: &[Mapped], read: &dyn Fn(&Mapped) -> Result<Vec<u8>, String>, installed: &dyn Fn(&str) -> Option<FileKey>) -> Vec<PluginUse> {
    let dir_of = |p: &str| Path::new(p).parent().map(Path::to_path_buf).unwrap_or_default();
    let library_dirs: Vec<PathBuf> = files.iter().filter(|m| file_name(&m.path) == LIBRARY_FILE).map(|m| dir_of(&m.path)).collect();
    let mut out = Vec::new();
    for m in files {
        let file = file_name(&m.path);
        if !shown(&file) {
            continue;
        }
        let replaced = m.deleted || installed(&m.path) != Some((m.dev, m.inode));
        let ours = file == LIBRARY_FILE || library_dirs.contains(&dir_of(&m.path));
        let (mut plugin_type, mut release, mut unreadable) = (None, None, None);
        if file != LIBRARY_FILE {
            match read(m).and_then(|bytes| plugin_info(&bytes)) {
                Ok(info) => {
                    plugin_type = info.plugin_type;
                    release = Some(version_text(info.version));
                }
                Err(e) => unreadable = Some(e),
            }
        }
        out.push(PluginUse { file, path: m.path.clone(), plugin_type, release, ours, replaced, unreadable });
    }
    out
}

fn file_name(path: &str) -> String {
    Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The daemons of this host, by pid.
fn daemons() -> Result<Vec<(u32, String)>, String> {
    let entries = fs::read_dir("/proc").map_err(|e| format!("cannot list /proc: {e}"))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(comm) = fs::read_to_string(entry.path().join("comm")) else { continue };
        let comm = comm.trim_end();
        // A daemon that has exited but is not reaped yet maps nothing.
        let zombie = fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|st| st.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
            .unwrap_or(false);
        if DAEMONS.contains(&comm) && !zombie {
            out.push((pid, comm.to_string()));
        }
    }
    out.sort();
    Ok(out)
}

fn status_of(pid: u32, name: &str) -> DaemonStatus {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let plugins = match fs::read_to_string(proc_dir.join("maps")) {
        Err(e) => Err(format!(
            "cannot read /proc/{pid}/maps: {e}{}",
            if e.kind() == std::io::ErrorKind::PermissionDenied { " (run as root to see what it loaded)" } else { "" }
        )),
        Ok(maps) if maps.is_empty() => Err(format!("/proc/{pid}/maps is empty (the process is exiting, or another user's process this user may not trace)")),
        Ok(maps) => {
            let files = mapped_files(&maps);
            let read = |m: &Mapped| -> Result<Vec<u8>, String> {
                // The mapped file itself (root), else the path if it is
                // still the same file.
                let map_file = proc_dir.join("map_files").join(&m.range);
                if let Ok(bytes) = read_limited(&map_file) {
                    return Ok(bytes);
                }
                if m.deleted {
                    return Err(format!("{} was deleted since the daemon mapped it, and /proc/{pid}/map_files is not readable (run as root)", m.path));
                }
                read_limited(Path::new(&m.path)).map_err(|e| format!("cannot read {}: {e}", m.path))
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
            let installed = |p: &str| {
                let inside = root.as_ref().and_then(|r| Path::new(p).strip_prefix(r).ok()).map(|rel| proc_dir.join("root").join(rel));
                let rel = p.strip_prefix('/').unwrap_or(p);
                inside
                    .into_iter()
                    .chain([proc_dir.join("root").join(rel), PathBuf::from(p)])
                    .find_map(|c| fs::metadata(c).ok())
                    .map(|md| (split_dev(md.dev()), md.ino()))
            };
            Ok(plugin_uses(&files, &read, &installed))
        }
    };
    DaemonStatus { name: name.to_string(), pid, plugins }
}

fn read_limited(path: &Path) -> Result<Vec<u8>, slurm_gpu_gres::core::files::ReadError> {
    slurm_gpu_gres::core::files::read_bounded(path, crate::install::MAX_PLUGIN_FILE_LEN)
}

pub fn run(args: &StatusArgs) -> u8 {
    let list = match daemons() {
        Ok(l) => l,
        Err(e) => {
            crate::tool_error(e);
            return EXIT_USAGE;
        }
    };
    let statuses: Vec<DaemonStatus> = list.iter().map(|(pid, name)| status_of(*pid, name)).collect();
    match args.format {
        StatusFormat::Text => print!("{}", render_text(&statuses)),
        StatusFormat::Json => println!("{}", render_json(&statuses)),
    }
    exit_status(&statuses)
}

/// 0 when a daemon of this host runs one of our plugin files, 1 when the
/// daemons that could be read run none (or no daemon runs), 2 when no
/// daemon could be looked at.
pub fn exit_status(statuses: &[DaemonStatus]) -> u8 {
    let readable: Vec<&Vec<PluginUse>> = statuses.iter().filter_map(|s| s.plugins.as_ref().ok()).collect();
    if !statuses.is_empty() && readable.is_empty() {
        return EXIT_USAGE;
    }
    if readable.iter().any(|p| p.iter().any(|u| u.ours && u.file != LIBRARY_FILE)) {
        EXIT_OK
    } else {
        EXIT_PROBLEMS
    }
}

pub fn render_text(statuses: &[DaemonStatus]) -> String {
    let mut s = String::new();
    if statuses.is_empty() {
        s.push_str("no slurmd, slurmstepd or slurmctld runs on this host\n");
        return s;
    }
    for d in statuses {
        s.push_str(&format!("{} (pid {}):\n", d.name, d.pid));
        match &d.plugins {
            Err(e) => s.push_str(&format!("  unknown: {e}\n")),
            Ok(p) if p.is_empty() => s.push_str("  no GPU GRES or gpu plugin mapped\n"),
            Ok(p) => {
                for u in p {
                    let what = u.plugin_type.clone().unwrap_or_else(|| if u.file == LIBRARY_FILE { "library".into() } else { u.file.clone() });
                    let who = if u.ours { "ours" } else { "stock" };
                    let release = u.release.as_ref().map(|r| format!("Slurm {r}")).unwrap_or_default();
                    let mut line = format!("  {what:<12} {who:<6} {release:<14} {}", u.path);
                    if u.replaced {
                        line.push_str("  (replaced since the daemon started: restart it to load what is installed)");
                    }
                    if let Some(e) = &u.unreadable {
                        line.push_str(&format!("  ({e})"));
                    }
                    s.push_str(line.trim_end());
                    s.push('\n');
                }
            }
        }
    }
    let ours: BTreeMap<&str, bool> =
        statuses.iter().map(|d| (d.name.as_str(), d.plugins.as_ref().is_ok_and(|p| p.iter().any(|u| u.ours && u.file != LIBRARY_FILE)))).collect();
    let users: Vec<&str> = ours.iter().filter(|(_, &o)| o).map(|(n, _)| *n).collect();
    if users.is_empty() {
        s.push_str("our plugins are not in use\n");
    } else {
        s.push_str(&format!("our plugins are in use by: {}\n", users.join(", ")));
    }
    s
}

pub fn render_json(statuses: &[DaemonStatus]) -> String {
    let daemons: Vec<serde_json::Value> = statuses
        .iter()
        .map(|d| {
            let mut o = serde_json::json!({"name": d.name, "pid": d.pid});
            match &d.plugins {
                Err(e) => o["error"] = serde_json::Value::from(e.as_str()),
                Ok(p) => {
                    o["plugins"] = p
                        .iter()
                        .map(|u| {
                            serde_json::json!({"file": u.file, "path": u.path, "plugin_type": u.plugin_type, "slurm_release": u.release, "ours": u.ours, "replaced": u.replaced, "unreadable": u.unreadable})
                        })
                        .collect()
                }
            }
            o
        })
        .collect();
    serde_json::json!({"schema": 1, "tool": "gres-rs", "version": env!("CARGO_PKG_VERSION"), "built_for_slurm": slurm_gpu_gres::SLURM_VERSION, "daemons": daemons}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn ours_stock_and_replaced() {
        let files = mapped_files(MAPS);
        let read = |m: &Mapped| -> Result<Vec<u8>, String> { Err(format!("no {}", m.path)) };
        // gres_gpu.so is still the file mapped; gres_mps.so was replaced.
        let installed = |p: &str| match p {
            "/opt/ours/gres_gpu.so" => Some(((0xfd, 1), 200)),
            "/usr/lib/x86_64-linux-gnu/slurm-wlm/gres_mps.so" => Some(((0xfd, 1), 999)),
            "/usr/lib/x86_64-linux-gnu/slurm-wlm/gpu_generic.so" => Some(((0xfd, 1), 500)),
            _ => None,
        };
        let uses = plugin_uses(&files, &read, &installed);
        let got: Vec<(&str, bool, bool)> = uses.iter().map(|u| (u.file.as_str(), u.ours, u.replaced)).collect();
        assert_eq!(got, vec![("gres_gpu.so", true, false), ("libgres_rs.so", true, true), ("gres_mps.so", false, true), ("gpu_generic.so", false, false)]);
        assert_eq!(uses[0].unreadable.as_deref(), Some("no /opt/ours/gres_gpu.so"));
        let d = vec![DaemonStatus { name: "slurmd".into(), pid: 7, plugins: Ok(uses) }];
        assert_eq!(exit_status(&d), EXIT_OK);
        let text = render_text(&d);
        assert!(text.contains("gres_mps.so      stock") || text.contains("stock"), "{text}");
        assert!(text.ends_with("our plugins are in use by: slurmd\n"), "{text}");
    }

    #[test]
    fn exit_status_says_whether_ours_is_in_use() {
        let stock = PluginUse {
            file: "gres_gpu.so".into(),
            path: "/s/gres_gpu.so".into(),
            plugin_type: None,
            release: None,
            ours: false,
            replaced: false,
            unreadable: None,
        };
        let d = |plugins| vec![DaemonStatus { name: "slurmd".into(), pid: 1, plugins }];
        assert_eq!(exit_status(&d(Ok(vec![stock.clone()]))), EXIT_PROBLEMS);
        assert_eq!(exit_status(&d(Err("denied".into()))), EXIT_USAGE);
        assert_eq!(exit_status(&[]), EXIT_PROBLEMS);
        assert!(render_text(&[]).starts_with("no slurmd"));
        assert!(render_text(&d(Err("cannot read /proc/1/maps: Permission denied".into()))).contains("unknown: cannot read /proc/1/maps"));
    }
}
