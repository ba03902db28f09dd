//! The job a fault hit: with `step_xids = on` in the site's health file,
//! our gpu/nvml in a step's slurmstepd registers the step's GPUs for NVML's
//! XID critical errors when the step starts ([`step_start`], from
//! `gpu_p_step_hardware_init`) and collects what NVML queued when it ends
//! ([`step_end`], from `gpu_p_step_hardware_fini`, no waiting).  Each XID
//! is logged once at error level (slurmstepd logs to slurmd's log) with
//! the job, step, GPU and XID, and appended as a record
//! ([`gres_health::steps`]) to the state directory for `gres-rs health`.
//!
//! With the switch off (the default) this costs one read of the health
//! file per process (a `stat` when there is none) and nothing else: no
//! NVML call, no other file.
//!
//! The state directory must be a directory (not a link) owned by root and
//! writable by no one else; it is made (0700) when missing.  The records'
//! file is opened with `O_NOFOLLOW`, made 0600, refused when it is not a
//! regular root-owned file with one link and no group or other
//! permission, and each record is one `write(2)` on an `O_APPEND`
//! descriptor; no record is appended once it holds
//! [`gres_health::steps::MAX_FILE`] bytes.

use crate::nvml::step_watch::{self, StepWatch};
use crate::nvml::{Paths, XidWatch};
use gres_core::host::Host;
use gres_core::model::Bitmap;
use gres_health::fault::GpuRef;
use gres_health::steps::{self, StepId, StepXid, MAX_FILE, RECORDS_FILE};
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The site's health file, which `gres-rs health` reads too.
pub const DEFAULT_CONFIG: &str = "/etc/slurm/gres-rs-health.conf";

/// Where the records go, beside `gres-rs health`'s cursor.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/gres-rs";

/// Each NVML call's deadline: slurmstepd waits for it when a step starts
/// and ends.
const DEADLINE: Duration = Duration::from_secs(2);

/// What `step_xids = on` needs; `None` when off.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) state_dir: PathBuf,
}

/// The setting, read once a process.
pub(crate) fn settings() -> Option<&'static Settings> {
    static SETTINGS: OnceLock<Option<Settings>> = OnceLock::new();
    SETTINGS.get_or_init(|| load(&config_path(), state_dir())).as_ref()
}

fn load(config: &Path, state_dir: PathBuf) -> Option<Settings> {
    if fs::symlink_metadata(config).is_err() {
        return None;
    }
    match gres_health::overrides::load(config) {
        Ok(site) if site.step_xids => Some(Settings { state_dir }),
        Ok(_) => None,
        Err(e) => {
            tracing::error!("gres-rs: {e}; step_xids is off");
            None
        }
    }
}

#[cfg(not(feature = "test-hooks"))]
fn config_path() -> PathBuf {
    PathBuf::from(DEFAULT_CONFIG)
}

#[cfg(not(feature = "test-hooks"))]
fn state_dir() -> PathBuf {
    PathBuf::from(DEFAULT_STATE_DIR)
}

/// Test builds (cargo feature `test-hooks`, never in a release):
/// `GRES_RS_HEALTH_CONF` and `GRES_RS_STATE_DIR` in the daemon's
/// environment, where set.
#[cfg(feature = "test-hooks")]
fn config_path() -> PathBuf {
    std::env::var_os("GRES_RS_HEALTH_CONF").filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from(DEFAULT_CONFIG), PathBuf::from)
}

#[cfg(feature = "test-hooks")]
fn state_dir() -> PathBuf {
    std::env::var_os("GRES_RS_STATE_DIR").filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from(DEFAULT_STATE_DIR), PathBuf::from)
}

/// The step's watch, from its start to its end (one step a slurmstepd).
static WATCH: Mutex<Option<StepWatch>> = Mutex::new(None);

/// The NVML indexes of the step's GPUs, as `--gpu-freq` takes them.
fn step_gpus(host: &dyn Host, usable: &Bitmap) -> Vec<u32> {
    if host.use_local_device_index() {
        (0..usable.count() as u32).collect()
    } else {
        usable.ones().map(|i| i as u32).collect()
    }
}

fn log_problems(when: &str, w: &XidWatch) {
    if let Some(why) = &w.unusable {
        tracing::error!("gres-rs: step XID watch ({when}): {why}");
    }
    if let Some(h) = &w.hang {
        tracing::error!("gres-rs: step XID watch ({when}): {h}");
    }
    for (gpu, e) in &w.errors {
        match gpu {
            Some(g) => tracing::info!("gres-rs: step XID watch ({when}): GPU {g}: {e}"),
            None => tracing::info!("gres-rs: step XID watch ({when}): {e}"),
        }
    }
}

/// Register the step's GPUs for XIDs, when `step_xids` is on.
pub fn step_start(host: &dyn Host, usable: Option<&Bitmap>, paths: &Paths) {
    let Some(_) = settings() else { return };
    let Some(usable) = usable else { return };
    let gpus = step_gpus(host, usable);
    if gpus.is_empty() {
        return;
    }
    let (first, watch) = step_watch::start(paths, &gpus, DEADLINE);
    log_problems("step start", &first);
    tracing::debug!("gres-rs: step XID watch on GPUs {:?}", first.registered);
    let old = std::mem::replace(&mut *WATCH.lock().unwrap_or_else(PoisonError::into_inner), watch);
    // A watch never collected (a second init): dropped, its set freed.
    drop(old);
}

/// Collect the step's XIDs, log and record them, when `step_xids` is on.
pub fn step_end() {
    let Some(settings) = settings() else { return };
    let Some(watch) = WATCH.lock().unwrap_or_else(PoisonError::into_inner).take() else { return };
    let end = watch.collect();
    log_problems("step end", &end);
    if end.events.is_empty() {
        return;
    }
    let time = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let step = this_step();
    let pid = std::process::id();
    let records: Vec<StepXid> = end
        .events
        .iter()
        .map(|e| {
            let ids = end.ids.iter().find(|g| Some(g.index) == e.gpu);
            let gpu = GpuRef { index: e.gpu, uuid: ids.and_then(|g| g.uuid.clone()), pci: ids.and_then(|g| g.pci.clone()) };
            StepXid { time, step, pid, gpu, xid: u32::try_from(e.xid).unwrap_or(u32::MAX) }
        })
        .collect();
    for r in &records {
        tracing::error!("{}", r.log_line());
    }
    if let Err(e) = append(&settings.state_dir, &records) {
        tracing::error!("gres-rs: the step's XIDs were not recorded in {}: {e}", settings.state_dir.display());
    }
}

/// Read at most 4 KiB of a /proc file of this process.
pub(crate) fn read_proc(path: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    fs::File::open(path).ok()?.take(4096).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The step this slurmstepd runs: its process title, else its cgroup.
pub(crate) fn this_step() -> Option<StepId> {
    read_proc("/proc/self/cmdline")
        .and_then(|c| steps::from_proc_title(&c))
        .or_else(|| read_proc("/proc/self/cgroup").and_then(|c| steps::from_cgroup(&String::from_utf8_lossy(&c))))
}

/// Make sure `dir` is a root-owned directory no one else may write.
pub(crate) fn check_dir(dir: &Path) -> Result<(), String> {
    let meta = match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            DirBuilder::new().mode(0o700).create(dir).map_err(|e| format!("cannot make it: {e}"))?;
            fs::symlink_metadata(dir).map_err(|e| e.to_string())?
        }
        r => r.map_err(|e| e.to_string())?,
    };
    if !meta.file_type().is_dir() {
        return Err("not a directory (a symbolic link is refused)".into());
    }
    if meta.uid() != 0 {
        return Err(format!("owned by uid {}, not root", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!("writable by others (mode {:o})", meta.mode() & 0o7777));
    }
    Ok(())
}

/// Append `records` to the records' file in `dir`, one write each.
fn append(dir: &Path, records: &[StepXid]) -> Result<(), String> {
    let lines: Vec<String> = records.iter().map(StepXid::render).collect();
    append_lines(dir, RECORDS_FILE, &lines, None)
}

/// Open `dir`/`name` to append: `O_NOFOLLOW`, made 0600, refused unless a
/// root-owned regular file with one link and no group or other
/// permission; with its size.
fn open_safe(path: &Path) -> Result<(fs::File, u64), String> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.file_type().is_file() || meta.uid() != 0 || meta.nlink() != 1 || meta.mode() & 0o077 != 0 {
        return Err(format!("{}: not a root-owned 0600 regular file with one link; left alone", path.display()));
    }
    Ok((file, meta.len()))
}

/// Append `lines` (each at most 512 bytes, `\n` included) to `dir`/`name`
/// in the state directory, one `write(2)` each.  At [`MAX_FILE`] bytes the
/// file is renamed to `rotate_to` (replacing it) and begun again; without
/// `rotate_to`, nothing more is appended (an error).
pub(crate) fn append_lines(dir: &Path, name: &str, lines: &[String], rotate_to: Option<&str>) -> Result<(), String> {
    check_dir(dir)?;
    let path = dir.join(name);
    let (mut file, mut size) = open_safe(&path)?;
    for line in lines {
        if size + line.len() as u64 > MAX_FILE {
            let Some(old) = rotate_to else {
                return Err(format!(
                    "{} holds {size} bytes, the most it may ({MAX_FILE}); `gres-rs health --jobs` lists it, remove it once read",
                    path.display()
                ));
            };
            fs::rename(&path, dir.join(old)).map_err(|e| format!("{}: cannot rotate: {e}", path.display()))?;
            (file, size) = open_safe(&path)?;
        }
        match file.write(line.as_bytes()) {
            Ok(n) if n == line.len() => size += n as u64,
            Ok(n) => return Err(format!("{}: short write ({n} of {} bytes)", path.display(), line.len())),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gres-plugins-steps-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    fn record(xid: u32) -> StepXid {
        StepXid {
            time: 1,
            step: StepId::parse("12.0"),
            pid: 7,
            gpu: GpuRef { index: Some(3), uuid: Some("GPU-1".into()), pci: Some("0000:41:00.0".into()) },
            xid,
        }
    }

    #[test]
    fn the_switch_is_off_without_the_file_or_the_word() {
        let dir = scratch("switch");
        assert!(load(&dir.join("none.conf"), dir.clone()).is_none());
        fs::write(dir.join("off.conf"), "xid 13 = warn\n").unwrap();
        assert!(load(&dir.join("off.conf"), dir.clone()).is_none());
        fs::write(dir.join("bad.conf"), "step_xids = maybe\n").unwrap();
        assert!(load(&dir.join("bad.conf"), dir.clone()).is_none());
        fs::write(dir.join("on.conf"), "step_xids = on\n").unwrap();
        assert_eq!(load(&dir.join("on.conf"), dir.join("state")).map(|s| s.state_dir), Some(dir.join("state")));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Root only: the checks are about root's files.
    #[test]
    fn records_are_appended_to_a_safe_place_only() {
        if fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1) != 0 {
            eprintln!("skipped: not root");
            return;
        }
        let dir = scratch("append");
        let state = dir.join("state");
        append(&state, &[record(79), record(48)]).unwrap();
        append(&state, &[record(13)]).unwrap();
        let m = fs::metadata(&state).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o700);
        let file = state.join(RECORDS_FILE);
        assert_eq!(fs::metadata(&file).unwrap().mode() & 0o7777, 0o600);
        let (got, bad) = steps::parse_records(&fs::read_to_string(&file).unwrap());
        assert!(bad.is_empty());
        assert_eq!(got.iter().map(|r| r.xid).collect::<Vec<_>>(), vec![79, 48, 13]);

        // A symbolic link planted as the file is not followed.
        let target = dir.join("target");
        fs::write(&target, "").unwrap();
        fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&target, &file).unwrap();
        assert!(append(&state, &[record(79)]).is_err());
        assert_eq!(fs::read_to_string(&target).unwrap(), "");
        fs::remove_file(&file).unwrap();

        // A file others may read, or a hard link, is left alone.
        fs::write(&file, "").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(append(&state, &[record(79)]).unwrap_err().contains("left alone"));
        fs::remove_file(&file).unwrap();

        // A state directory others may write, or a link to one, is refused.
        fs::set_permissions(&state, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(append(&state, &[record(79)]).unwrap_err().contains("writable by others"));
        fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&state, &link).unwrap();
        assert!(append(&link, &[record(79)]).unwrap_err().contains("symbolic link"));
        assert!(!file.exists());

        // A full file takes no more.
        fs::write(&file, vec![b'#'; MAX_FILE as usize - 10]).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(append(&state, &[record(79)]).unwrap_err().contains("the most it may"));
        assert_eq!(fs::metadata(&file).unwrap().len(), MAX_FILE - 10);
        fs::remove_dir_all(&dir).unwrap();
    }
}
