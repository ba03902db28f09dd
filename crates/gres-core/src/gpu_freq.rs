//! `--gpu-freq`: the request syntax, the choice of a supported clock, and
//! the listing of supported clocks, as Slurm 22.05's gpu plugins do them.
//! Pure: the NVML calls are in `crate::nvml::clocks`.
//!
//! Syntax (`srun --gpu-freq=...`, `GpuFreqDef=` in slurm.conf): a comma
//! separated list of `low`, `medium`, `highm1`, `high` or a number of MHz
//! for the graphics clock, `memory=<same>` for the memory clock, and
//! `verbose`.  Words are case-insensitive.  What the job leaves out comes
//! from `GpuFreqDef` (default `high,memory=high`).

use super::model::{LogLevel, LogLine};
use std::fmt;

/// `GpuFreqDef`'s value when slurm.conf does not set it.
pub const DEFAULT_GPU_FREQ_DEF: &str = "high,memory=high";

/// Above this many supported clocks, listings show only some of them.
const FREQS_CONCISE: usize = 5;

/// One requested clock: a level or a number of MHz.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreqRequest {
    Low,
    Medium,
    /// The second highest.
    HighM1,
    High,
    Mhz(u32),
}

impl FreqRequest {
    /// The request from Slurm's numeric encoding, where the levels are the
    /// four largest `unsigned int` values (so a numeric request of `-1`
    /// means `low`, as it does in Slurm); `None` for 0 ("not set").
    pub fn from_raw(v: u32) -> Option<FreqRequest> {
        match v {
            0 => None,
            u32::MAX => Some(FreqRequest::Low),
            0xffff_fffe => Some(FreqRequest::Medium),
            0xffff_fffd => Some(FreqRequest::HighM1),
            0xffff_fffc => Some(FreqRequest::High),
            mhz => Some(FreqRequest::Mhz(mhz)),
        }
    }

    fn level(word: &str) -> Option<FreqRequest> {
        match word.to_ascii_lowercase().as_str() {
            "low" => Some(FreqRequest::Low),
            "medium" => Some(FreqRequest::Medium),
            "highm1" => Some(FreqRequest::HighM1),
            "high" => Some(FreqRequest::High),
            _ => None,
        }
    }
}

/// Slurm's `gpu_common_freq_value_to_string()`.
impl fmt::Display for FreqRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FreqRequest::Low => f.write_str("low"),
            FreqRequest::Medium => f.write_str("medium"),
            FreqRequest::HighM1 => f.write_str("highm1"),
            FreqRequest::High => f.write_str("high"),
            FreqRequest::Mhz(v) => write!(f, "{v}"),
        }
    }
}

/// A parsed `--gpu-freq` with `GpuFreqDef` applied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuFreq {
    pub graphics: Option<FreqRequest>,
    pub memory: Option<FreqRequest>,
    /// `verbose` was given (by the job or by `GpuFreqDef`).
    pub verbose: bool,
    /// Debug lines about words that were ignored, worded like Slurm's.
    pub notes: Vec<LogLine>,
}

/// One clock's level and number as Slurm's parser keeps them: a level
/// wins over a number; a level word replaces the level only, any other
/// word clears the level and replaces the number (so a bad word clears
/// both).
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    level: Option<FreqRequest>,
    mhz: u32,
}

impl Slot {
    fn take(&mut self, word: &str) -> bool {
        self.level = level_word(word);
        if self.level.is_some() {
            return true;
        }
        self.mhz = numeric_value(word);
        self.mhz != 0
    }
    fn get(&self) -> Option<FreqRequest> {
        self.level.or_else(|| FreqRequest::from_raw(self.mhz))
    }
}

#[derive(Default)]
struct Parsed {
    gpu: Slot,
    mem: Slot,
}

/// A level word; numbers and unknown words are `None`.
fn level_word(word: &str) -> Option<FreqRequest> {
    match word.bytes().next() {
        None => None,
        Some(b) if b.is_ascii_digit() => None,
        Some(_) => FreqRequest::level(word),
    }
}

/// C's `strtoul(word, NULL, 10)` truncated to `unsigned int`: leading
/// blanks and a sign are accepted, parsing stops at the first non-digit,
/// a negative number wraps, an overflow saturates.
fn numeric_value(word: &str) -> u32 {
    let s = word.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = digits.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    if end == 0 {
        return 0;
    }
    let mut v: u64 = 0;
    for b in digits[..end].bytes() {
        v = match v.checked_mul(10).and_then(|v| v.checked_add(u64::from(b - b'0'))) {
            Some(v) => v,
            None => return u32::MAX,
        };
    }
    let v = if negative { v.wrapping_neg() } else { v };
    v as u32
}

fn parse_into(spec: &str, out: &mut Parsed, verbose: &mut bool, notes: &mut Vec<LogLine>) {
    for tok in spec.split(',').filter(|t| !t.is_empty()) {
        if let Some((key, value)) = tok.split_once('=') {
            if key.eq_ignore_ascii_case("memory") {
                if !out.mem.take(value) {
                    notes.push(LogLine::new(LogLevel::Debug, format!("Invalid job GPU memory frequency: {key}")));
                }
            } else {
                notes.push(LogLine::new(LogLevel::Debug, format!("gpu/nvml: parse_gpu_freq: Invalid job device frequency type: {key}")));
            }
        } else if tok.eq_ignore_ascii_case("verbose") {
            *verbose = true;
        } else if !out.gpu.take(tok) {
            notes.push(LogLine::new(LogLevel::Debug, format!("Invalid job GPU frequency: {tok}")));
        }
    }
}

/// Slurm's `gpu_common_parse_gpu_freq()`: the job's `--gpu-freq` value
/// (the part after `gpu:`), completed from `GpuFreqDef`.
pub fn parse_gpu_freq(job: Option<&str>, freq_def: Option<&str>) -> GpuFreq {
    let mut out = GpuFreq::default();
    let (mut job_p, mut def_p) = (Parsed::default(), Parsed::default());
    parse_into(job.unwrap_or(""), &mut job_p, &mut out.verbose, &mut out.notes);
    parse_into(freq_def.unwrap_or(""), &mut def_p, &mut out.verbose, &mut out.notes);
    out.graphics = job_p.gpu.get().or_else(|| def_p.gpu.get());
    out.memory = job_p.mem.get().or_else(|| def_p.mem.get());
    out
}

/// The GPU part of a step's TRES frequency string (`gpu:high;...` or
/// `cpu:...;gpu:medium,memory=low`): what follows `gpu:` up to the next
/// `;`, or `None` when there is no `gpu:` part.
pub fn gpu_part_of_tres_freq(tres_freq: &str) -> Option<&str> {
    let start = tres_freq.find("gpu:")? + 4;
    let rest = &tres_freq[start..];
    Some(rest.split(';').next().unwrap_or(rest))
}

/// Slurm's `gpu_common_get_nearest_freq()`: the supported clock to use for
/// a request, given the supported clocks sorted highest first.  A number
/// is rounded up to the next supported clock, and clamped to the range.
/// `None` when the list is empty or starts with 0 (nothing to choose from).
/// The note is the `DebugFlags=Gres` line Slurm logs when it rounds.
pub fn nearest_freq(req: FreqRequest, desc: &[u32]) -> Option<(u32, Option<String>)> {
    let (&first, &last) = (desc.first()?, desc.last()?);
    if first == 0 {
        return None;
    }
    let n = desc.len();
    let chosen = match req {
        FreqRequest::Low => last,
        FreqRequest::Medium => desc[(n - 1) / 2],
        FreqRequest::HighM1 => desc[if n == 1 { 0 } else { 1 }],
        FreqRequest::High => first,
        FreqRequest::Mhz(f) if f > first => {
            return Some((first, Some(format!("Rounding requested frequency {f} MHz down to {first} MHz (highest available)"))));
        }
        FreqRequest::Mhz(f) if f < last => {
            return Some((last, Some(format!("Rounding requested frequency {f} MHz up to {last} MHz (lowest available)"))));
        }
        FreqRequest::Mhz(f) => {
            if desc.contains(&f) {
                f
            } else {
                // The smallest supported clock above the request.
                let up = desc.iter().copied().filter(|&c| c > f).min().unwrap_or(first);
                return Some((up, Some(format!("Rounding requested frequency {f} MHz up to {up} MHz (next available)"))));
            }
        }
    };
    Some((chosen, None))
}

/// Sort clocks highest first (NVML usually returns them so already).
pub fn sort_descending(freqs: &mut [u32]) {
    freqs.sort_unstable_by(|a, b| b.cmp(a));
}

/// The indexes a listing of `size` clocks shows: all of them, or first,
/// second, middle, penultimate and last (`None` marks the `...` rows).
pub fn listing_indexes(size: usize) -> Vec<Option<usize>> {
    if size <= FREQS_CONCISE {
        return (0..size).map(Some).collect();
    }
    let last = size - 1;
    vec![Some(0), Some(1), None, Some(last / 2), None, Some(last - 1), Some(last)]
}

/// Slurm's `gpu_common_print_freqs()`: the lines listing supported clocks
/// (`freq_type` e.g. "GPU Graphics"), each indented by `indent` blanks.
pub fn freq_listing(freqs: &[u32], freq_type: &str, indent: usize) -> Vec<String> {
    let pad = " ".repeat(indent);
    let kind = if freq_type.is_empty() { String::new() } else { format!("{freq_type} ") };
    let mut lines = vec![format!("{pad}Possible {kind}Frequencies ({}):", freqs.len()), format!("{pad}---------------------------------")];
    for i in listing_indexes(freqs.len()) {
        lines.push(match i {
            Some(i) => format!("{pad}  *{} MHz [{i}]", freqs[i]),
            None => format!("{pad}  ..."),
        });
    }
    lines
}

/// The `memory_freq:M,graphics_freq:G` text of Slurm's per-GPU log line
/// (and of `GpuFreq=` on the step's stderr with `verbose`).
pub fn applied_text(mem_mhz: u32, gfx_mhz: u32) -> String {
    let mut parts = Vec::new();
    if mem_mhz != 0 {
        parts.push(format!("memory_freq:{mem_mhz}"));
    }
    if gfx_mhz != 0 {
        parts.push(format!("graphics_freq:{gfx_mhz}"));
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use FreqRequest::*;

    fn p(job: &str) -> GpuFreq {
        parse_gpu_freq(Some(job), Some(DEFAULT_GPU_FREQ_DEF))
    }

    #[test]
    fn levels_numbers_and_memory() {
        let f = p("low,memory=medium");
        assert_eq!((f.graphics, f.memory, f.verbose), (Some(Low), Some(Medium), false));
        let f = p("1500,memory=877,verbose");
        assert_eq!((f.graphics, f.memory, f.verbose), (Some(Mhz(1500)), Some(Mhz(877)), true));
        let f = p("HIGHM1");
        assert_eq!((f.graphics, f.memory), (Some(HighM1), Some(High)));
        let f = p("Memory=LOW");
        assert_eq!((f.graphics, f.memory), (Some(High), Some(Low)));
    }

    #[test]
    fn defaults_fill_gaps() {
        assert_eq!(p("").graphics, Some(High));
        assert_eq!(p("").memory, Some(High));
        let f = parse_gpu_freq(Some("medium"), None);
        assert_eq!((f.graphics, f.memory), (Some(Medium), None));
        let f = parse_gpu_freq(None, Some("memory=1215,verbose"));
        assert_eq!((f.graphics, f.memory, f.verbose), (None, Some(Mhz(1215)), true));
    }

    #[test]
    fn later_words_and_bad_words_follow_slurm() {
        // A level beats a number, wherever it is.
        assert_eq!(p("1000,high").graphics, Some(High));
        // A number after a level clears the level.
        assert_eq!(p("high,1000").graphics, Some(Mhz(1000)));
        // A bad word clears what came before and is reported.
        let f = parse_gpu_freq(Some("high,fast"), None);
        assert_eq!(f.graphics, None);
        assert_eq!(f.notes, vec![LogLine::new(LogLevel::Debug, "Invalid job GPU frequency: fast")]);
        assert_eq!(parse_gpu_freq(Some("900,fast"), None).graphics, None);
        assert_eq!(parse_gpu_freq(Some("900,low,fast"), None).graphics, None);
        // A level keeps an earlier number underneath (unused while it wins).
        assert_eq!(parse_gpu_freq(Some("900,low"), None).graphics, Some(Low));
        let f = parse_gpu_freq(Some("cpu=3,memory=x"), None);
        assert_eq!(f.notes.len(), 2);
        assert!(f.notes[0].message.ends_with("Invalid job device frequency type: cpu"));
        assert_eq!(f.notes[1].message, "Invalid job GPU memory frequency: memory");
        assert_eq!(parse_gpu_freq(Some(",,low,,"), None).graphics, Some(Low));
    }

    #[test]
    fn numbers_like_strtoul() {
        assert_eq!(numeric_value("1410MHz"), 1410);
        assert_eq!(numeric_value("  7"), 7);
        assert_eq!(numeric_value("+7"), 7);
        assert_eq!(numeric_value("x7"), 0);
        assert_eq!(numeric_value(""), 0);
        assert_eq!(numeric_value("-1"), u32::MAX);
        assert_eq!(numeric_value("99999999999999999999999"), u32::MAX);
        // "-1" is Slurm's encoding of "low".
        assert_eq!(parse_gpu_freq(Some("-1"), None).graphics, Some(Low));
        assert_eq!(parse_gpu_freq(Some("0"), None).graphics, None);
    }

    #[test]
    fn display_like_slurm() {
        assert_eq!(Low.to_string(), "low");
        assert_eq!(HighM1.to_string(), "highm1");
        assert_eq!(Mhz(1980).to_string(), "1980");
    }

    #[test]
    fn tres_freq_gpu_part() {
        assert_eq!(gpu_part_of_tres_freq("gpu:high"), Some("high"));
        assert_eq!(gpu_part_of_tres_freq("cpu:low;gpu:medium,memory=low;x:y"), Some("medium,memory=low"));
        assert_eq!(gpu_part_of_tres_freq("cpu:low"), None);
        assert_eq!(gpu_part_of_tres_freq("gpu:"), Some(""));
    }

    #[test]
    fn nearest() {
        let f = [1980, 1900, 1500, 1000, 210];
        assert_eq!(nearest_freq(Low, &f), Some((210, None)));
        assert_eq!(nearest_freq(Medium, &f), Some((1500, None)));
        assert_eq!(nearest_freq(HighM1, &f), Some((1900, None)));
        assert_eq!(nearest_freq(High, &f), Some((1980, None)));
        assert_eq!(nearest_freq(Mhz(1500), &f), Some((1500, None)));
        assert_eq!(nearest_freq(Mhz(1200), &f).map(|x| x.0), Some(1500));
        assert_eq!(nearest_freq(Mhz(1901), &f).map(|x| x.0), Some(1980));
        let (v, note) = nearest_freq(Mhz(5000), &f).unwrap();
        assert_eq!(v, 1980);
        assert_eq!(note.unwrap(), "Rounding requested frequency 5000 MHz down to 1980 MHz (highest available)");
        assert_eq!(nearest_freq(Mhz(1), &f).map(|x| x.0), Some(210));
        assert_eq!(nearest_freq(HighM1, &[877]), Some((877, None)));
        assert_eq!(nearest_freq(Medium, &[2619, 1593]), Some((2619, None)));
        assert_eq!(nearest_freq(High, &[]), None);
        assert_eq!(nearest_freq(High, &[0, 0]), None);
    }

    #[test]
    fn listings() {
        assert_eq!(
            freq_listing(&[1593, 877], "GPU Graphics", 0),
            vec!["Possible GPU Graphics Frequencies (2):", "---------------------------------", "  *1593 MHz [0]", "  *877 MHz [1]"]
        );
        let many: Vec<u32> = (0..10).map(|i| 2000 - i * 100).collect();
        let l = freq_listing(&many, "", 2);
        assert_eq!(l[0], "  Possible Frequencies (10):");
        assert_eq!(&l[2..], &["    *2000 MHz [0]", "    *1900 MHz [1]", "    ...", "    *1600 MHz [4]", "    ...", "    *1200 MHz [8]", "    *1100 MHz [9]"]);
        assert_eq!(applied_text(2619, 1980), "memory_freq:2619,graphics_freq:1980");
        assert_eq!(applied_text(0, 1980), "graphics_freq:1980");
        let mut v = vec![3, 9, 1];
        sort_descending(&mut v);
        assert_eq!(v, vec![9, 3, 1]);
    }
}
