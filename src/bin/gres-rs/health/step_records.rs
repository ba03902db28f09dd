//! The step XID records our gpu/nvml writes in the state directory
//! (`step_xids = on`, `gres_health::steps`): as findings of a check (each
//! record once, by the cursor's `step_records`), and as the list of jobs
//! and steps a fault hit (`--jobs`).

use std::path::Path;

use serde::Serialize;

use gres_core::bounded_read::read_bounded;
use gres_health::catalog::xid_name;
use gres_health::cursor::Cursor;
use gres_health::fault::Finding;
use gres_health::step_windows::{self, Attributed, ATTRIBUTED_FILE, ATTRIBUTED_OLD_FILE, OLD_FILE, WINDOWS_FILE};
use gres_health::steps::{from_cgroup, parse_records, select_new_records, since_boot, BadRecord, StepId, StepXid, MAX_FILE, MAX_LINE, RECORDS_FILE};

use crate::render::JsonHeader;
use crate::HealthFormat;

/// The records' file's text; `None` when there is none.
fn read(state_dir: &Path) -> Result<Option<String>, String> {
    let path = state_dir.join(RECORDS_FILE);
    // The plugin stops short of MAX_FILE; a line more is slack for a
    // record being written.
    match read_bounded(&path, MAX_FILE + MAX_LINE as u64) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// A bounded file of the state directory, the older (rotated) one first;
/// what cannot be read is a note.
fn read_pair(state_dir: &Path, old: &str, new: &str, notes: &mut Vec<String>) -> String {
    let mut text = String::new();
    for name in [old, new] {
        let path = state_dir.join(name);
        match read_bounded(&path, MAX_FILE + MAX_LINE as u64) {
            Ok(bytes) => {
                text.push_str(&String::from_utf8_lossy(&bytes));
                if !text.ends_with('\n') && !text.is_empty() {
                    text.push('\n');
                }
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => notes.push(format!("{}: {e}", path.display())),
        }
    }
    text
}

/// The step a process runs in, from its cgroup, while it lives.
fn step_of_pid(pid: u32) -> Option<StepId> {
    let bytes = read_bounded(Path::new(&format!("/proc/{pid}/cgroup")), 4096).ok()?;
    from_cgroup(&String::from_utf8_lossy(&bytes))
}

/// Name the jobs the kernel XIDs among `findings` hit, from the step
/// windows our GRES plugins wrote this boot (`step_xids = on`) and the
/// driver's `pid=`; the rows to keep for `--jobs`.
pub fn attribute(state_dir: &Path, boot_id: &str, boot_time: Option<u64>, now: u64, findings: &mut [Finding], notes: &mut Vec<String>) -> Vec<Attributed> {
    let kernel =
        findings.iter().any(|f| f.fault.is_event() && matches!(f.source, gres_health::fault::Source::Kmsg { .. } | gres_health::fault::Source::LogFile { .. }));
    if !kernel {
        return Vec::new();
    }
    let text = read_pair(state_dir, OLD_FILE, WINDOWS_FILE, notes);
    let (windows, _) = step_windows::windows(&text, boot_id);
    step_windows::attribute(findings, &windows, boot_time, now, &step_of_pid)
}

/// Append `rows` to the attributed file (root's, 0600, rotated at
/// [`MAX_FILE`]).
pub fn keep_attributed(state_dir: &Path, rows: &[Attributed]) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = state_dir.join(ATTRIBUTED_FILE);
    if std::fs::symlink_metadata(&path).map(|m| m.len()).unwrap_or(0) >= MAX_FILE {
        std::fs::rename(&path, state_dir.join(ATTRIBUTED_OLD_FILE)).map_err(|e| format!("{}: cannot rotate: {e}", path.display()))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    for r in rows {
        file.write_all(r.render().as_bytes()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The records not reported before and written since `boot_time` (this
/// boot's), as findings; the cursor moved past them.  A file that cannot
/// be read is a note, not a failure.
pub fn new_records(state_dir: &Path, cursor: &mut Cursor, boot_time: Option<u64>, notes: &mut Vec<String>) -> Vec<StepXid> {
    match read(state_dir) {
        Ok(None) => Vec::new(),
        Ok(Some(text)) => {
            let (records, at) = select_new_records(&text, cursor.step_records);
            cursor.step_records = Some(at);
            let (records, older) = since_boot(records, boot_time);
            if older > 0 {
                notes.push(format!("{older} step XID record(s) written before this boot not acted on: the reboot cleared what they hit"));
            }
            records
        }
        Err(e) => {
            notes.push(format!("step XID records not read: {e}"));
            Vec::new()
        }
    }
}

#[derive(Serialize)]
struct JsonJobs<'a> {
    #[serde(flatten)]
    header: JsonHeader,
    file: String,
    records: Vec<JsonRecord<'a>>,
    /// Kernel XIDs and the steps that held the GPU then.
    kernel: Vec<JsonKernel<'a>>,
    /// Lines that are not records (torn or foreign), by line number.
    bad_lines: Vec<usize>,
}

#[derive(Serialize)]
struct JsonKernel<'a> {
    job: u32,
    step: String,
    uid: Option<u32>,
    gpu: Option<u32>,
    uuid: Option<&'a str>,
    pci: Option<&'a str>,
    xid: u32,
    name: &'static str,
    time: u64,
}

#[derive(Serialize)]
struct JsonRecord<'a> {
    job: Option<u32>,
    step: Option<String>,
    pid: u32,
    gpu: Option<u32>,
    uuid: Option<&'a str>,
    pci: Option<&'a str>,
    xid: u32,
    name: &'static str,
    time: u64,
}

/// `--jobs`: every record of the state directory, oldest first.
pub fn list_jobs(state_dir: &Path, format: HealthFormat) -> Result<String, String> {
    let text = read(state_dir)?.unwrap_or_default();
    let (records, bad) = parse_records(&text);
    let mut notes = Vec::new();
    let kernel = step_windows::parse_attributed(&read_pair(state_dir, ATTRIBUTED_OLD_FILE, ATTRIBUTED_FILE, &mut notes));
    if let Some(n) = notes.first() {
        return Err(n.clone());
    }
    Ok(match format {
        HealthFormat::Json => json(state_dir, &records, &kernel, &bad),
        HealthFormat::Text => table(&records, &kernel, &bad),
    })
}

fn table(records: &[StepXid], kernel: &[Attributed], bad: &[BadRecord]) -> String {
    let mut out =
        format!("{:<10} {:<12} {:<6} {:<6} {:<4} {:<42} {:<13} {:<4} {:<10} {}\n", "JOB", "STEP", "UID", "SEEN", "GPU", "UUID", "PCI", "XID", "TIME", "WHAT");
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for r in records {
        out.push_str(&format!(
            "{:<10} {:<12} {:<6} {:<6} {:<4} {:<42} {:<13} {:<4} {:<10} {}\n",
            dash(r.step.map(|s| s.job.to_string())),
            dash(r.step.map(|s| s.step_text())),
            "-",
            "step",
            dash(r.gpu.index.map(|i| i.to_string())),
            dash(r.gpu.uuid.clone()),
            dash(r.gpu.pci.clone()),
            r.xid,
            r.time,
            xid_name(r.xid)
        ));
    }
    for r in kernel {
        out.push_str(&format!(
            "{:<10} {:<12} {:<6} {:<6} {:<4} {:<42} {:<13} {:<4} {:<10} {}\n",
            r.step.job,
            r.step.step_text(),
            dash(r.uid.map(|u| u.to_string())),
            "kernel",
            dash(r.gpu.index.map(|i| i.to_string())),
            dash(r.gpu.uuid.clone()),
            dash(r.gpu.pci.clone()),
            r.xid,
            r.time,
            r.name()
        ));
    }
    if records.is_empty() && kernel.is_empty() {
        out.push_str("no step had a GPU fault recorded\n");
    }
    for b in bad {
        out.push_str(&format!("note: line {} is not a record: {}\n", b.line, b.why));
    }
    out
}

fn json(state_dir: &Path, records: &[StepXid], kernel: &[Attributed], bad: &[BadRecord]) -> String {
    let doc = JsonJobs {
        header: JsonHeader::new(),
        file: state_dir.join(RECORDS_FILE).display().to_string(),
        records: records
            .iter()
            .map(|r| JsonRecord {
                job: r.step.map(|s| s.job),
                step: r.step.map(|s| s.step_text()),
                pid: r.pid,
                gpu: r.gpu.index,
                uuid: r.gpu.uuid.as_deref(),
                pci: r.gpu.pci.as_deref(),
                xid: r.xid,
                name: xid_name(r.xid),
                time: r.time,
            })
            .collect(),
        kernel: kernel
            .iter()
            .map(|r| JsonKernel {
                job: r.step.job,
                step: r.step.step_text(),
                uid: r.uid,
                gpu: r.gpu.index,
                uuid: r.gpu.uuid.as_deref(),
                pci: r.gpu.pci.as_deref(),
                xid: r.xid,
                name: r.name(),
                time: r.time,
            })
            .collect(),
        bad_lines: bad.iter().map(|b| b.line).collect(),
    };
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
