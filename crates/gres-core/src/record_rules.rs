//! The record rules of Slurm's common GRES code that gres.conf parsing,
//! fake_gpus.conf and the gres/gpu merge all use: shared GRES names, the
//! `Links=` check, and what adding a record to a list sets on it (the
//! `Flags=` words are [`crate::flags`]).

use thiserror::Error;

use crate::hostlist;
use crate::model::{gres_build_id, ConfFlags, GresRecord};

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
