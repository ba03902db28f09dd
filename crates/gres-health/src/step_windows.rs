//! The job a fault hit, for every step: the windows in which a step held
//! GPUs, as our GRES plugins write them in each step's slurmstepd
//! (`step_xids = on`), and which steps a kernel XID falls into.
//!
//! slurmstepd calls the GRES plugins' `job_set_env` (batch and
//! interactive steps, 26.05's external launchers) or `step_set_env`
//! (every other step that launches tasks) once a step, as root, before
//! it forks the tasks, on every release from 22.05 to 26.05
//! (`src/slurmd/slurmstepd/slurmstepd.c`, `_step_setup`); the plugin
//! writes a [`StepStart`] there, and a [`StepEnd`] when that slurmstepd
//! exits.  Each record is one `write(2)` of at most [`MAX_LINE`] bytes on
//! an `O_APPEND` descriptor of [`WINDOWS_FILE`]; at [`MAX_FILE`] bytes the
//! file is renamed to [`OLD_FILE`] (replacing it) and begun again:
//!
//! ```text
//! step-window 1 boot=0f5c1b2e-... start=1733340000 job=12 step=0 uid=1000 pid=4567 gpus=0,1
//! step-end 1 boot=0f5c1b2e-... end=1733340100 job=12 step=0 pid=4567
//! ```
//!
//! `gpus` are the indexes of the step's GRES bitmap, which are NVML's
//! indexes where gres.conf comes from `AutoDetect=nvml` (what `--gpu-freq`
//! takes too).  Records of another boot are never matched: after a
//! reboot, whatever a window said is over.  A window without its end (its
//! slurmstepd is still running, or was killed) is open until the check.

use crate::catalog::xid_name;
use crate::fault::{Fault, Finding, GpuRef, Source};
pub use crate::step_id::StepId;
use crate::step_id::{parse_num, parse_step};

/// The windows' file in the state directory.
pub const WINDOWS_FILE: &str = "step-windows";

/// The file before the last rotation.
pub const OLD_FILE: &str = "step-windows.1";

/// The size at which the plugin rotates the file (about 10,000 steps).
pub const MAX_FILE: u64 = 1024 * 1024;

/// The longest record line.
pub const MAX_LINE: usize = 512;

/// The most GPUs a record names (the rest are left out).
pub const MAX_GPUS: usize = 64;

const START_TAG: &str = "step-window 1";
const END_TAG: &str = "step-end 1";

/// A step began with these GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepStart {
    /// `/proc/sys/kernel/random/boot_id` when it was written.
    pub boot: String,
    /// Seconds since the epoch.
    pub start: u64,
    /// The step, when slurmstepd could say.
    pub step: Option<StepId>,
    /// The step's user, when known.
    pub uid: Option<u32>,
    /// The slurmstepd's process id.
    pub pid: u32,
    /// The GRES bitmap's indexes (NVML's with `AutoDetect=nvml`).
    pub gpus: Vec<u32>,
}

/// The step's slurmstepd ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepEnd {
    /// As in [`StepStart`].
    pub boot: String,
    /// Seconds since the epoch.
    pub end: u64,
    /// As in [`StepStart`].
    pub step: Option<StepId>,
    /// As in [`StepStart`].
    pub pid: u32,
}

/// Keep only what a boot id has (hex digits and dashes), at most 40.
fn clean_boot(s: &str) -> String {
    s.trim().chars().filter(|c| c.is_ascii_hexdigit() || *c == '-').take(40).collect()
}

fn ids(step: &Option<StepId>) -> (String, String) {
    match step {
        Some(s) => (s.job.to_string(), s.step_text()),
        None => ("-".into(), "-".into()),
    }
}

fn dash(boot: &str) -> String {
    let b = clean_boot(boot);
    if b.is_empty() {
        "-".into()
    } else {
        b
    }
}

impl StepStart {
    /// The record's line, `\n` included; at most [`MAX_LINE`] bytes.
    pub fn render(&self) -> String {
        let (job, step) = ids(&self.step);
        let uid = self.uid.map_or_else(|| "-".to_string(), |u| u.to_string());
        let mut line = format!("{START_TAG} boot={} start={} job={job} step={step} uid={uid} pid={} gpus=", dash(&self.boot), self.start, self.pid);
        // GPUs while they fit (a node has far fewer than fill a line).
        let mut any = false;
        for g in self.gpus.iter().take(MAX_GPUS).map(u32::to_string) {
            if line.len() + g.len() + 2 > MAX_LINE {
                break;
            }
            if any {
                line.push(',');
            }
            line.push_str(&g);
            any = true;
        }
        if !any {
            line.push('-');
        }
        line.push('\n');
        line
    }
}

impl StepEnd {
    /// The record's line, `\n` included.
    pub fn render(&self) -> String {
        let (job, step) = ids(&self.step);
        format!("{END_TAG} boot={} end={} job={job} step={step} pid={}\n", dash(&self.boot), self.end, self.pid)
    }
}

/// One record of the windows' file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A step began.
    Start(StepStart),
    /// A step's slurmstepd ended.
    End(StepEnd),
}

/// Parse one line (without its `\n`); `None` for anything else.
pub fn parse(line: &str) -> Option<Record> {
    let (is_start, rest) = match line.strip_prefix(START_TAG) {
        Some(r) => (true, r),
        None => (false, line.strip_prefix(END_TAG)?),
    };
    let rest = rest.strip_prefix(' ')?;
    let (mut boot, mut time, mut job, mut step, mut uid, mut pid, mut gpus) = (None, None, None, None, None, None, Vec::new());
    for field in rest.split(' ') {
        let (key, value) = field.split_once('=')?;
        let some = (value != "-").then_some(value);
        match key {
            "boot" => boot = some.map(clean_boot),
            "start" | "end" => time = Some(value.parse::<u64>().ok()?),
            "job" => job = some.map(parse_num).map(|v| v.ok_or(())).transpose().ok()?,
            "step" => step = some.map(parse_step).map(|v| v.ok_or(())).transpose().ok()?,
            "uid" => uid = some.map(|v| v.parse::<u32>().ok()).map(|v| v.ok_or(())).transpose().ok()?,
            "pid" => pid = Some(value.parse::<u32>().ok()?),
            "gpus" => {
                if let Some(v) = some {
                    for g in v.split(',').take(MAX_GPUS) {
                        gpus.push(g.parse::<u32>().ok()?);
                    }
                }
            }
            _ => {}
        }
    }
    let step = match (job, step) {
        (Some(job), Some(s)) => Some(StepId { job, ..s }),
        _ => None,
    };
    let (boot, time, pid) = (boot?, time?, pid?);
    Some(if is_start { Record::Start(StepStart { boot, start: time, step, uid, pid, gpus }) } else { Record::End(StepEnd { boot, end: time, step, pid }) })
}

/// A step's time on its GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The step, when slurmstepd could say.
    pub step: Option<StepId>,
    /// The step's user, when known.
    pub uid: Option<u32>,
    /// The slurmstepd's process id.
    pub pid: u32,
    /// The GPUs (GRES indexes).
    pub gpus: Vec<u32>,
    /// Seconds since the epoch.
    pub start: u64,
    /// Seconds since the epoch; `None` while open.
    pub end: Option<u64>,
}

/// The windows of boot `boot_id` in the text of the windows' files
/// (oldest first), and how many records were of another boot.  A start
/// and an end of the same slurmstepd and step make one window; an end
/// closes the latest open window of its process.
pub fn windows(text: &str, boot_id: &str) -> (Vec<Window>, usize) {
    let boot = clean_boot(boot_id);
    let mut out: Vec<Window> = Vec::new();
    let mut other_boot = 0;
    for line in text.lines() {
        let Some(rec) = parse(line) else { continue };
        let rec_boot = match &rec {
            Record::Start(s) => &s.boot,
            Record::End(e) => &e.boot,
        };
        if boot.is_empty() || *rec_boot != boot {
            other_boot += 1;
            continue;
        }
        match rec {
            Record::Start(s) => out.push(Window { step: s.step, uid: s.uid, pid: s.pid, gpus: s.gpus, start: s.start, end: None }),
            Record::End(e) => {
                for w in out.iter_mut().rev().filter(|w| w.end.is_none() && w.pid == e.pid && w.step == e.step) {
                    w.end = Some(e.end.max(w.start));
                }
            }
        }
    }
    (out, other_boot)
}

/// The steps whose windows held GRES index `gpu` at `time` (seconds
/// since the epoch; a window's seconds are whole, so a window is taken
/// as `[start, end]` both included), each once, in order of their start.
pub fn steps_at(windows: &[Window], gpu: u32, time: u64) -> Vec<&Window> {
    let mut out: Vec<&Window> = Vec::new();
    for w in windows {
        if w.gpus.contains(&gpu) && w.start <= time && w.end.is_none_or(|e| time <= e) && !out.iter().any(|o| o.step == w.step && o.pid == w.pid) {
            out.push(w);
        }
    }
    out
}

/// The file of kernel XIDs `gres-rs health` named jobs for, in the state
/// directory (written by the tool, for `--jobs`).
pub const ATTRIBUTED_FILE: &str = "kernel-xids";

/// [`ATTRIBUTED_FILE`] before its last rotation.
pub const ATTRIBUTED_OLD_FILE: &str = "kernel-xids.1";

const ATTRIBUTED_TAG: &str = "kernel-xid 1";

/// A kernel XID and one job step that held its GPU then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributed {
    /// Seconds since the epoch: when the kernel logged it, else when the
    /// check read it.
    pub time: u64,
    /// The step.
    pub step: StepId,
    /// The step's user, when known.
    pub uid: Option<u32>,
    /// The GPU.
    pub gpu: GpuRef,
    /// The XID number.
    pub xid: u32,
}

fn clean(s: &str, max: usize) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '.')).take(max).collect()
}

impl Attributed {
    /// The record's line, `\n` included.
    pub fn render(&self) -> String {
        let opt = |v: Option<String>| v.filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into());
        format!(
            "{ATTRIBUTED_TAG} time={} job={} step={} uid={} gpu={} uuid={} pci={} xid={}\n",
            self.time,
            self.step.job,
            self.step.step_text(),
            opt(self.uid.map(|u| u.to_string())),
            opt(self.gpu.index.map(|i| i.to_string())),
            opt(self.gpu.uuid.as_deref().map(|u| clean(u, 96))),
            opt(self.gpu.pci.as_deref().map(|p| clean(p, 32))),
            self.xid
        )
    }

    /// Parse one line (without its `\n`).
    pub fn parse(line: &str) -> Option<Attributed> {
        let rest = line.strip_prefix(ATTRIBUTED_TAG)?.strip_prefix(' ')?;
        let (mut time, mut job, mut step, mut uid, mut gpu, mut xid) = (None, None, None, None, GpuRef::default(), None);
        for field in rest.split(' ') {
            let (key, value) = field.split_once('=')?;
            let some = (value != "-").then_some(value);
            match key {
                "time" => time = Some(value.parse::<u64>().ok()?),
                "job" => job = Some(parse_num(value)?),
                "step" => step = Some(parse_step(value)?),
                "uid" => uid = some.and_then(|v| v.parse().ok()),
                "gpu" => gpu.index = some.and_then(|v| v.parse().ok()),
                "uuid" => gpu.uuid = some.map(|v| clean(v, 96)),
                "pci" => gpu.pci = some.map(|v| clean(v, 32)),
                "xid" => xid = Some(value.parse::<u32>().ok()?),
                _ => {}
            }
        }
        Some(Attributed { time: time?, step: StepId { job: job?, ..step? }, uid, gpu, xid: xid? })
    }

    /// The XID's short name.
    pub fn name(&self) -> &'static str {
        xid_name(self.xid)
    }
}

/// Every record of the attributed file's text (other lines skipped).
pub fn parse_attributed(text: &str) -> Vec<Attributed> {
    text.lines().filter_map(Attributed::parse).collect()
}

/// Name the job steps each kernel XID among `findings` hit: the step the
/// driver's `pid=` ran in (`step_of_pid`: its cgroup, while it lives),
/// then every step whose window held the XID's GPU (by NVML's index, which
/// the tool filled in from the PCI bus id) at the kernel's time of it
/// (`boot_time`, seconds since the epoch, plus the record's
/// microseconds).  A finding without a GPU index or a time is matched by
/// its pid only.  Returns one [`Attributed`] per finding and step;
/// `now` stands in for a time the kernel did not give.
pub fn attribute(
    findings: &mut [Finding],
    windows: &[Window],
    boot_time: Option<u64>,
    now: u64,
    step_of_pid: &dyn Fn(u32) -> Option<StepId>,
) -> Vec<Attributed> {
    let mut out = Vec::new();
    for f in findings.iter_mut() {
        let (code, pid) = match (&f.fault, &f.source) {
            (Fault::Xid { code, pid, .. }, Source::Kmsg { .. } | Source::LogFile { .. }) => (*code, *pid),
            _ => continue,
        };
        let time = boot_time.zip(f.uptime_usec).map(|(b, u)| kernel_time(b, u));
        let mut named: Vec<(StepId, Option<u32>)> = Vec::new();
        if let Some(step) = pid.and_then(step_of_pid) {
            let uid = windows.iter().find(|w| w.step == Some(step)).and_then(|w| w.uid);
            named.push((step, uid));
        }
        if let (Some(t), Some(gpu)) = (time, f.gpu.index) {
            for w in steps_at(windows, gpu, t) {
                if let Some(step) = w.step {
                    if !named.iter().any(|(s, _)| *s == step) {
                        named.push((step, w.uid));
                    }
                }
            }
        }
        for (step, uid) in &named {
            out.push(Attributed { time: time.unwrap_or(now), step: *step, uid: *uid, gpu: f.gpu.clone(), xid: code });
        }
        f.jobs = named.into_iter().map(|(s, _)| s).collect();
    }
    out
}

/// The wall-clock second of a kernel record `usec` microseconds after a
/// boot at `boot_time` (seconds since the epoch, `/proc/stat`'s `btime`).
pub fn kernel_time(boot_time: u64, usec: u64) -> u64 {
    boot_time.saturating_add(usec / 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "0f5c1b2e-7f4e-4b3a-9d2c-5e8f1a2b3c4d";
    const OTHER: &str = "11111111-7f4e-4b3a-9d2c-5e8f1a2b3c4d";

    fn start(boot: &str, t: u64, id: &str, pid: u32, gpus: &[u32]) -> String {
        StepStart { boot: boot.into(), start: t, step: StepId::parse(id), uid: Some(1000), pid, gpus: gpus.to_vec() }.render()
    }

    fn end(boot: &str, t: u64, id: &str, pid: u32) -> String {
        StepEnd { boot: boot.into(), end: t, step: StepId::parse(id), pid }.render()
    }

    fn named(ws: &[Window], gpu: u32, t: u64) -> Vec<String> {
        steps_at(ws, gpu, t).iter().map(|w| w.step.map(|s| s.to_string()).unwrap_or_default()).collect()
    }

    #[test]
    fn a_dmesg_stamp_is_microseconds_since_boot() {
        assert_eq!(crate::kmsg::dmesg_usec("[  150.5] NVRM: Xid"), Some(150_500_000));
        assert_eq!(crate::kmsg::dmesg_usec("<4>[12.000001] x"), Some(12_000_001));
        assert_eq!(crate::kmsg::dmesg_usec("Dec  4 node kernel: x"), None);
    }

    #[test]
    fn records_round_trip_and_stay_short() {
        let s = StepStart { boot: BOOT.into(), start: 5, step: StepId::parse("12.batch"), uid: None, pid: 9, gpus: vec![0, 3] };
        let line = s.render();
        assert_eq!(line, format!("step-window 1 boot={BOOT} start=5 job=12 step=batch uid=- pid=9 gpus=0,3\n"));
        assert_eq!(parse(line.trim_end()), Some(Record::Start(s)));
        let e = StepEnd { boot: BOOT.into(), end: 6, step: None, pid: 9 };
        assert_eq!(parse(e.render().trim_end()), Some(Record::End(e)));
        let big = StepStart {
            boot: format!("{BOOT}\n{}", "f".repeat(600)),
            start: u64::MAX,
            step: StepId::parse("4294967295.4294967295+4294967295"),
            uid: Some(u32::MAX),
            pid: u32::MAX,
            gpus: (0..1000).map(|_| u32::MAX).collect(),
        };
        let line = big.render();
        assert!(line.len() <= MAX_LINE && line.matches('\n').count() == 1, "{}", line.len());
        assert!(parse("step-window 1 boot=x start=1").is_none());
        assert!(parse("step-xid 1 time=1 xid=79").is_none());
    }

    #[test]
    fn a_fault_names_every_step_that_held_its_gpu_then() {
        let text = [
            start(BOOT, 100, "12.batch", 50, &[0, 1]),
            start(BOOT, 110, "13.0", 60, &[1]),
            start(BOOT, 111, "13.1", 61, &[1]),
            end(BOOT, 150, "13.0", 60),
            end(BOOT, 160, "13.1", 61),
            end(BOOT, 200, "12.batch", 50),
        ]
        .concat();
        let (ws, other) = windows(&text, BOOT);
        assert_eq!((ws.len(), other), (3, 0));
        assert_eq!(named(&ws, 1, 120), ["12.batch", "13.0", "13.1"]);
        assert_eq!(named(&ws, 0, 120), ["12.batch"]);
        // The ends are included, a second later is not.
        assert_eq!(named(&ws, 1, 150), ["12.batch", "13.0", "13.1"]);
        assert_eq!(named(&ws, 1, 161), ["12.batch"]);
        // Between jobs, before any, and a GPU no step held.
        assert!(named(&ws, 1, 201).is_empty());
        assert!(named(&ws, 1, 99).is_empty());
        assert!(named(&ws, 2, 120).is_empty());
    }

    #[test]
    fn a_window_without_its_end_is_open_and_other_boots_are_over() {
        let text =
            [start(OTHER, 100, "7.0", 5, &[1]), end(OTHER, 300, "7.0", 5), start(BOOT, 400, "8.0", 6, &[1]), "garbage\n".into(), "step-window 1 boot=".into()]
                .concat();
        let (ws, other) = windows(&text, BOOT);
        assert_eq!(other, 2);
        assert!(named(&ws, 1, 200).is_empty(), "a record of an earlier boot names no job");
        assert_eq!(named(&ws, 1, 10_000), ["8.0"]);
        // No boot id: nothing is matched.
        assert!(windows(&text, "").0.is_empty());
    }

    fn kernel_xid(pci: &str, index: Option<u32>, usec: Option<u64>, pid: Option<u32>) -> Finding {
        let mut f = Finding::new(
            Fault::Xid { code: 79, pid, process: None, message: String::new() },
            GpuRef { index, uuid: None, pci: Some(pci.into()) },
            Source::Kmsg { seq: 3 },
        );
        f.uptime_usec = usec;
        f
    }

    #[test]
    fn kernel_xids_name_the_steps_of_their_gpu_and_time() {
        // Booted at 1000: the job ran from 1100 to 1200 on GPUs 0 and 1,
        // two overlapping steps of another on GPU 1 from 1110.
        let text = [
            start(BOOT, 1100, "12.batch", 50, &[0, 1]),
            start(BOOT, 1110, "13.0", 60, &[1]),
            start(BOOT, 1110, "13.1", 61, &[1]),
            end(BOOT, 1200, "12.batch", 50),
        ]
        .concat();
        let (ws, _) = windows(&text, BOOT);
        let no_pid = |_: u32| None;
        let mut found = vec![
            kernel_xid("0000:2a:00.0", Some(1), Some(150_000_000), None),
            kernel_xid("0000:41:00.0", Some(0), Some(50_000_000), None),
            kernel_xid("0000:2a:00.0", Some(2), Some(150_000_000), None),
            kernel_xid("0000:2a:00.0", None, Some(150_000_000), None),
            kernel_xid("0000:2a:00.0", Some(1), None, None),
        ];
        let rows = attribute(&mut found, &ws, Some(1000), 5000, &no_pid);
        let jobs: Vec<Vec<String>> = found.iter().map(|f| f.jobs.iter().map(|s| s.to_string()).collect()).collect();
        assert_eq!(jobs[0], ["12.batch", "13.0", "13.1"]);
        assert!(jobs[1..].iter().all(Vec::is_empty), "{jobs:?}");
        assert_eq!(found[0].job_words().as_deref(), Some("job 12.batch +2"));
        assert_eq!(found[1].job_words(), None);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].time, 1150);
        assert_eq!(Attributed::parse(rows[0].render().trim_end()), Some(rows[0].clone()));
        assert_eq!(parse_attributed(&rows.iter().map(Attributed::render).collect::<String>()), rows);

        // The driver's pid, in a step's cgroup, names that step first,
        // even without a time.
        let pid_step = |p: u32| (p == 77).then(|| StepId::parse("13.1")).flatten();
        let mut found = vec![kernel_xid("0000:2a:00.0", Some(1), Some(150_000_000), Some(77)), kernel_xid("0000:2a:00.0", None, None, Some(77))];
        attribute(&mut found, &ws, Some(1000), 5000, &pid_step);
        assert_eq!(found[0].jobs.iter().map(|s| s.to_string()).collect::<Vec<_>>(), ["13.1", "12.batch", "13.0"]);
        assert_eq!(found[1].job_words().as_deref(), Some("job 13.1"));
        // A step's own record is left alone.
        let mut step = vec![Finding::new(
            Fault::Xid { code: 79, pid: None, process: None, message: String::new() },
            GpuRef { index: Some(1), ..GpuRef::default() },
            Source::Step { step: StepId::parse("9.0"), pid: 1 },
        )];
        assert!(attribute(&mut step, &ws, Some(1000), 5000, &pid_step).is_empty());
        assert_eq!(step[0].job_words().as_deref(), Some("job 9.0"));
    }

    #[test]
    fn an_end_closes_its_own_process_window_only() {
        let text = [start(BOOT, 10, "5.0", 1, &[0]), start(BOOT, 10, "5.0", 2, &[0]), end(BOOT, 20, "5.0", 1)].concat();
        let (ws, _) = windows(&text, BOOT);
        assert_eq!(ws.iter().map(|w| w.end).collect::<Vec<_>>(), [Some(20), None]);
        assert_eq!(steps_at(&ws, 0, 15).len(), 2);
        assert_eq!(kernel_time(1_000, 2_500_000), 1_002);
    }
}
