//! A test bed's release with clusters and scenarios: configs on it, with
//! our build for it, and the stock-vs-ours differential there.

use super::{skip_or_fail, TestBed};
use crate::config::{ClusterConfig, PluginSet};
use crate::scenario::{assert_no_differences, run_scenario, Scenario, ScenarioResult};

impl TestBed {
    /// `cfg` on this release (its chroot, if any).
    pub fn on(&self, mut cfg: ClusterConfig) -> ClusterConfig {
        cfg.chroot = self.chroot.clone();
        cfg
    }

    /// [`ClusterConfig::gpus`] on this release.
    pub fn config(&self, plugins: PluginSet, n: u32) -> ClusterConfig {
        self.on(ClusterConfig::gpus(plugins, n))
    }

    /// `cfg` (plugins Ours or OursOnly) with our build for this release
    /// ([`TestBed::our_build`], or [`TestBed::our_test_build`] when `cfg`
    /// asked for the test build); `None` when there is none and the test
    /// is skipped (printed); panics instead under `GRES_RS_REQUIRE_SLURM=1`
    /// / `CI=true`: "our build for 24.11.5 failed: ...".
    #[track_caller]
    pub fn ours_config(&self, cfg: ClusterConfig, test: &str) -> Option<ClusterConfig> {
        let test_hooks = cfg.plugin_build_dir.is_some();
        match if test_hooks { self.our_test_build() } else { self.our_build() } {
            Ok(b) => Some(self.on(b.apply(cfg))),
            Err(e) => {
                skip_or_fail(test, &format!("our build for {} failed: {e}", self.version));
                None
            }
        }
    }
}

impl TestBed {
    /// The stock-vs-ours differential of `scn` on this release: stock
    /// first (which validates the release's test bed), then ours from
    /// [`TestBed::ours_config`]; `None` when ours is skipped (no build,
    /// printed).  Panics on any difference, like [`crate::differential`].
    #[track_caller]
    pub fn differential(&self, scn: &Scenario, test: &str) -> Option<(ScenarioResult, ScenarioResult)> {
        self.differential_with(scn, PluginSet::Ours, test)
    }

    /// [`TestBed::differential`] with any non-stock set.
    #[track_caller]
    pub fn differential_with(&self, scn: &Scenario, set: PluginSet, test: &str) -> Option<(ScenarioResult, ScenarioResult)> {
        let mut s = scn.clone();
        s.config = self.on(s.config);
        let stock = run_scenario(&s, PluginSet::Stock);
        let mut cfg = s.config.clone();
        cfg.plugins = set.clone();
        let Some(cfg) = self.ours_config(cfg, test) else {
            eprintln!("{}", stock.report());
            return None;
        };
        s.config = cfg;
        let ours = run_scenario(&s, set);
        assert_no_differences(&s, &stock, &ours);
        Some((stock, ours))
    }
}
