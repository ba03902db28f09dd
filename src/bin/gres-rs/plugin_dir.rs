//! `check`'s prediction of which file of each GRES plugin slurmd loads
//! from `PluginDir`, searched as slurmd searches it: the directories in
//! order, the first `<name>.so` that loads and whose `plugin_version` is
//! slurmd's own release; a file refused sends slurmd on to the next
//! directory, and no file accepted stops slurmd.  The likely mistakes with
//! our files (the stock directory first, `libgres_rs.so` missing beside a
//! plugin file, a build for another release) are reported before a
//! restart shows them.
//!
//! The gpu plugin is chosen before it is searched for: slurmd's
//! `_get_gpu_type()` (`src/interfaces/gpu.c`) makes it gpu/nvml for
//! `AutoDetect=nvml` when one of the NVML libraries of the release
//! ([`nvml_probe_libs`]) can be loaded, else gpu/generic
//! ([`gpu_plugin`]); a gpu/nvml without a `gpu_nvml.so` it accepts stops
//! slurmd (`cannot create gpu context for gpu/nvml`), and the stock
//! packages of Debian ship none.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use gres_core::behaviour::Behaviour;
use slurm_gpu_gres::config::gres_conf::AutoDetect;
use slurm_gpu_gres::predict::slurm_conf::SlurmConf;
use slurm_gpu_gres::predict::{Problem, Severity};
use slurm_gpu_gres::LIBRARY_FILE;

use crate::install::{library_exports, plugin_info};
use crate::installed::version_text;

/// Why slurmd passes over a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Not a plugin slurmd can use (no `plugin_version`, unreadable).
    NotAPlugin(String),
    /// Built for another release than slurmd's.
    Release { file: u32, slurmd: u32 },
    /// One of ours without the library it names (`libgres_rs-<version>.so`)
    /// beside it: `dlopen()` fails.
    NoLibrary(String),
    /// One of ours whose library (named) lacks the table it needs (another
    /// build).
    LibraryMismatch(String, Vec<String>),
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
        let name = info.library.clone().unwrap_or_else(|| LIBRARY_FILE.to_string());
        let Some(lib) = read(&dir.join(&name)) else { return Err(Refused::NoLibrary(name)) };
        let exports = library_exports(&lib).unwrap_or_default();
        let missing: Vec<String> = info.needs.iter().filter(|n| !exports.contains(*n)).cloned().collect();
        if !missing.is_empty() {
            return Err(Refused::LibraryMismatch(name, missing));
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
                Refused::NoLibrary(name) => format!("{name}, which it loads, is not beside it, so dlopen() fails"),
                Refused::LibraryMismatch(name, m) => format!("the {name} beside it is of another build (it lacks {})", m.join(", ")),
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

/// The gpu plugin slurmd picks for a node, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuPick {
    /// The plugin file's name without `.so`: `gpu_nvml`, `gpu_generic`.
    pub name: &'static str,
    /// Why, as the messages say it: "AutoDetect=nvml and libnvidia-ml.so.1
    /// can be loaded".
    pub why: String,
    /// A file of that name must load (else slurmd stops); `false` for the
    /// probe of `AutoDetect=full`, which goes on to the next plugin.
    pub required: bool,
}

impl GpuPick {
    /// gpu/nvml: what reads energy and applies `--gpu-freq`.
    pub fn is_nvml(&self) -> bool {
        self.name == "gpu_nvml"
    }
}

/// The libraries slurmd tries, in order, before it picks gpu/nvml for
/// `AutoDetect=nvml` (one that loads makes it gpu/nvml): the unversioned
/// name, and from 24.05 on ([`Behaviour::nvml_versioned_lib`]) also
/// `libnvidia-ml.so.1`.
pub fn nvml_probe_libs(behaviour: &Behaviour) -> &'static [&'static str] {
    if behaviour.nvml_versioned_lib {
        &["libnvidia-ml.so", "libnvidia-ml.so.1"]
    } else {
        &["libnvidia-ml.so"]
    }
}

/// The gpu plugin slurmd of `behaviour`'s release picks for `autodetect`
/// (`_get_gpu_type()`), `loadable` telling which libraries `dlopen()`
/// finds.  `None` where this tool does not predict it (rsmi, nrt,
/// nvidia: plugins of libraries it does not look for).
pub fn gpu_plugin(autodetect: AutoDetect, behaviour: &Behaviour, loadable: &dyn Fn(&str) -> bool) -> Option<GpuPick> {
    let libs = nvml_probe_libs(behaviour);
    let nvml_lib = libs.iter().find(|l| loadable(l));
    let generic = |why: String| Some(GpuPick { name: "gpu_generic", why, required: true });
    match autodetect {
        AutoDetect::Nvml => match nvml_lib {
            Some(lib) => Some(GpuPick { name: "gpu_nvml", why: format!("AutoDetect=nvml and {lib} can be loaded"), required: true }),
            None if libs.len() == 1 => generic(format!("AutoDetect=nvml, but {} cannot be loaded", libs[0])),
            None => generic(format!("AutoDetect=nvml, but neither {} can be loaded", libs.join(" nor "))),
        },
        // The probe of AutoDetect=full tries gpu/nvml first, then the others.
        AutoDetect::Full if behaviour.autodetect_full => {
            nvml_lib.map(|lib| GpuPick { name: "gpu_nvml", why: format!("AutoDetect=full probes gpu/nvml first and {lib} can be loaded"), required: false })
        }
        AutoDetect::Unset | AutoDetect::Off | AutoDetect::OneApi | AutoDetect::Full => generic(format!("AutoDetect={}", autodetect.as_str())),
        AutoDetect::Rsmi | AutoDetect::Nrt | AutoDetect::Nvidia => None,
    }
}

/// The problems and notes of the gpu plugin's search: `choice` is the
/// search for `pick.name`.
pub fn gpu_problems(pick: &GpuPick, choice: &Choice, dirs_text: &str, slurm: &SlurmConf) -> Vec<Problem> {
    let location = slurm.get_spanned("PluginDir").map(|s| s.location.clone());
    let file = format!("{}.so", pick.name);
    let plugin = pick.name.replacen('_', "/", 1);
    let mut out: Vec<Problem> = problems(std::slice::from_ref(choice), dirs_text, slurm)
        .into_iter()
        .filter(|p| p.severity != Severity::Fatal)
        .map(|mut p| {
            if p.severity == Severity::Note {
                p.message = format!("slurmd picks {plugin} ({}): {}", pick.why, p.message.trim_start_matches("slurmd "));
            }
            p
        })
        .collect();
    if choice.loaded.is_none() {
        let found = if choice.refused.is_empty() {
            format!("there is no {file} in PluginDir={dirs_text}")
        } else {
            format!("no {file} in PluginDir={dirs_text} is one it accepts")
        };
        out.push(if pick.required {
            Problem::new(
                Severity::Fatal,
                location,
                format!("slurmd picks {plugin} ({}), but {found}: it stops (cannot create gpu context for {plugin}) and the node gets no GRES", pick.why),
            )
            .with_help(format!(
                "install ours for this release (gres-rs install --plugin-dir DIR, DIR first in PluginDir); the stock packages of Debian ship no {file}"
            ))
        } else {
            Problem::new(Severity::Warning, location, format!("slurmd picks {plugin} ({}), but {found}: it goes on without NVML detection", pick.why))
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_gpu_gres::ffi::behaviour::for_release;

    #[test]
    fn nvml_libraries_slurmd_tries() {
        let b = Behaviour::BASELINE;
        assert_eq!(nvml_probe_libs(&b), ["libnvidia-ml.so"]);
        assert_eq!(nvml_probe_libs(&Behaviour { nvml_versioned_lib: true, ..b }), ["libnvidia-ml.so", "libnvidia-ml.so.1"]);
    }

    fn pick(autodetect: AutoDetect, release: (u32, u32, u32), have: &[&str]) -> Option<(&'static str, String, bool)> {
        let b = for_release(release.0, release.1, release.2).unwrap();
        gpu_plugin(autodetect, &b, &|lib: &str| have.contains(&lib)).map(|p| (p.name, p.why, p.required))
    }

    #[test]
    fn gpu_plugin_as_slurmd_picks_it() {
        let so1 = ["libnvidia-ml.so.1"];
        let both = ["libnvidia-ml.so", "libnvidia-ml.so.1"];
        // 22.05 and 23.11 try the unversioned name only.
        for release in [(22, 5, 8), (23, 11, 11)] {
            assert_eq!(pick(AutoDetect::Nvml, release, &so1), Some(("gpu_generic", "AutoDetect=nvml, but libnvidia-ml.so cannot be loaded".into(), true)));
            assert_eq!(pick(AutoDetect::Nvml, release, &both), Some(("gpu_nvml", "AutoDetect=nvml and libnvidia-ml.so can be loaded".into(), true)));
        }
        // From 24.05 the driver's own libnvidia-ml.so.1 is enough.
        for release in [(24, 5, 8), (24, 11, 5), (26, 5, 3)] {
            assert_eq!(pick(AutoDetect::Nvml, release, &so1), Some(("gpu_nvml", "AutoDetect=nvml and libnvidia-ml.so.1 can be loaded".into(), true)));
            assert_eq!(
                pick(AutoDetect::Nvml, release, &[]),
                Some(("gpu_generic", "AutoDetect=nvml, but neither libnvidia-ml.so nor libnvidia-ml.so.1 can be loaded".into(), true))
            );
        }
        // AutoDetect=full (26.05) probes gpu/nvml first, and goes on.
        assert_eq!(
            pick(AutoDetect::Full, (26, 5, 3), &so1),
            Some(("gpu_nvml", "AutoDetect=full probes gpu/nvml first and libnvidia-ml.so.1 can be loaded".into(), false))
        );
        assert_eq!(pick(AutoDetect::Full, (26, 5, 3), &[]), None);
        assert_eq!(pick(AutoDetect::Unset, (26, 5, 3), &both), Some(("gpu_generic", "AutoDetect=unset".into(), true)));
        assert_eq!(pick(AutoDetect::Off, (22, 5, 8), &both).map(|p| p.0), Some("gpu_generic"));
        assert_eq!(pick(AutoDetect::Rsmi, (24, 11, 5), &both), None);
    }
}
