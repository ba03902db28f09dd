//! A Slurm job step's ids as Slurm writes them (`12.0`, `12.batch`,
//! `12.0+1`), and where a slurmstepd finds its own: its process title or
//! its cgroup.

use std::fmt;

/// Slurm's step id numbers that have names (`slurm.h`).
const PENDING: u32 = 0xffff_fffd;
const EXTERN: u32 = 0xffff_fffc;
const BATCH: u32 = 0xffff_fffb;
const INTERACTIVE: u32 = 0xffff_fffa;

/// A job step, as Slurm names it in logs (`12.0`, `12.batch`, `12.0+1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepId {
    /// The job id.
    pub job: u32,
    /// The step id (Slurm's numbers for batch, extern, ...).
    pub step: u32,
    /// The component of a heterogeneous step.
    pub het_comp: Option<u32>,
}

impl StepId {
    /// The step part (`0`, `batch`, `0+1`).
    pub fn step_text(&self) -> String {
        let step = match self.step {
            BATCH => "batch".to_string(),
            EXTERN => "extern".to_string(),
            INTERACTIVE => "interactive".to_string(),
            PENDING => "TDB".to_string(),
            n => n.to_string(),
        };
        match self.het_comp {
            Some(c) => format!("{step}+{c}"),
            None => step,
        }
    }

    /// Parse `<job>.<step>[+<comp>]` as Slurm writes it.
    pub fn parse(s: &str) -> Option<StepId> {
        let (job, step) = s.split_once('.')?;
        Some(StepId { job: parse_num(job)?, ..parse_step(step)? })
    }
}

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.job, self.step_text())
    }
}

pub(crate) fn parse_num(s: &str) -> Option<u32> {
    (!s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// The step part of a step id, with job 0.
pub(crate) fn parse_step(s: &str) -> Option<StepId> {
    let (step, het_comp) = match s.split_once('+') {
        Some((a, b)) => (a, Some(parse_num(b)?)),
        None => (s, None),
    };
    let step = match step {
        "batch" => BATCH,
        "extern" => EXTERN,
        "interactive" => INTERACTIVE,
        "TDB" | "TBD" => PENDING,
        n => parse_num(n)?,
    };
    Some(StepId { job: 0, step, het_comp })
}

/// The step a slurmstepd runs, from its process title (the NUL-separated
/// bytes of `/proc/self/cmdline`): `slurmstepd: [12.0]`, 24.05 on also
/// `[12.0 stepmgr]`.
pub fn from_proc_title(cmdline: &[u8]) -> Option<StepId> {
    let text = String::from_utf8_lossy(cmdline);
    let title = text.split('\0').next()?;
    let rest = title.strip_prefix("slurmstepd: [")?;
    let inside = rest.split(']').next()?;
    let id = inside.split(' ').next()?;
    StepId::parse(id).filter(|s| s.job != 0)
}

/// The step a process runs in, from its `/proc/self/cgroup`: the first
/// line whose path has `job_<id>/step_<id>` (Slurm's cgroup v2 layout;
/// cgroup v1's is `job_<id>/step_<id>` too, under `uid_<n>`).
pub fn from_cgroup(text: &str) -> Option<StepId> {
    text.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        let parts: Vec<&str> = path.split('/').collect();
        parts.windows(2).find_map(|w| {
            let job = parse_num(w[0].strip_prefix("job_")?)?;
            let step = parse_step(w[1].strip_prefix("step_")?)?;
            (job != 0).then_some(StepId { job, ..step })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_from_the_process_title() {
        let id = |s: &str| from_proc_title(s.as_bytes()).map(|s| s.to_string());
        assert_eq!(id("slurmstepd: [12.0]\0\0\0"), Some("12.0".into()));
        assert_eq!(id("slurmstepd: [7.3 stepmgr]"), Some("7.3".into()));
        assert_eq!(id("slurmstepd: [12.batch]"), Some("12.batch".into()));
        assert_eq!(id("slurmstepd: [12.4+1]"), Some("12.4+1".into()));
        assert_eq!(id("slurmstepd: [12.extern]").unwrap(), "12.extern");
        assert_eq!(id("/usr/sbin/slurmstepd\0"), None);
        assert_eq!(id("slurmstepd: [Invalid]"), None);
        assert_eq!(id("slurmstepd: [0.0]"), None);
        assert_eq!(id("slurmstepd: [99999999999.0]"), None);
    }

    #[test]
    fn the_step_from_the_cgroup() {
        let v2 = "0::/system.slice/slurmstepd.scope/job_41/step_2/user/task_0\n";
        assert_eq!(from_cgroup(v2).map(|s| s.to_string()), Some("41.2".into()));
        let v1 = "12:devices:/slurm/uid_0/job_8/step_batch\n11:cpuset:/\n";
        assert_eq!(from_cgroup(v1).map(|s| s.to_string()), Some("8.batch".into()));
        assert_eq!(from_cgroup("0::/system.slice/slurmd.service\n"), None);
        assert_eq!(from_cgroup("0::/job_x/step_0\n"), None);
    }
}
