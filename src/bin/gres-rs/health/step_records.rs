//! The step XID records our gpu/nvml writes in the state directory
//! (`step_xids = on`, `gres_health::steps`): as findings of a check (each
//! record once, by the cursor's `step_records`), and as the list of jobs
//! and steps a fault hit (`--jobs`).

use std::path::Path;

use serde::Serialize;

use gres_core::bounded_read::read_bounded;
use gres_health::catalog::xid_name;
use gres_health::cursor::Cursor;
use gres_health::steps::{parse_records, select_new_records, since_boot, BadRecord, StepXid, MAX_FILE, MAX_LINE, RECORDS_FILE};

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
    /// Lines that are not records (torn or foreign), by line number.
    bad_lines: Vec<usize>,
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
    Ok(match format {
        HealthFormat::Json => json(state_dir, &records, &bad),
        HealthFormat::Text => table(&records, &bad),
    })
}

fn table(records: &[StepXid], bad: &[BadRecord]) -> String {
    let mut out = format!("{:<10} {:<12} {:<4} {:<42} {:<13} {:<4} {:<10} {}\n", "JOB", "STEP", "GPU", "UUID", "PCI", "XID", "TIME", "WHAT");
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for r in records {
        out.push_str(&format!(
            "{:<10} {:<12} {:<4} {:<42} {:<13} {:<4} {:<10} {}\n",
            dash(r.step.map(|s| s.job.to_string())),
            dash(r.step.map(|s| s.step_text())),
            dash(r.gpu.index.map(|i| i.to_string())),
            dash(r.gpu.uuid.clone()),
            dash(r.gpu.pci.clone()),
            r.xid,
            r.time,
            xid_name(r.xid)
        ));
    }
    if records.is_empty() {
        out.push_str("no step had a GPU fault recorded\n");
    }
    for b in bad {
        out.push_str(&format!("note: line {} is not a record: {}\n", b.line, b.why));
    }
    out
}

fn json(state_dir: &Path, records: &[StepXid], bad: &[BadRecord]) -> String {
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
        bad_lines: bad.iter().map(|b| b.line).collect(),
    };
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
