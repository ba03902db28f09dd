//! The test bed's Slurm releases as tests iterate them: which releases a
//! run selects (`GRES_RS_SLURM`), where each one's Slurm lives (the host
//! or a [`chroot`]), what stock does differently there
//! ([`StockQuirks`], an explicit table), and our build for it
//! ([`TestBed::our_build`]).
//!
//! ```ignore
//! use gres_test_harness::*;
//! per_release! {
//!     /// Doc of the test (on the module).
//!     fn srun_env(bed) {
//!         let stock = Cluster::start(bed.config(PluginSet::Stock, 4));
//!         let Some(cfg) = bed.ours_config(bed.config(PluginSet::Ours, 4), "srun_env") else { return };
//!         let ours = Cluster::start(cfg);
//!     }
//! }
//! // tests srun_env::slurm_22_05, srun_env::slurm_24_11, srun_env::slurm_26_05
//! ```

mod clusters;
mod run;
mod selection;

pub use crate::builds::OurBuild;
pub use crate::builds::{our_build_for_chroot, OursUnavailable};
pub use crate::quirks::{behaviour_of, series_of, LogPrefix, StockQuirks, BEHAVIOURS};
pub use run::{current, run_test, skip_or_fail};
pub use selection::{all_series, series_from, Selection};

use crate::chroot::{self, Chroot, Release};
use crate::host::host_version;
use std::path::PathBuf;

/// One release of the test bed, opened: where its Slurm lives, its
/// version and stock behaviour, and (on demand) our build for it.
#[derive(Clone, Debug)]
pub struct TestBed {
    pub release: Release,
    /// "22.05".
    pub series: String,
    /// The real version: the chroot's slurm_version.h, or the host's
    /// (`/usr/include/slurm/slurm_version.h`, else the release's).
    pub version: String,
    /// `None`: the host's Slurm.
    pub chroot: Option<Chroot>,
    pub behaviour: &'static StockQuirks,
}

impl TestBed {
    /// The release of `series` ("24.11"), opened; Err when its chroot is
    /// not built or cannot run clusters.
    pub fn open(series: &str) -> Result<TestBed, String> {
        let release = chroot::all_releases()
            .into_iter()
            .find(|r| series_of(r.slurm) == series)
            .ok_or_else(|| format!("no test-bed release {series} ({})", all_series().join(", ")))?;
        let (chroot, version) = if release.host {
            (None, host_version().unwrap_or_else(|| release.slurm.to_string()))
        } else {
            let root = release.open()?;
            if let Some(p) = root.problems().first() {
                return Err(p.clone());
            }
            let v = root.slurm_version()?;
            (Some(root), v)
        };
        Ok(TestBed { release, series: series.to_string(), behaviour: behaviour_of(&version), version, chroot })
    }

    /// e.g. "Slurm 24.11.5 (trixie chroot)".
    pub fn label(&self) -> String {
        match &self.chroot {
            None => format!("Slurm {} (host, {})", self.version, self.release.suite),
            Some(_) if self.release.origin == chroot::Origin::Source => format!("Slurm {} (built from source, {} chroot)", self.version, self.release.suite),
            Some(_) => format!("Slurm {} ({} chroot)", self.version, self.release.suite),
        }
    }

    /// The stock plugin dir, as the daemons see it (a path inside the chroot).
    pub fn stock_plugin_dir(&self) -> PathBuf {
        match &self.chroot {
            None => crate::host::stock_plugin_dir(),
            Some(r) => r.stock_plugin_dir(),
        }
    }

    /// The stock gpu/nvml plugin of this release, as a host path, which
    /// Debian does not ship: for a release built from source, the one its
    /// build set aside (`tests/testbed/slurm-source.sh`); for the host's
    /// (bookworm), trixie and sid, the one `tests/testbed/stock-gpu-nvml.sh`
    /// built (bookworm's from Debian's source package of the host's
    /// slurmd, the others from SchedMD's tarball of the series).  Err says
    /// why there is none.
    pub fn stock_gpu_nvml(&self) -> Result<PathBuf, String> {
        let path = match (&self.chroot, self.release.origin) {
            (Some(root), chroot::Origin::Source) => root.host_path(format!("/usr/lib/{}/slurm-stock-gpu-nvml/gpu_nvml.so", chroot::triplet())),
            _ => chroot::chroot_base().join(format!("stock-gpu-nvml-{}", self.release.suite)).join(&self.version).join("gpu_nvml.so"),
        };
        if path.is_file() {
            Ok(path)
        } else {
            let how = if self.release.origin == chroot::Origin::Source {
                format!("tests/testbed/slurm-source.sh {}", self.series)
            } else {
                format!("tests/testbed/stock-gpu-nvml.sh {}", self.release.suite)
            };
            Err(format!("no stock gpu_nvml.so for Slurm {} at {} (build it with {how})", self.version, path.display()))
        }
    }

    /// [`TestBed::stock_gpu_nvml`] for a test that compares with it; `None`
    /// (the test has nothing to compare with) where there is none, after
    /// [`skip_or_fail`] (a failure under `GRES_RS_REQUIRE_SLURM`/CI).
    #[track_caller]
    pub fn stock_gpu_nvml_for(&self, test: &str) -> Option<PathBuf> {
        let name = format!("{test} [Slurm {}]", self.version);
        match self.stock_gpu_nvml() {
            Ok(p) => Some(p),
            Err(e) => {
                skip_or_fail(&name, &e);
                None
            }
        }
    }

    /// Our build for this release (the shipping features): on the host the
    /// workspace's own build ([`locate_our_library`](crate::locate_our_library), plugin files built
    /// into this crate); for a chroot's release `cargo build -p gres_rs`
    /// with `SLURM_INCLUDE_DIR=<chroot>/usr/include` into
    /// `<target>/slurm-<version>/`, once per test process (cargo's lock on
    /// that target dir keeps parallel test binaries from building it
    /// twice: the second finds it fresh).  Err: why there is none, with
    /// the build's first error lines.
    pub fn our_build(&self) -> Result<OurBuild, String> {
        self.build(false)
    }

    /// The same with [`TEST_FEATURES`](crate::TEST_FEATURES) (`<target>/slurm-<version>/test-build/`
    /// for a chroot, [`test_build_dir`](crate::test_build_dir) on the host).
    pub fn our_test_build(&self) -> Result<OurBuild, String> {
        self.build(true)
    }

    fn build(&self, test_hooks: bool) -> Result<OurBuild, String> {
        crate::builds::build_ours(&self.version, self.chroot.as_ref(), test_hooks)
    }

    /// How our plugins behave on this release: the product's own table
    /// (`ffi::behaviour::for_release`, the data a build for this version
    /// compiles in), for a test whose expectation depends on what ours
    /// does there (e.g. `core_reads_fake_gpus`: 26.05's slurmd reads
    /// fake_gpus.conf itself and ours does not read it again).
    pub fn ours_behaviour(&self) -> gres_core::behaviour::Behaviour {
        let n: Vec<u32> = self.version.split('.').map(|x| x.parse().unwrap_or(0)).collect();
        let (a, b, c) = (n.first().copied().unwrap_or(0), n.get(1).copied().unwrap_or(0), n.get(2).copied().unwrap_or(0));
        slurm_gpu_gres::ffi::behaviour::for_release(a, b, c).unwrap_or_else(|| panic!("no Behaviour of ours for Slurm {}", self.version))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection() {
        assert_eq!(Selection::parse("").unwrap(), Selection::All);
        assert_eq!(Selection::parse("ALL").unwrap(), Selection::All);
        assert_eq!(Selection::parse("24.11").unwrap(), Selection::Only(vec!["24.11".into()]));
        assert_eq!(Selection::parse("22.05.8, 26.05").unwrap(), Selection::Only(vec!["22.05".into(), "26.05".into()]));
        assert!(Selection::parse("21.08").is_err());
        assert!(!Selection::parse("24.11").unwrap().selects("22.05"));
        assert_eq!(Selection::parse("debian, source:23.11").unwrap(), Selection::Only(vec!["22.05".into(), "24.11".into(), "26.05".into(), "23.11".into()]));
        assert_eq!(Selection::parse("source").unwrap(), Selection::Only(["23.02", "23.11", "24.05", "25.05", "25.11"].map(String::from).to_vec()));
    }

    #[test]
    fn table_covers_the_test_bed() {
        assert_eq!(all_series(), ["22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05"]);
        assert_eq!(BEHAVIOURS.iter().map(|b| b.series).collect::<Vec<_>>(), all_series());
        for s in all_series() {
            assert_eq!(behaviour_of(&format!("{s}.1")).series, s);
        }
    }

    #[test]
    fn prefixes() {
        assert_eq!(LogPrefix::Program.strip("slurmd: Gres Name=gpu", "slurmd"), "Gres Name=gpu");
        assert_eq!(LogPrefix::Timestamp.strip("[2026-12-01T12:00:00.123] Gres Name=gpu", "slurmd"), "Gres Name=gpu");
        assert_eq!(LogPrefix::Timestamp.strip("Gres Name=gpu", "slurmd"), "Gres Name=gpu");
    }
}
