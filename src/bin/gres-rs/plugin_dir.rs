//! `check`'s prediction of which file of each GRES plugin slurmd loads
//! from `PluginDir`, searched as slurmd searches it: the directories in
//! order, the first `<name>.so` that loads and whose `plugin_version` is
//! slurmd's own release; a file refused sends slurmd on to the next
//! directory, and no file accepted stops slurmd.  The likely mistakes with
//! our files (the stock directory first, `libgres_rs.so` missing beside a
//! plugin file, a build for another release) are reported before a
//! restart shows them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use slurm_gpu_gres::core::node_conf::{Problem, Severity};
use slurm_gpu_gres::core::slurm_conf::SlurmConf;
use slurm_gpu_gres::LIBRARY_FILE;

use crate::install::{library_exports, plugin_info, version_text};

/// Why slurmd passes over a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a plugin slurmd can use (no `plugin_version`, unreadable).
    NotAPlugin(String),
    /// Built for another release than slurmd's.
    Release { file: u32, slurmd: u32 },
    /// One of ours without `libgres_rs.so` beside it: `dlopen()` fails.
    NoLibrary,
    /// One of ours whose library lacks functions it needs (another build).
    LibraryMismatch(Vec<String>),
}

/// What slurmd does with one plugin name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// e.g. "gres_gpu".
    pub name: String,
    /// The file slurmd loads, whether it is ours, and its release.
    pub loaded: Option<(PathBuf, bool, u32)>,
    /// Files found before it and passed over.
    pub refused: Vec<(PathBuf, Refused)>,
    /// Our file of this name in a later directory than the loaded stock one.
    pub ours_later: Option<PathBuf>,
}

/// The search, over `dirs` in order, for each of `names`; `slurmd` is its
/// release (`None`: unknown, not compared); `read` gives a file's bytes.
pub fn predict(dirs: &[PathBuf], names: &[&str], slurmd: Option<u32>, read: &dyn Fn(&Path) -> Option<Vec<u8>>) -> Vec<Choice> {
    let mut out = Vec::new();
    for name in names {
        let mut choice = Choice { name: name.to_string(), loaded: None, refused: Vec::new(), ours_later: None };
        for dir in dirs {
            let path = dir.join(format!("{name}.so"));
            let Some(bytes) = read(&path) else { continue };
            let verdict = verdict(dir, &bytes, slurmd, read);
            match verdict {
                Ok((ours, version)) if choice.loaded.is_none() => choice.loaded = Some((path, ours, version)),
                Ok((true, _)) if choice.loaded.as_ref().is_some_and(|(_, ours, _)| !ours) && choice.ours_later.is_none() => choice.ours_later = Some(path),
                Ok(_) => {}
                Err(why) if choice.loaded.is_none() => choice.refused.push((path, why)),
                Err(_) => {}
            }
        }
        out.push(choice);
    }
    out
}

fn verdict(dir: &Path, bytes: &[u8], slurmd: Option<u32>, read: &dyn Fn(&Path) -> Option<Vec<u8>>) -> Result<(bool, u32), Refused> {
    let info = plugin_info(bytes).map_err(Refused::NotAPlugin)?;
    let ours = !info.needs.is_empty();
    if ours {
        let Some(lib) = read(&dir.join(LIBRARY_FILE)) else { return Err(Refused::NoLibrary) };
        let exports = library_exports(&lib).unwrap_or_default();
        let missing: Vec<String> = info.needs.iter().filter(|n| !exports.contains(*n)).cloned().collect();
        if !missing.is_empty() {
            return Err(Refused::LibraryMismatch(missing));
        }
    }
    if let Some(s) = slurmd {
        if info.version & 0xff_ffff != s & 0xff_ffff {
            return Err(Refused::Release { file: info.version, slurmd: s });
        }
    }
    Ok((ours, info.version))
}

/// The problems and notes of the prediction for `check`.
pub fn problems(choices: &[Choice], dirs_text: &str, slurm: &SlurmConf) -> Vec<Problem> {
    let location = slurm.get_spanned("PluginDir").map(|s| s.location.clone());
    let who = |ours: bool| if ours { "ours" } else { "stock" };
    let mut out = Vec::new();
    for c in choices {
        for (path, why) in &c.refused {
            let why = match why {
                Refused::NotAPlugin(e) => format!("it is not a plugin slurmd can load ({e})"),
                Refused::Release { file, slurmd } => format!("it is built for Slurm {}, slurmd is {}", version_text(*file), version_text(*slurmd)),
                Refused::NoLibrary => format!("{LIBRARY_FILE} is not beside it, so dlopen() fails"),
                Refused::LibraryMismatch(m) => format!("the {LIBRARY_FILE} beside it is of another build (it lacks {})", m.join(", ")),
            };
            let then = match &c.loaded {
                Some((p, ours, v)) => format!("and loads {} ({}, Slurm {}) instead", p.display(), who(*ours), version_text(*v)),
                None => "and finds no other".to_string(),
            };
            out.push(Problem::new(Severity::Warning, location.clone(), format!("slurmd passes over {}: {why}, {then}", path.display())));
        }
        match &c.loaded {
            None => out.push(Problem::new(
                Severity::Fatal,
                location.clone(),
                format!("slurmd finds no {}.so it can load in PluginDir={dirs_text}: it stops (Couldn't load specified plugin name)", c.name),
            )),
            Some((path, ours, version)) => {
                if let Some(later) = &c.ours_later {
                    out.push(
                        Problem::new(
                            Severity::Warning,
                            location.clone(),
                            format!(
                                "slurmd loads the stock {} and not ours at {}: a directory with the stock plugins comes first in PluginDir",
                                path.display(),
                                later.display()
                            ),
                        )
                        .with_help(format!("put {} first in PluginDir", later.parent().unwrap_or(Path::new("/")).display())),
                    );
                }
                out.push(Problem::new(
                    Severity::Note,
                    location.clone(),
                    format!("slurmd loads {} ({}, Slurm {})", path.display(), who(*ours), version_text(*version)),
                ));
            }
        }
    }
    out
}

/// The GRES plugins slurmd loads for `types` (those this project
/// replaces).
pub fn plugin_names(types: &[String]) -> Vec<&'static str> {
    let wanted: BTreeSet<String> = types.iter().map(|t| t.to_ascii_lowercase()).collect();
    [("gpu", "gres_gpu"), ("mps", "gres_mps"), ("shard", "gres_shard")].into_iter().filter(|(t, _)| wanted.contains(*t)).map(|(_, n)| n).collect()
}
