//! The record rules of Slurm's common GRES code that gres.conf parsing,
//! fake_gpus.conf and the gres/gpu merge all use: the `Flags=` words, the
//! `Links=` check, and what adding a record to a list sets on it.

use thiserror::Error;

use super::super::behaviour::{Behaviour, Feature};
use super::super::hostlist;
use super::super::model::{gres_build_id, ConfFlags, GresRecord};

/// Slurm's `xstrcasestr()`: whether `needle` occurs in `haystack`, ignoring
/// ASCII case.  Either one missing never matches, and an empty needle only
/// matches a non-empty haystack.
pub fn contains_ignore_case(haystack: Option<&str>, needle: Option<&str>) -> bool {
    let (Some(hay), Some(needle)) = (haystack, needle) else {
        return false;
    };
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    let Some(first) = needle.first().map(u8::to_ascii_lowercase) else {
        return !hay.is_empty();
    };
    needle.len() <= hay.len() && hay.windows(needle.len()).any(|w| w[0].to_ascii_lowercase() == first && w.eq_ignore_ascii_case(needle))
}

/// What a `Flags=` value says (`gres_flags_parse()`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParsedFlags {
    /// `CountOnly`, the `*_env` words and `one_sharing`.
    pub flags: ConfFlags,
    /// `no_gpu_env`: no GPU environment variable at all.
    pub no_gpu_env: bool,
    /// `one_sharing` or `all_sharing` was written.
    pub sharing_mentioned: bool,
}

/// The flag words and their bits.  Like Slurm, each word is looked for
/// anywhere in the value, in any case, so `Flags=nvidia_gpu_env,CountOnly`,
/// `flags=COUNTONLY` and even `Flags=xCountOnlyx` all count.
pub const FLAG_WORDS: [(&str, u32); 6] = [
    ("CountOnly", ConfFlags::COUNT_ONLY),
    ("nvidia_gpu_env", ConfFlags::ENV_NVML),
    ("amd_gpu_env", ConfFlags::ENV_RSMI),
    ("intel_gpu_env", ConfFlags::ENV_ONEAPI),
    ("opencl_env", ConfFlags::ENV_OPENCL),
    ("one_sharing", ConfFlags::ONE_SHARING),
];

/// The flag words of later releases, with their bits and what says
/// whether a release has them ([`Behaviour::flag_words`]).
pub const LATER_FLAG_WORDS: [(&str, u32, Feature); 2] =
    [("explicit", ConfFlags::EXPLICIT, Feature::FlagExplicit), ("env_uuid", ConfFlags::BIT14, Feature::FlagEnvUuid)];

/// Slurm's `gres_flags_parse()` (of the baseline release).
pub fn parse_flags(input: &str) -> ParsedFlags {
    parse_flags_for(input, &Behaviour::BASELINE)
}

/// `gres_flags_parse()` of the release that behaves as `behaviour`.
pub fn parse_flags_for(input: &str, behaviour: &Behaviour) -> ParsedFlags {
    let has = |word: &str| contains_ignore_case(Some(input), Some(word));
    let mut flags = ConfFlags::default();
    for (word, bit) in behaviour.flag_words() {
        if has(word) {
            flags.set(bit);
        }
    }
    ParsedFlags { flags, no_gpu_env: has("no_gpu_env"), sharing_mentioned: flags.has(ConfFlags::ONE_SHARING) || has("all_sharing") }
}

/// The words of a `Flags=` value that only later releases than
/// `behaviour`'s know (which ignores them): each with its byte offset in
/// `input` and its feature.
pub fn later_flag_words(input: &str, behaviour: &Behaviour) -> Vec<(usize, &'static str, Feature)> {
    let lower = input.to_ascii_lowercase();
    LATER_FLAG_WORDS.iter().filter(|(_, _, f)| !behaviour.has(*f)).filter_map(|(word, _, f)| lower.find(word).map(|at| (at, *word, *f))).collect()
}

/// The comma-separated words of a `Flags=` value in which Slurm finds no
/// word it knows (of any release: [`later_flag_words`] reports those of
/// later ones), so that it ignores them without a word: each with its byte
/// offset in `input` and the closest known word, if one is close.
pub fn unknown_flag_words(input: &str) -> Vec<(usize, &str, Option<&'static str>)> {
    let known: Vec<&'static str> =
        FLAG_WORDS.iter().map(|(w, _)| *w).chain(LATER_FLAG_WORDS.iter().map(|(w, _, _)| *w)).chain(["no_gpu_env", "all_sharing"]).collect();
    let mut out = Vec::new();
    let mut at = 0;
    for word in input.split(',') {
        let trimmed = word.trim();
        let lead = word.len() - word.trim_start().len();
        if !trimmed.is_empty() && !known.iter().any(|k| contains_ignore_case(Some(trimmed), Some(k))) {
            let lower = trimmed.to_ascii_lowercase();
            let lowered: Vec<String> = known.iter().map(|k| k.to_ascii_lowercase()).collect();
            let candidates: Vec<&str> = lowered.iter().map(String::as_str).collect();
            let close = crate::text::closest_key(&lower, &candidates).and_then(|c| known.iter().find(|k| k.eq_ignore_ascii_case(c)).copied());
            out.push((at + lead, trimmed, close));
        }
        at += word.len() + 1;
    }
    out
}

/// Whether a GRES name is one of the shared kinds (`mps`, `shard`: exact,
/// lower case, as Slurm compares).
pub fn is_shared_name(name: &str) -> bool {
    name == "mps" || name == "shard"
}

/// Largest link count a `Links=` entry may hold (`GRES_MAX_LINK`).
pub const MAX_LINK: i64 = 1023;

/// Why a `Links=` value is invalid (`gres_links_validate()` returning -2);
/// the messages are Slurm's.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum LinksError {
    #[error("gres_links_validate: Links is an empty string")]
    Empty,
    #[error("gres_links_validate: Failed to parse token '{token}' in links string '{links}'")]
    BadToken { token: String, links: String },
    #[error("gres_links_validate: links string '{0}' has more than one -1")]
    SeveralSelf(String),
    #[error("gres_links_validate: -1 wasn't found in links string '{0}'")]
    NoSelf(String),
}

/// `strtol()` of a whole token: optional leading blanks and sign, then
/// digits to the end.
fn parse_link_token(token: &str) -> Option<i64> {
    let t = token.trim_start_matches(|c: char| c.is_ascii() && crate::text::is_c_space(c as u8));
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Anything too long for an i64 is out of range anyway.
    let magnitude: i64 = digits.parse().unwrap_or(i64::MAX);
    Some(if negative { -magnitude } else { magnitude })
}

/// Slurm's `gres_links_validate()`: the position of the device itself (the
/// single `-1`) in a comma-separated `Links` list of numbers from -2 to
/// [`MAX_LINK`].  Empty items are skipped, as `strtok()` does.
pub fn links_validate(links: &str) -> Result<usize, LinksError> {
    if links.is_empty() {
        return Err(LinksError::Empty);
    }
    let mut own = None;
    for (i, token) in links.split(',').filter(|t| !t.is_empty()).enumerate() {
        match parse_link_token(token) {
            Some(v) if (-2..=MAX_LINK).contains(&v) => {
                if v == -1 {
                    if own.is_some() {
                        return Err(LinksError::SeveralSelf(links.to_string()));
                    }
                    own = Some(i);
                }
            }
            _ => return Err(LinksError::BadToken { token: token.to_string(), links: links.to_string() }),
        }
    }
    own.ok_or_else(|| LinksError::NoSelf(links.to_string()))
}

/// A CPU affinity that needs more CPUs than the node has (fatal in Slurm).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("This CPU affinity bitmask ({mask}) does not fit within the CPUs configured for this node ({cpu_cnt}). Make sure that the node's CPU count is configured correctly.")]
pub struct AffinityError {
    pub mask: String,
    pub cpu_cnt: u32,
}

/// What Slurm's `add_gres_to_list()` does to a new record: fit its CPU
/// bitmap to `cpu_cnt` bits, add `HAS_FILE` (and `HAS_MULT` when the file
/// expression names several files) and `HAS_TYPE`, and set the plugin id
/// from the name.  The flags already in the record are kept.
pub fn add_gres_record(mut rec: GresRecord) -> Result<GresRecord, AffinityError> {
    let cpu_cnt = rec.cpu_cnt as usize;
    if let Some(bitmap) = rec.cpus_bitmap.as_mut() {
        if bitmap.size() != cpu_cnt {
            let needed = bitmap.last().map_or(0, |last| last + 1);
            if needed > cpu_cnt {
                return Err(AffinityError { mask: bitmap.hexmask_trim(), cpu_cnt: rec.cpu_cnt });
            }
            bitmap.resize(cpu_cnt);
        }
    }
    if let Some(file) = rec.file.as_deref() {
        rec.flags.set(ConfFlags::HAS_FILE);
        if hostlist::expand(file).map(|names| names.len() > 1).unwrap_or(false) {
            rec.flags.set(ConfFlags::HAS_MULT);
        }
    }
    if rec.type_name.is_some() {
        rec.flags.set(ConfFlags::HAS_TYPE);
    }
    rec.plugin_id = gres_build_id(&rec.name);
    Ok(rec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Bitmap;

    #[test]
    fn strcasestr_semantics() {
        assert!(contains_ignore_case(Some("tesla_V100-pcie"), Some("v100")));
        assert!(contains_ignore_case(Some("abc"), Some("")));
        assert!(!contains_ignore_case(Some(""), Some("")));
        assert!(!contains_ignore_case(None, Some("a")));
        assert!(!contains_ignore_case(Some("a"), None));
        assert!(!contains_ignore_case(Some("k20"), Some("k20m")));
    }

    #[test]
    fn flag_words_any_case_anywhere() {
        let f = parse_flags("NVIDIA_GPU_ENV,countonly");
        assert_eq!(f.flags, ConfFlags(ConfFlags::ENV_NVML | ConfFlags::COUNT_ONLY));
        assert!(!f.no_gpu_env && !f.sharing_mentioned);
        let f = parse_flags("no_gpu_env");
        assert_eq!(f.flags, ConfFlags(0));
        assert!(f.no_gpu_env);
        assert!(parse_flags("All_Sharing").sharing_mentioned);
        let f = parse_flags("one_sharing,amd_gpu_env,intel_gpu_env,opencl_env");
        assert!(f.sharing_mentioned);
        assert_eq!(f.flags, ConfFlags(ConfFlags::ONE_SHARING | ConfFlags::ENV_RSMI | ConfFlags::ENV_ONEAPI | ConfFlags::ENV_OPENCL));
        assert_eq!(parse_flags("").flags, ConfFlags(0));
    }

    #[test]
    fn links() {
        assert_eq!(links_validate("-1,0,0"), Ok(0));
        assert_eq!(links_validate("0,2,-1"), Ok(2));
        assert_eq!(links_validate(",0,,-1"), Ok(1));
        assert_eq!(links_validate(" 1,-1"), Ok(1));
        assert_eq!(links_validate("-2,-1,1023"), Ok(1));
        assert_eq!(links_validate(""), Err(LinksError::Empty));
        assert!(matches!(links_validate("0,1024,-1"), Err(LinksError::BadToken { .. })));
        assert!(matches!(links_validate("0,x,-1"), Err(LinksError::BadToken { .. })));
        assert!(matches!(links_validate("-1 ,0"), Err(LinksError::BadToken { .. })));
        assert!(matches!(links_validate("-3,-1"), Err(LinksError::BadToken { .. })));
        assert!(matches!(links_validate("99999999999999999999999,-1"), Err(LinksError::BadToken { .. })));
        assert_eq!(links_validate("-1,-1"), Err(LinksError::SeveralSelf("-1,-1".into())));
        assert_eq!(links_validate("0,0"), Err(LinksError::NoSelf("0,0".into())));
        assert_eq!(links_validate("0,0").unwrap_err().to_string(), "gres_links_validate: -1 wasn't found in links string '0,0'");
    }

    #[test]
    fn add_record_sets_flags_and_id() {
        let rec = GresRecord {
            name: "gpu".into(),
            count: 1,
            cpu_cnt: 8,
            file: Some("/dev/nvidia[0-1]".into()),
            type_name: Some("a100".into()),
            flags: ConfFlags(ConfFlags::ENV_NVML),
            ..Default::default()
        };
        let rec = add_gres_record(rec).unwrap();
        assert_eq!(rec.flags, ConfFlags(ConfFlags::ENV_NVML | ConfFlags::HAS_FILE | ConfFlags::HAS_MULT | ConfFlags::HAS_TYPE));
        assert_eq!(rec.plugin_id, gres_build_id("gpu"));
        let single = add_gres_record(GresRecord { name: "gpu".into(), file: Some("/dev/nvidia0".into()), ..Default::default() }).unwrap();
        assert_eq!(single.flags, ConfFlags(ConfFlags::HAS_FILE));
    }

    #[test]
    fn add_record_fits_the_cpu_bitmap() {
        let rec = GresRecord { name: "gpu".into(), cpu_cnt: 4, cpus_bitmap: Some(Bitmap::from_indices(64, &[1, 3])), ..Default::default() };
        let rec = add_gres_record(rec).unwrap();
        assert_eq!(rec.cpus_bitmap, Some(Bitmap::from_indices(4, &[1, 3])));
        let grown = add_gres_record(GresRecord { cpu_cnt: 16, cpus_bitmap: Some(Bitmap::from_indices(2, &[1])), ..Default::default() }).unwrap();
        assert_eq!(grown.cpus_bitmap, Some(Bitmap::from_indices(16, &[1])));
        let err = add_gres_record(GresRecord { cpu_cnt: 4, cpus_bitmap: Some(Bitmap::from_indices(64, &[4, 8])), ..Default::default() }).unwrap_err();
        assert_eq!(err, AffinityError { mask: "0x110".into(), cpu_cnt: 4 });
        assert!(err.to_string().starts_with("This CPU affinity bitmask (0x110) does not fit"));
    }
}
