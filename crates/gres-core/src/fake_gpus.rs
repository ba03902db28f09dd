//! `fake_gpus.conf`: Slurm's test file that stands in for GPU detection.
//! When it exists next to slurm.conf, gres/gpu takes the GPUs it lists as
//! the node's detected GPUs instead of asking the GPU plugin.
//!
//! One GPU per line, fields separated by `|`:
//!
//! ```text
//! type|cpu_count|cpu_range|links|device_file[|unique_id[|flags]]
//! ```
//!
//! - `(null)` leaves a field empty; like `strtok()`, empty fields (`||`)
//!   are skipped, so later fields move left.
//! - Blank lines and lines starting with `#` are skipped; a line ends at
//!   its first CR or LF.
//! - `cpu_count` is read like `atoi()`; `cpu_range` is a range list of
//!   that many CPUs, or with `~` one of gpu/nvml's test keywords (`~zero`,
//!   `~one`, `~three`, `~half`, `~max`, or `~X...` for that many all-ones
//!   `unsigned long` words of an NVML affinity array), converted the way
//!   gpu/nvml converts NVML affinities; the other GPU plugins give no range.
//! - `flags` takes the words of gres.conf's `Flags=`.
//!
//! Lines the stock plugin finds malformed are logged and, as in the stock
//! plugin, still make a GPU.  What stops the stock slurmd (a CPU range that
//! does not fit, an empty NVML affinity) is an `Err` here.
//!
//! Line length: the stock plugin reads with a 256-byte `fgets()` buffer and
//! so cuts longer lines in two.  Here a line of more than
//! [`MAX_LINE_LEN`] bytes is skipped with an error instead; every shorter
//! line reads the same as in Slurm.

use std::path::Path;
use thiserror::Error;

use super::bounded_read::{read_bounded, MAX_FILE_LEN};
use super::diagnostic::{Diagnostic, Location};
use super::flags::parse_flags;
use super::model::{flags_to_string, Bitmap, ConfFlags, GresRecord, LogLevel, RangeError};
use super::record_rules::{add_gres_record, AffinityError};

/// Longest line read (the stock buffer holds 255 bytes, newline included
/// in what it reads).
pub const MAX_LINE_LEN: usize = 255;

/// Largest `cpu_count` accepted (the stock plugin allocates whatever is
/// written; gpu/nvml itself handles at most 32768 CPUs).
pub const MAX_CPU_COUNT: u32 = 1 << 16;

/// Which GPU plugin's `gpu_p_test_cpu_conv()` turns `~` ranges into CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpuConv {
    /// gpu/nvml (`AutoDetect=nvml`): the test keywords.
    Nvml,
    /// gpu/generic, gpu/rsmi, gpu/oneapi: no range at all.
    #[default]
    Unsupported,
}

/// The GPUs of a fake_gpus.conf and what reading it logged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FakeGpus {
    pub records: Vec<GresRecord>,
    pub diagnostics: Vec<Diagnostic>,
    /// What gpu/nvml's test conversion prints on the daemon's stdout: the
    /// affinity words of each known `~keyword`, a line each.
    pub stdout: Vec<String>,
}

/// What makes the stock slurmd stop (`fatal()`).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum FakeGpusError {
    #[error("{location}: bit_unfmt() failed for CPU range: {range} ({reason})")]
    BadCpuRange { location: Location, range: String, reason: RangeError },
    #[error("{location}: _set_cpu_set_bitstr: cpu_set_bitstr is empty! No CPU affinity for device")]
    EmptyAffinity { location: Location },
    #[error("{location}: invalid CPU count \"{value}\" (0 to {MAX_CPU_COUNT} supported)")]
    BadCpuCount { location: Location, value: String },
    #[error("{location}: {source}")]
    Affinity { location: Location, source: AffinityError },
}

/// Read `path` as the stock plugin does: `Ok(None)` when it does not exist
/// (no fake GPUs), an empty list with an error when it cannot be read.
///
/// Unlike the stock plugin, what is not a regular file is not read (on
/// `/dev/zero` the stock plugin loops for ever, on a FIFO it blocks, a
/// directory it reads as empty), nor is more than [`MAX_FILE_LEN`] bytes
/// (the stock plugin reads a 10 GB file to its end): such a file is an
/// error that names it, and gives no GPUs.
pub fn load_fake_gpus(path: &Path, conv: CpuConv) -> Result<Option<FakeGpus>, FakeGpusError> {
    if std::fs::metadata(path).is_err() {
        return Ok(None);
    }
    let mut diagnostics = vec![Diagnostic::new(LogLevel::Info, None, format!("Adding fake system GPU data from {}", path.display()))];
    match read_bounded(path, MAX_FILE_LEN) {
        Ok(bytes) => {
            let mut fake = parse_fake_gpus(&String::from_utf8_lossy(&bytes), path, conv)?;
            diagnostics.append(&mut fake.diagnostics);
            fake.diagnostics = diagnostics;
            Ok(Some(fake))
        }
        Err(e) => {
            diagnostics.push(Diagnostic::new(LogLevel::Error, Some(Location::file(path)), format!("Unable to read \"{}\": {e}", path.display())));
            Ok(Some(FakeGpus { records: Vec::new(), diagnostics, stdout: Vec::new() }))
        }
    }
}

/// `atoi()`: leading blanks, a sign, digits; 0 when there are none.
fn atoi(text: &str) -> i64 {
    let t = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let value = rest[..digits].parse::<i64>().unwrap_or(if digits == 0 { 0 } else { i64::MAX });
    if negative {
        -value
    } else {
        value
    }
}

/// gpu/nvml's `gpu_p_test_cpu_conv()`: the CPUs of a `~keyword`, as a
/// range list; an unknown keyword gives an empty list (and an error line).
fn nvml_test_cpu_conv(range: &str, location: &Location, out: &mut FakeGpus) -> Result<String, FakeGpusError> {
    out.diagnostics.push(Diagnostic::new(LogLevel::Info, Some(location.clone()), format!("gpu_p_test_cpu_conv: cpu_range: {range}")));
    let Some(mask) = super::nvml_model::test_cpu_conv(range) else {
        out.diagnostics.push(Diagnostic::new(LogLevel::Error, Some(location.clone()), "Unknown test keyword"));
        return Ok(String::new());
    };
    out.stdout.push(mask.stdout_line);
    match mask.range {
        r if r.is_empty() => Err(FakeGpusError::EmptyAffinity { location: location.clone() }),
        r => Ok(r),
    }
}

/// Parse the contents of a fake_gpus.conf (`path` only names it in
/// messages).
pub fn parse_fake_gpus(text: &str, path: &Path, conv: CpuConv) -> Result<FakeGpus, FakeGpusError> {
    let mut out = FakeGpus::default();
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    for (index, raw) in lines.into_iter().enumerate() {
        let line_no = index + 1;
        let location = Location::line(path, line_no);
        if raw.len() > MAX_LINE_LEN {
            out.diagnostics.push(Diagnostic::new(
                LogLevel::Error,
                Some(location),
                format!("Line #{line_no} in fake_gpus.conf is longer than {MAX_LINE_LEN} characters; ignoring it"),
            ));
            continue;
        }
        let line = raw.split(['\r', '\0']).next().unwrap_or_default();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.diagnostics.push(Diagnostic::new(LogLevel::Debug, Some(location.clone()), line));
        if let Some(record) = parse_line(line, line_no, &location, conv, &mut out)? {
            out.records.push(record);
        }
    }
    Ok(out)
}

fn parse_line(line: &str, line_no: usize, location: &Location, conv: CpuConv, out: &mut FakeGpus) -> Result<Option<GresRecord>, FakeGpusError> {
    let mut fields: [Option<&str>; 7] = [None; 7];
    let mut count = 0;
    for token in line.split('|').filter(|t| !t.is_empty()) {
        if token != "(null)" {
            match fields.get_mut(count) {
                Some(field) => *field = Some(token),
                None => out.diagnostics.push(Diagnostic::new(LogLevel::Error, Some(location.clone()), "Malformed line: too many data fields")),
            }
        }
        count += 1;
    }
    if !(5..=7).contains(&count) {
        out.diagnostics.push(Diagnostic::new(
            LogLevel::Error,
            Some(location.clone()),
            format!(
                "Line #{line_no} in fake_gpus.conf failed to parse! Make sure that the line has no empty tokens and that the format is <type>|<sys_cpu_count>|<cpu_range>|<links>|<device_file>[|<unique_id>[|<flags>]]"
            ),
        ));
    }
    let [type_name, cpu_count, cpu_range, links, file, unique_id, flags] = fields;

    let cpu_cnt = match cpu_count.map_or(0, atoi) {
        n if (0..=i64::from(MAX_CPU_COUNT)).contains(&n) => n as u32,
        _ => {
            return Err(FakeGpusError::BadCpuCount { location: location.clone(), value: cpu_count.unwrap_or_default().to_string() });
        }
    };
    let cpus = match cpu_range {
        Some(range) if range.starts_with('~') => match conv {
            CpuConv::Nvml => Some(nvml_test_cpu_conv(range, location, out)?),
            CpuConv::Unsupported => None,
        },
        other => other.map(str::to_string),
    };
    let bitmap = Bitmap::from_ranges(cpu_cnt as usize, cpus.as_deref().unwrap_or("")).map_err(|reason| FakeGpusError::BadCpuRange {
        location: location.clone(),
        range: cpus.clone().unwrap_or_else(|| "(null)".into()),
        reason,
    })?;
    let record = GresRecord {
        name: "gpu".to_string(),
        count: 1,
        cpu_cnt,
        cpus,
        cpus_bitmap: Some(bitmap),
        file: file.map(str::to_string),
        links: links.map(str::to_string),
        type_name: type_name.map(str::to_string),
        unique_id: unique_id.map(str::to_string),
        flags: flags.map_or(ConfFlags::default(), |f| parse_flags(f).flags),
        plugin_id: 0,
    };
    add_gres_record(record).map(Some).map_err(|source| FakeGpusError::Affinity { location: location.clone(), source })
}

/// How C's `printf("%s")` shows a string that may be NULL.
fn c_str(s: Option<&str>) -> &str {
    s.unwrap_or("(null)")
}

/// The stock `GRES_PARSABLE` line of a record, which Slurm's test suite
/// reads: `GRES_PARSABLE[gpu](1):type|cpu_cnt|cpus|links|file|[unique_id|]flags`.
pub fn to_parsable(r: &GresRecord) -> String {
    format!(
        "GRES_PARSABLE[{}]({}):{}|{}|{}|{}|{}|{}{}{}",
        r.name,
        r.count,
        c_str(r.type_name.as_deref()),
        r.cpu_cnt as i32,
        c_str(r.cpus.as_deref()),
        c_str(r.links.as_deref()),
        c_str(r.file.as_deref()),
        r.unique_id.as_deref().unwrap_or(""),
        if r.unique_id.is_some() { "|" } else { "" },
        flags_to_string(r.flags),
    )
}

/// The stock one-line log form of a record (`print_gres_conf()`).
pub fn to_log_line(r: &GresRecord) -> String {
    format!(
        "    GRES[{}] Type:{} Count:{} Cores({}):{}  Links:{} Flags:{} File:{} UniqueId:{}",
        r.name,
        c_str(r.type_name.as_deref()),
        r.count,
        r.cpu_cnt as i32,
        c_str(r.cpus.as_deref()),
        c_str(r.links.as_deref()),
        flags_to_string(r.flags),
        c_str(r.file.as_deref()),
        c_str(r.unique_id.as_deref()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounded_read::special::Scratch;
    use crate::model::gres_build_id;

    fn parse(text: &str) -> FakeGpus {
        parse_fake_gpus(text, Path::new("/etc/slurm/fake_gpus.conf"), CpuConv::Nvml).unwrap()
    }

    fn errors(f: &FakeGpus) -> Vec<(usize, String)> {
        f.diagnostics.iter().filter(|d| d.level == LogLevel::Error).map(|d| (d.location.as_ref().map_or(0, |l| l.line), d.message.clone())).collect()
    }

    #[test]
    fn one_gpu_per_line() {
        let f = parse("# comment\n\ntesla|4|0-1|-1,0|/dev/nvidia0\nv100|8|(null)|(null)|/dev/nvidia1|MIG-123|nvidia_gpu_env\n");
        assert_eq!(f.records.len(), 2);
        let r = &f.records[0];
        assert_eq!(r.name, "gpu");
        assert_eq!(r.count, 1);
        assert_eq!(r.type_name.as_deref(), Some("tesla"));
        assert_eq!(r.cpu_cnt, 4);
        assert_eq!(r.cpus.as_deref(), Some("0-1"));
        assert_eq!(r.cpus_bitmap, Some(Bitmap::from_indices(4, &[0, 1])));
        assert_eq!(r.links.as_deref(), Some("-1,0"));
        assert_eq!(r.file.as_deref(), Some("/dev/nvidia0"));
        assert_eq!(r.unique_id, None);
        assert_eq!(r.flags, ConfFlags(ConfFlags::HAS_FILE | ConfFlags::HAS_TYPE));
        assert_eq!(r.plugin_id, gres_build_id("gpu"));
        let r = &f.records[1];
        assert_eq!(r.cpus, None);
        assert_eq!(r.cpus_bitmap, Some(Bitmap::new(8)));
        assert_eq!(r.links, None);
        assert_eq!(r.unique_id.as_deref(), Some("MIG-123"));
        assert_eq!(r.flags, ConfFlags(ConfFlags::HAS_FILE | ConfFlags::HAS_TYPE | ConfFlags::ENV_NVML));
        assert!(errors(&f).is_empty());
        assert!(f.diagnostics.iter().any(|d| d.level == LogLevel::Debug && d.message == "tesla|4|0-1|-1,0|/dev/nvidia0"));
    }

    #[test]
    fn parsable_and_log_forms() {
        let f = parse("tesla|4|0-1|(null)|/dev/nvidia1\n(null)|4|(null)|-1,0|(null)|uuid-9\n");
        assert_eq!(to_parsable(&f.records[0]), "GRES_PARSABLE[gpu](1):tesla|4|0-1|(null)|/dev/nvidia1|HAS_FILE,HAS_TYPE");
        assert_eq!(to_parsable(&f.records[1]), "GRES_PARSABLE[gpu](1):(null)|4|(null)|-1,0|(null)|uuid-9|");
        assert_eq!(
            to_log_line(&f.records[0]),
            "    GRES[gpu] Type:tesla Count:1 Cores(4):0-1  Links:(null) Flags:HAS_FILE,HAS_TYPE File:/dev/nvidia1 UniqueId:(null)"
        );
    }

    #[test]
    fn several_files_make_a_multiple_files_gpu() {
        let f = parse("a100|4|0|(null)|/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21|MIG-1\n");
        assert_eq!(f.records[0].flags, ConfFlags(ConfFlags::HAS_FILE | ConfFlags::HAS_MULT | ConfFlags::HAS_TYPE));
    }

    #[test]
    fn malformed_lines_are_logged_and_still_make_gpus() {
        let f = parse("tesla|4|0-1\na|4|0|(null)|/dev/x|u|CountOnly|extra\n");
        assert_eq!(f.records.len(), 2);
        assert_eq!(f.records[0].file, None);
        assert_eq!(f.records[1].flags, ConfFlags(ConfFlags::HAS_FILE | ConfFlags::HAS_TYPE | ConfFlags::COUNT_ONLY));
        let errs = errors(&f);
        assert_eq!(errs.len(), 3);
        assert_eq!(errs[0].0, 1);
        assert!(errs[0].1.starts_with("Line #1 in fake_gpus.conf failed to parse!"));
        assert_eq!(errs[1], (2, "Malformed line: too many data fields".to_string()));
        assert!(errs[2].1.starts_with("Line #2 in fake_gpus.conf failed to parse!"));
    }

    #[test]
    fn empty_fields_collapse_like_strtok() {
        // "||" is one separator: the range moves into cpu_count's place.
        let f = parse("tesla||4|0-1|(null)|/dev/nvidia0\n");
        let r = &f.records[0];
        assert_eq!(r.cpu_cnt, 4);
        assert_eq!(r.cpus.as_deref(), Some("0-1"));
        assert_eq!(r.file.as_deref(), Some("/dev/nvidia0"));
    }

    #[test]
    fn line_ends_at_first_cr_and_crlf_works() {
        let f = parse("a|4|0|(null)|/dev/nvidia0\r\nb|4|1|(null)|/dev/nvidia1\rjunk\n");
        assert_eq!(f.records.len(), 2);
        assert_eq!(f.records[1].file.as_deref(), Some("/dev/nvidia1"));
    }

    #[test]
    fn long_lines_are_skipped() {
        let tail = "|4|0|(null)|/dev/nvidia0";
        let ok = format!("{}{tail}", "t".repeat(MAX_LINE_LEN - tail.len()));
        assert_eq!(ok.len(), MAX_LINE_LEN);
        let long = format!("{}|4|0|(null)|/dev/nvidia0", "t".repeat(400));
        let f = parse(&format!("{ok}\n{long}\n"));
        assert_eq!(f.records.len(), 1);
        assert_eq!(errors(&f), vec![(2, format!("Line #2 in fake_gpus.conf is longer than {MAX_LINE_LEN} characters; ignoring it"))]);
    }

    #[test]
    fn fatal_cpu_ranges() {
        let e = parse_fake_gpus("a|4|0-1|(null)|/dev/x\nb|4|2-7|(null)|/dev/y\n", Path::new("f"), CpuConv::Nvml).unwrap_err();
        assert!(matches!(&e, FakeGpusError::BadCpuRange { location, range, .. } if location.line == 2 && range == "2-7"));
        assert!(e.to_string().starts_with("f:2:1: bit_unfmt() failed for CPU range: 2-7"));
        // Any range needs at least one CPU.
        assert!(parse_fake_gpus("a|0|0|(null)|/dev/x\n", Path::new("f"), CpuConv::Nvml).is_err());
        assert!(parse_fake_gpus("a|4|zero|(null)|/dev/x\n", Path::new("f"), CpuConv::Nvml).is_err());
    }

    #[test]
    fn cpu_counts() {
        assert_eq!(parse("a|  12abc|(null)|(null)|/dev/x\n").records[0].cpu_cnt, 12);
        assert_eq!(parse("a|abc|(null)|(null)|/dev/x\n").records[0].cpu_cnt, 0);
        for bad in ["-1", "99999999999999999999999", "65537"] {
            let e = parse_fake_gpus(&format!("a|{bad}|(null)|(null)|/dev/x\n"), Path::new("f"), CpuConv::Nvml).unwrap_err();
            assert!(matches!(e, FakeGpusError::BadCpuCount { .. }), "{bad}");
        }
    }

    #[test]
    fn nvml_test_keywords() {
        const ULONG_BITS: usize = u64::BITS as usize;
        let cpus = |range: &str, cnt: u32| parse(&format!("t|{cnt}|{range}|(null)|/dev/x\n")).records[0].cpus.clone();
        assert_eq!(cpus("~one", 16).as_deref(), Some("0"));
        assert_eq!(cpus("~three", 4).as_deref(), Some("0-1"));
        assert_eq!(cpus("~half", 16).as_deref(), Some("8-15"));
        assert_eq!(cpus("~max", 32768).as_deref(), Some("0-32767"));
        let one_word = format!("0-{}", ULONG_BITS - 1);
        assert_eq!(cpus("~X", ULONG_BITS as u32).as_deref(), Some(one_word.as_str()));
        let three_words = format!("0-{}", 3 * ULONG_BITS - 1);
        assert_eq!(cpus("~XXX", 3 * ULONG_BITS as u32).as_deref(), Some(three_words.as_str()));
        let f = parse("t|16|~half|(null)|/dev/x\n");
        assert_eq!(f.records[0].cpus_bitmap, Some(Bitmap::from_indices(16, &(8..16).collect::<Vec<_>>())));
        assert!(f.diagnostics.iter().any(|d| d.level == LogLevel::Info && d.message == "gpu_p_test_cpu_conv: cpu_range: ~half"));
        // Unknown keyword: an empty (not missing) range.
        let f = parse("t|16|~bogus|(null)|/dev/x\n");
        assert_eq!(f.records[0].cpus.as_deref(), Some(""));
        assert_eq!(errors(&f), vec![(1, "Unknown test keyword".to_string())]);
        let e = parse_fake_gpus("t|16|~zero|(null)|/dev/x\n", Path::new("f"), CpuConv::Nvml).unwrap_err();
        assert!(matches!(e, FakeGpusError::EmptyAffinity { .. }));
        // ~max needs the CPUs to be there.
        assert!(matches!(parse_fake_gpus("t|16|~max|(null)|/dev/x\n", Path::new("f"), CpuConv::Nvml), Err(FakeGpusError::BadCpuRange { .. })));
    }

    #[test]
    fn other_gpu_plugins_give_no_range() {
        let f = parse_fake_gpus("t|16|~half|(null)|/dev/x\n", Path::new("f"), CpuConv::Unsupported).unwrap();
        assert_eq!(f.records[0].cpus, None);
        assert_eq!(f.records[0].cpus_bitmap, Some(Bitmap::new(16)));
    }

    #[test]
    fn missing_file_means_no_fake_gpus() {
        assert_eq!(load_fake_gpus(Path::new("/nonexistent/fake_gpus.conf"), CpuConv::Nvml), Ok(None));
    }

    #[test]
    fn loads_from_disk() {
        let dir = std::env::temp_dir().join(format!("fake_gpus_test_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fake_gpus.conf");
        std::fs::write(&path, "t|4|0|(null)|/dev/nvidia0\n").unwrap();
        let f = load_fake_gpus(&path, CpuConv::Nvml).unwrap().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(f.records.len(), 1);
        assert_eq!(f.diagnostics[0].message, format!("Adding fake system GPU data from {}", path.display()));
    }

    /// `path` gives no GPUs, and an error line that names it with `reason`.
    #[track_caller]
    fn refused(path: &Path, reason: &str) {
        let f = load_fake_gpus(path, CpuConv::Nvml).unwrap().expect("the file exists");
        assert!(f.records.is_empty());
        let errors: Vec<_> = f.diagnostics.iter().filter(|d| d.level == LogLevel::Error).collect();
        assert_eq!(errors.len(), 1, "{:?}", f.diagnostics);
        assert_eq!(errors[0].message, format!("Unable to read \"{}\": {reason}", path.display()));
    }

    #[test]
    fn dev_zero_is_refused() {
        let s = Scratch::new("fake-zero");
        refused(&s.dev_zero("fake_gpus.conf"), "a character device, not a regular file");
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let s = Scratch::new("fake-fifo");
        refused(&s.fifo("fake_gpus.conf"), "a FIFO, not a regular file");
    }

    #[test]
    fn directory_is_refused() {
        let s = Scratch::new("fake-dir");
        refused(&s.dir("fake_gpus.conf"), "a directory, not a regular file");
    }

    #[test]
    fn ten_gb_sparse_file_is_refused() {
        let s = Scratch::new("fake-sparse");
        refused(&s.sparse("fake_gpus.conf", 10 << 30), "10737418240 bytes, more than the 16777216 read");
    }

    #[test]
    fn file_over_the_bound_is_refused() {
        let s = Scratch::new("fake-over");
        let mut text = "t|4|0|(null)|/dev/nvidia0\n".repeat(1 << 20);
        text.truncate(MAX_FILE_LEN as usize + 1);
        refused(&s.file("fake_gpus.conf", text), "16777217 bytes, more than the 16777216 read");
    }

    #[test]
    fn arbitrary_input_never_panics() {
        for s in ["|", "||||||||||", "~|~|~|~|~", "a|1|~X|b|c", "a|1|~|b|c", "\u{e9}|\u{e9}|\u{e9}|\u{e9}|\u{e9}", "a|4|0-|x|y", "a|4|,|x|y"] {
            let _ = parse_fake_gpus(s, Path::new("f"), CpuConv::Nvml);
            let _ = parse_fake_gpus(s, Path::new("f"), CpuConv::Unsupported);
        }
    }
}
