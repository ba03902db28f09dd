//! The release series of the test bed, and which of them a run selects
//! (`GRES_RS_SLURM`).

use super::series_of;
use crate::chroot::{self, Release};

/// "24.11" of a release.
fn release_series(r: &Release) -> &'static str {
    r.slurm.rsplit_once('.').map(|x| x.0).unwrap_or(r.slurm)
}

/// The series the test bed has, Debian's and those built from source,
/// oldest first.
pub fn all_series() -> Vec<&'static str> {
    chroot::all_releases().iter().map(release_series).collect()
}

/// The series of the releases of one origin (Debian's: host and chroots;
/// or built from source).
pub fn series_from(source: bool) -> Vec<&'static str> {
    chroot::all_releases().iter().filter(|r| (r.origin == chroot::Origin::Source) == source).map(release_series).collect()
}

/// What `GRES_RS_SLURM` selects: `all` (also when unset or empty: every
/// release of the test bed that exists, a chroot not built being skipped
/// with a message) or a comma-separated list, each then required (a
/// missing chroot fails under `GRES_RS_REQUIRE_SLURM=1`) of series
/// (`22.05,26.05`; `source:23.11` is `23.11`), `debian` (22.05, 24.11,
/// 26.05) and `source` (the five built from source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    All,
    Only(Vec<String>),
}

impl Selection {
    pub fn from_env() -> Result<Selection, String> {
        Selection::parse(&std::env::var("GRES_RS_SLURM").unwrap_or_default())
    }
    pub fn parse(text: &str) -> Result<Selection, String> {
        let t = text.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("all") {
            return Ok(Selection::All);
        }
        let known = all_series();
        let mut v: Vec<String> = Vec::new();
        for item in t.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let add: Vec<String> = match item.to_ascii_lowercase().as_str() {
                "all" => known.iter().map(|s| s.to_string()).collect(),
                "debian" => series_from(false).into_iter().map(String::from).collect(),
                "source" => series_from(true).into_iter().map(String::from).collect(),
                _ => {
                    let s = series_of(item.strip_prefix("source:").unwrap_or(item));
                    if !known.contains(&s.as_str()) {
                        return Err(format!("GRES_RS_SLURM={text}: {s} is not a release of the test bed ({}; or all, debian, source)", known.join(", ")));
                    }
                    vec![s]
                }
            };
            for s in add {
                if !v.contains(&s) {
                    v.push(s);
                }
            }
        }
        Ok(Selection::Only(v))
    }
    pub fn selects(&self, series: &str) -> bool {
        match self {
            Selection::All => true,
            Selection::Only(v) => v.iter().any(|s| s == series),
        }
    }
}
