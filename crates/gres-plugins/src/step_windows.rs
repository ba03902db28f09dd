//! The job a fault hit, for every step (`step_xids = on`): in each step's
//! slurmstepd, when slurmstepd gives a GRES plugin the step's environment
//! (`job_set_env` for batch and interactive steps, `step_set_env` for the
//! others; once a step, as root, before the tasks are forked, on every
//! release), the plugin appends one record of the step's GPUs and the
//! time ([`gres_health::step_windows::StepStart`]) to the state directory,
//! and one more when that slurmstepd exits ([`step_ended`]).  `gres-rs
//! health` matches the kernel's XID lines against these windows.
//!
//! No NVML, no waiting: a few reads of `/proc`, one `open`, `fstat` and
//! `write(2)` a record, with the same checks as the step XID records
//! ([`crate::step_xids`]).  With the switch off: nothing but the health
//! file's one read per process.
//!
//! | release | batch, interactive (salloc) | srun steps | at the step's end |
//! |---|---|---|---|
//! | 22.05 | `gres_g_job_set_env` (`slurmstepd.c` `_step_setup`) | `gres_g_step_set_env` (`REQUEST_LAUNCH_TASKS`) | none for every step: `gres_g_step_hardware_fini` only with `tres_freq`; no `gres_fini` outside `MEMORY_LEAK_DEBUG` |
//! | 23.02 | same (`gres_g_job_set_env(step, 0)`) | same | same |
//! | 23.11 - 26.05 | same, and steps of an external launcher (`LAUNCH_EXT_LAUNCHER`) | same | same |
//!
//! The end is therefore taken when slurmstepd exits (an exit handler the
//! ABI layer registers with the first record), which every step's
//! slurmstepd does after its tasks ended.

use crate::step_xids;
use gres_core::model::Bitmap;
use gres_health::step_windows::{StepEnd, StepStart, OLD_FILE, WINDOWS_FILE};
use gres_health::steps::StepId;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// What the end record repeats: the boot, the step and the process.
struct Began {
    boot: String,
    step: Option<StepId>,
    pid: u32,
}

static BEGAN: Mutex<Option<Began>> = Mutex::new(None);

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn boot_id() -> String {
    step_xids::read_proc("/proc/sys/kernel/random/boot_id").map(|b| String::from_utf8_lossy(&b).trim().to_string()).unwrap_or_default()
}

/// A step began with `alloc` (the GRES bitmap slurmstepd gave the set_env
/// call).  Returns whether a start
/// record was written for the first time in this process (the caller then
/// arranges for [`step_ended`] at exit).
pub fn step_began(alloc: Option<&Bitmap>) -> bool {
    let Some(settings) = step_xids::settings() else { return false };
    let Some(alloc) = alloc else { return false };
    let gpus: Vec<u32> = alloc.ones().map(|i| i as u32).collect();
    if gpus.is_empty() {
        return false;
    }
    // Only in a step's slurmstepd, which has set its title or is in the
    // step's cgroup.
    let Some(step) = step_xids::this_step() else { return false };
    let boot = boot_id();
    let pid = std::process::id();
    // No user here: the step's environment is the user's (srun's,
    // sbatch's), SLURM_JOB_UID included, and is not trusted; `gres-rs
    // health` asks slurmctld for the job's user.
    let record = StepStart { boot: boot.clone(), start: now(), step: Some(step), uid: None, pid, gpus };
    if let Err(e) = step_xids::append_lines(&settings.state_dir, WINDOWS_FILE, &[record.render()], Some(OLD_FILE)) {
        tracing::error!("gres-rs: step {step}: its GPUs were not recorded in {}: {e}", settings.state_dir.display());
        return false;
    }
    let mut began = BEGAN.lock().unwrap_or_else(PoisonError::into_inner);
    let first = began.is_none();
    *began = Some(Began { boot, step: Some(step), pid });
    first
}

/// The step's slurmstepd exits: its end record, once, in the process that
/// wrote the start (never in a forked task).  Nothing is logged: Slurm's
/// log may be gone by then.
pub fn step_ended() {
    let Some(settings) = step_xids::settings() else { return };
    let Some(b) = BEGAN.lock().unwrap_or_else(PoisonError::into_inner).take() else { return };
    if b.pid != std::process::id() {
        return;
    }
    let record = StepEnd { boot: b.boot, end: now(), step: b.step, pid: b.pid };
    let _ = step_xids::append_lines(&settings.state_dir, WINDOWS_FILE, &[record.render()], Some(OLD_FILE));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Root only: the checks are about root's files.
    #[test]
    fn windows_rotate_rather_than_stop() {
        if fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1) != 0 {
            eprintln!("skipped: not root");
            return;
        }
        let dir = std::env::temp_dir().join(format!("gres-plugins-windows-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let state = dir.join("state");
        fs::create_dir_all(&dir).unwrap();
        let line = StepStart { boot: "ab".into(), start: 1, step: StepId::parse("1.0"), uid: None, pid: 2, gpus: vec![0] }.render();
        step_xids::append_lines(&state, WINDOWS_FILE, std::slice::from_ref(&line), Some(OLD_FILE)).unwrap();
        let file = state.join(WINDOWS_FILE);
        assert_eq!(fs::metadata(&file).unwrap().mode() & 0o7777, 0o600);
        fs::write(&file, vec![b'#'; gres_health::step_windows::MAX_FILE as usize - 10]).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        step_xids::append_lines(&state, WINDOWS_FILE, std::slice::from_ref(&line), Some(OLD_FILE)).unwrap();
        assert_eq!(fs::read_to_string(&file).unwrap(), line);
        assert_eq!(fs::metadata(state.join(OLD_FILE)).unwrap().len(), gres_health::step_windows::MAX_FILE - 10);
        fs::remove_dir_all(&dir).unwrap();
    }
}

/// What a step's window costs in instructions: run by hand under callgrind
/// as a process titled like a slurmstepd (`exec -a 'slurmstepd: [1.0]'`),
/// with `GRES_RS_HEALTH_CONF` and `GRES_RS_STATE_DIR` (test build):
/// `--toggle-collect` on [`step_began`] and [`step_ended`] counts them.
#[cfg(all(test, feature = "test-hooks"))]
mod cost {
    use gres_health::steps::StepId;

    #[test]
    #[ignore = "a measurement, run under callgrind by hand"]
    fn one_step_window() {
        // The health file is read once a process, switch on or off: not
        // the window's cost.
        assert!(crate::step_xids::settings().is_some(), "step_xids is not on");
        let alloc = gres_core::model::Bitmap::from_indices(2, &[0]);
        if super::step_began(Some(&alloc)) {
            super::step_ended();
            return;
        }
        // Under valgrind /proc/self/cmdline is valgrind's, not the title:
        // step_began stopped after reading it; the two records' writes
        // (each with its render) are then counted on their own.
        let dir = &crate::step_xids::settings().expect("on").state_dir;
        for _ in 0..2 {
            let line = super::StepStart { boot: super::boot_id(), start: super::now(), step: StepId::parse("7.0"), uid: None, pid: 1, gpus: vec![0] }.render();
            crate::step_xids::append_lines(dir, super::WINDOWS_FILE, &[line], Some(super::OLD_FILE)).expect("written");
        }
    }
}
