//! The job a fault hit: the records our gpu/nvml writes in a step's
//! slurmstepd when NVML delivered an XID for one of the step's GPUs
//! (`step_xids = on` in the site's file), and what `gres-rs health` makes
//! of them.
//!
//! One append-only file in the state directory ([`RECORDS_FILE`]), one
//! line a fault, each written with a single `write(2)` on an `O_APPEND`
//! descriptor (so lines of steps ending at once never mix), never longer
//! than [`MAX_LINE`]; the plugin stops appending once the file holds
//! [`MAX_FILE`] bytes:
//!
//! ```text
//! step-xid 1 time=1733340000 job=12 step=0 pid=4567 gpu=3 uuid=GPU-5c1b2e3f pci=0000:41:00.0 xid=79
//! ```
//!
//! `job=-` and `step=-` when the slurmstepd could not say which step it
//! ran (its process title and its cgroup named none); a heterogeneous
//! step's component is `step=0+1`.  The step's ids come from slurmstepd's
//! process title (`slurmstepd: [12.0]`, which every release sets with
//! `setproctitle` before it runs a step), else from its cgroup
//! (`.../job_12/step_0/...`, Slurm's cgroup v2 layout): [`crate::step_id`].

use crate::catalog::xid_name;
use crate::fault::{Fault, Finding, GpuRef, Source};
use crate::kmsg::normalize_pci;
pub use crate::step_id::{from_cgroup, from_proc_title, StepId};
use crate::step_id::{parse_num, parse_step};

/// The records' file in the state directory.
pub const RECORDS_FILE: &str = "step-xids";

/// The plugin appends no record to a file this big (about 8,000 records).
pub const MAX_FILE: u64 = 1024 * 1024;

/// The longest line [`StepXid::render`] makes (a longer UUID or bus id is
/// cut).
pub const MAX_LINE: usize = 512;

/// The first word and version of every record.
pub const TAG: &str = "step-xid 1";

/// One XID NVML delivered for a GPU of a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepXid {
    /// Seconds since the epoch, when the plugin collected it.
    pub time: u64,
    /// The step, when slurmstepd could say.
    pub step: Option<StepId>,
    /// The slurmstepd's process id.
    pub pid: u32,
    /// The GPU.
    pub gpu: GpuRef,
    /// The XID number.
    pub xid: u32,
}

/// Why a line is not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRecord {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub why: String,
}

/// Keep only the characters a UUID or a PCI bus id has, at most `max`.
fn clean(s: &str, max: usize) -> String {
    s.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '.')).take(max).collect()
}

impl StepXid {
    /// The record's line, `\n` included; at most [`MAX_LINE`] bytes.
    pub fn render(&self) -> String {
        let opt = |v: Option<String>| v.filter(|s| !s.is_empty()).unwrap_or_else(|| "-".into());
        let (job, step) = match &self.step {
            Some(s) => (s.job.to_string(), s.step_text()),
            None => ("-".into(), "-".into()),
        };
        format!(
            "{TAG} time={} job={job} step={step} pid={} gpu={} uuid={} pci={} xid={}\n",
            self.time,
            self.pid,
            opt(self.gpu.index.map(|i| i.to_string())),
            opt(self.gpu.uuid.as_deref().map(|u| clean(u, 96))),
            opt(self.gpu.pci.as_deref().map(|p| clean(p, 32))),
            self.xid
        )
    }

    /// Parse one record line (without its `\n`).
    pub fn parse(line: &str) -> Result<StepXid, String> {
        let rest = line.strip_prefix(TAG).and_then(|r| r.strip_prefix(' ')).ok_or("not a step-xid 1 record")?;
        let mut r = StepXid { time: 0, step: None, pid: 0, gpu: GpuRef::default(), xid: 0 };
        let (mut job, mut step, mut xid) = (None, None, None);
        for field in rest.split(' ') {
            let (key, value) = field.split_once('=').ok_or_else(|| format!("`{field}` is not key=value"))?;
            let bad = || format!("bad {key} `{value}`");
            let some = (value != "-").then_some(value);
            match key {
                "time" => r.time = value.parse().map_err(|_| bad())?,
                "job" => job = some.map(|v| parse_num(v).ok_or_else(bad)).transpose()?,
                "step" => step = some.map(|v| parse_step(v).ok_or_else(bad)).transpose()?,
                "pid" => r.pid = value.parse().map_err(|_| bad())?,
                "gpu" => r.gpu.index = some.map(|v| v.parse().map_err(|_| bad())).transpose()?,
                "uuid" => r.gpu.uuid = some.map(|v| clean(v, 96)),
                "pci" => r.gpu.pci = some.map(|v| clean(v, 32)),
                "xid" => xid = Some(value.parse().map_err(|_| bad())?),
                // A later version's field: kept readable.
                _ => {}
            }
        }
        r.xid = xid.ok_or("no xid")?;
        r.step = match (job, step) {
            (Some(job), Some(s)) => Some(StepId { job, ..s }),
            _ => None,
        };
        Ok(r)
    }

    /// The step as text (`12.0`, or `-` when unknown).
    pub fn step_text(&self) -> String {
        self.step.map_or_else(|| "-".to_string(), |s| s.to_string())
    }

    /// The GPU as the log line names it (`gpu 3 GPU-... 0000:41:00.0`).
    pub fn gpu_text(&self) -> String {
        let mut out = String::from("gpu");
        for part in [self.gpu.index.map(|i| i.to_string()), self.gpu.uuid.clone(), self.gpu.pci.clone()].into_iter().flatten() {
            out.push(' ');
            out.push_str(&part);
        }
        out
    }

    /// The line for slurmd's log (at error level): job, step, GPU, XID
    /// and its short name.
    pub fn log_line(&self) -> String {
        let who = match &self.step {
            Some(s) => format!("job {} step {}", s.job, s.step_text()),
            None => format!("slurmstepd pid {} (step unknown)", self.pid),
        };
        format!("gres-rs: {who}: {}: xid {} ({})", self.gpu_text(), self.xid, xid_name(self.xid))
    }

    /// The record as a finding of `gres-rs health`, classified by the
    /// same table as the kernel's XIDs.
    pub fn finding(&self) -> Finding {
        let fault = Fault::Xid { code: self.xid, pid: None, process: None, message: format!("during step {}", self.step_text()) };
        Finding::new(fault, self.gpu.clone(), Source::Step { step: self.step, pid: self.pid })
    }
}

/// The same XID of the same GPU in the kernel's log and in a step's
/// record is one fault: each kernel finding a step finding repeats is
/// dropped, and the step's, which names the job, kept.  GPUs match by PCI
/// bus id where both have one (the kernel's `0000:41:00` is the step's
/// `0000:41:00.0`), else by NVML index.
pub fn fold_kernel_duplicates(findings: &mut Vec<Finding>) {
    let seen_by_steps: Vec<(u32, GpuRef)> = findings
        .iter()
        .filter_map(|f| match (&f.fault, &f.source) {
            (Fault::Xid { code, .. }, Source::Step { .. }) => Some((*code, f.gpu.clone())),
            _ => None,
        })
        .collect();
    if seen_by_steps.is_empty() {
        return;
    }
    // The steps a dropped kernel finding named (its windows: other steps
    // on the GPU, `--overlap`, shards) go to the step's finding.
    let mut moved: Vec<(u32, GpuRef, Vec<crate::step_id::StepId>)> = Vec::new();
    findings.retain(|f| match (&f.fault, &f.source) {
        (Fault::Xid { code, .. }, Source::Kmsg { .. } | Source::LogFile { .. }) => {
            let dup = seen_by_steps.iter().any(|(c, gpu)| c == code && same_gpu(gpu, &f.gpu));
            if dup && !f.jobs.is_empty() {
                moved.push((*code, f.gpu.clone(), f.jobs.clone()));
            }
            !dup
        }
        _ => true,
    });
    for (code, gpu, jobs) in moved {
        for f in findings.iter_mut() {
            let Source::Step { step, .. } = &f.source else { continue };
            if !matches!(&f.fault, Fault::Xid { code: c, .. } if *c == code) || !same_gpu(&gpu, &f.gpu) {
                continue;
            }
            let own = *step;
            for j in &jobs {
                if Some(*j) != own && !f.jobs.contains(j) {
                    f.jobs.push(*j);
                }
            }
        }
    }
}

fn same_gpu(a: &GpuRef, b: &GpuRef) -> bool {
    let pci = |g: &GpuRef| g.pci.as_deref().and_then(normalize_pci);
    match (pci(a), pci(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a.index.is_some() && a.index == b.index,
    }
}

/// Every record of a records file's text, and the lines that are not
/// records (a torn or foreign line is skipped, never fatal).
pub fn parse_records(text: &str) -> (Vec<StepXid>, Vec<BadRecord>) {
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match StepXid::parse(line) {
            Ok(r) => good.push(r),
            Err(why) => bad.push(BadRecord { line: i + 1, why }),
        }
    }
    (good, bad)
}

/// The records of the file's `text` past `reported` bytes (a cursor's
/// [`crate::cursor::Cursor::step_records`]), and the bytes reported after
/// them: whole lines only, a line still being written is left for the
/// next run; a file shorter than `reported` (removed and begun again) is
/// read from its start.
pub fn select_new_records(text: &str, reported: Option<u64>) -> (Vec<StepXid>, u64) {
    let from = reported.and_then(|r| usize::try_from(r).ok()).filter(|&r| r <= text.len() && text.is_char_boundary(r)).unwrap_or(0);
    let rest = &text[from..];
    let whole = rest.rfind('\n').map_or(0, |i| i + 1);
    let (records, _) = parse_records(&rest[..whole]);
    (records, (from + whole) as u64)
}

/// The records of this boot (`boot_time`, seconds since the epoch: from
/// that second on), and how many were older: a record written before the
/// node rebooted is of a fault the reboot cleared, and a drain for it
/// would wait for a second reboot.  Without a boot time, all.
pub fn since_boot(records: Vec<StepXid>, boot_time: Option<u64>) -> (Vec<StepXid>, usize) {
    let Some(boot) = boot_time else { return (records, 0) };
    let before = records.len();
    let kept: Vec<StepXid> = records.into_iter().filter(|r| r.time >= boot).collect();
    let older = before - kept.len();
    (kept, older)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_xid_a_step_saw_is_one_finding() {
        let kernel = |code: u32, pci: &str| {
            Finding::new(Fault::Xid { code, pid: None, process: None, message: String::new() }, GpuRef::pci(pci), Source::Kmsg { seq: 7 })
        };
        let mut found = vec![kernel(79, "0000:41:00"), kernel(79, "0000:42:00"), kernel(48, "0000:41:00"), record().finding()];
        fold_kernel_duplicates(&mut found);
        let left: Vec<(String, String)> = found.iter().map(|f| (f.fault.detail(), f.source.to_string())).collect();
        assert_eq!(left, [("xid 79", "kmsg seq 7"), ("xid 48", "kmsg seq 7"), ("xid 79", "step 12.0")].map(|(a, b)| (a.to_string(), b.to_string())).to_vec());
        // Without a bus id on either side, the NVML index decides.
        let mut by_index = vec![Finding::new(
            Fault::Xid { code: 79, pid: None, process: None, message: String::new() },
            GpuRef { index: Some(3), ..GpuRef::default() },
            Source::LogFile { line: 2 },
        )];
        by_index.push(Finding::new(by_index[0].fault.clone(), GpuRef { index: Some(3), ..GpuRef::default() }, record().finding().source));
        fold_kernel_duplicates(&mut by_index);
        assert_eq!(by_index.len(), 1);
        assert!(matches!(by_index[0].source, Source::Step { .. }));
    }

    #[test]
    fn the_steps_a_folded_kernel_xid_named_stay_named() {
        // Steps 12.0 (with --gpu-freq, NVML's record) and 12.1 (--overlap)
        // held the GPU: the kernel's line, matched to both windows, folds
        // into the record, which then names both.
        let mut kernel =
            Finding::new(Fault::Xid { code: 79, pid: None, process: None, message: String::new() }, GpuRef::pci("0000:41:00"), Source::Kmsg { seq: 7 });
        kernel.jobs = vec![StepId { job: 12, step: 0, het_comp: None }, StepId { job: 12, step: 1, het_comp: None }];
        let mut found = vec![kernel, record().finding()];
        fold_kernel_duplicates(&mut found);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].job_words().as_deref(), Some("job 12.0 +1"));
        assert_eq!(found[0].jobs, [StepId { job: 12, step: 1, het_comp: None }]);
    }

    fn record() -> StepXid {
        StepXid {
            time: 1_733_340_000,
            step: Some(StepId { job: 12, step: 0, het_comp: None }),
            pid: 4567,
            gpu: GpuRef { index: Some(3), uuid: Some("GPU-5c1b2e3f".into()), pci: Some("0000:41:00.0".into()) },
            xid: 79,
        }
    }

    #[test]
    fn a_record_round_trips_through_its_line() {
        let r = record();
        let line = r.render();
        assert_eq!(line, "step-xid 1 time=1733340000 job=12 step=0 pid=4567 gpu=3 uuid=GPU-5c1b2e3f pci=0000:41:00.0 xid=79\n");
        assert_eq!(StepXid::parse(line.trim_end()).unwrap(), r);
        let unknown = StepXid { step: None, gpu: GpuRef::default(), ..r };
        let line = unknown.render();
        assert_eq!(line, "step-xid 1 time=1733340000 job=- step=- pid=4567 gpu=- uuid=- pci=- xid=79\n");
        assert_eq!(StepXid::parse(line.trim_end()).unwrap(), unknown);
    }

    #[test]
    fn a_record_stays_one_short_line_whatever_nvml_says() {
        let mut r = record();
        r.gpu.uuid = Some(format!("GPU-{}\nstep-xid 1 xid=1 {}", "a".repeat(600), "b"));
        r.gpu.pci = Some("0000:41:00.0 xid=13".into());
        let line = r.render();
        assert!(line.len() <= MAX_LINE, "{}", line.len());
        assert_eq!(line.matches('\n').count(), 1);
        assert_eq!(StepXid::parse(line.trim_end()).unwrap().xid, 79);
    }

    #[test]
    fn the_log_line_names_job_step_gpu_and_xid() {
        assert_eq!(record().log_line(), "gres-rs: job 12 step 0: gpu 3 GPU-5c1b2e3f 0000:41:00.0: xid 79 (fallen off the bus)");
        let r = StepXid { step: None, ..record() };
        assert!(r.log_line().starts_with("gres-rs: slurmstepd pid 4567 (step unknown): gpu 3"), "{}", r.log_line());
        let f = record().finding();
        assert_eq!(f.source.to_string(), "step 12.0");
        assert_eq!(f.fault.kind(), crate::fault::FaultKind::Xid(79));
    }

    #[test]
    fn torn_and_foreign_lines_are_skipped() {
        let text = format!("{}step-xid 1 time=1 job=1 step=0 pid=2 gpu=0 uui\nstep-xid 2 time=1 xid=3\nhello\n\n{}", record().render(), record().render());
        let (good, bad) = parse_records(&text);
        assert_eq!(good.len(), 2);
        assert_eq!(bad.iter().map(|b| b.line).collect::<Vec<_>>(), vec![2, 3, 4]);
    }

    #[test]
    fn records_of_an_earlier_boot_are_not_this_boots() {
        let old = StepXid { time: 1_000, ..record() };
        let new = StepXid { time: 2_000, ..record() };
        let (kept, older) = since_boot(vec![old.clone(), new.clone()], Some(2_000));
        assert_eq!((kept, older), (vec![new.clone()], 1));
        assert_eq!(since_boot(vec![old, new], None).0.len(), 2);
    }

    #[test]
    fn each_record_is_new_once() {
        let one = record().render();
        let two = StepXid { xid: 48, ..record() }.render();
        let text = format!("{one}{two}");
        let (new, at) = select_new_records(&text, None);
        assert_eq!((new.len(), at), (2, text.len() as u64));
        assert!(select_new_records(&text, Some(at)).0.is_empty());
        // A line being written is not consumed yet.
        let partial = format!("{text}step-xid 1 time=1");
        let (new, at2) = select_new_records(&partial, Some(one.len() as u64));
        assert_eq!((new.iter().map(|r| r.xid).collect::<Vec<_>>(), at2), (vec![48], text.len() as u64));
        // A file begun again is read from its start.
        let (new, _) = select_new_records(&one, Some(at));
        assert_eq!(new.len(), 1);
    }
}
