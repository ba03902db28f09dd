//! The NVML stand-in as a wedged driver, and a node configured to ask it:
//! package scripts and the drop-in must not wait for it.

use gres_test_harness as harness;
use harness::standin;
use harness::*;
use std::path::PathBuf;
use std::time::Duration;

/// What "within a few seconds" means for a package script or the drop-in
/// with a hanging NVML: they never ask it, so well under their own
/// 10-second limit.
pub const QUICK: Duration = Duration::from_secs(8);

/// The NVML stand-in as a wedged driver: its `nvmlInit` takes a minute
/// (`init_delay_ms`), every call logged.
pub struct HangingNvml {
    pub env: Vec<(String, String)>,
    calls: PathBuf,
}

impl HangingNvml {
    pub fn new(tag: &str) -> HangingNvml {
        let dir = standin::scratch_dir();
        let fixture = dir.join(format!("hanging-{tag}.conf"));
        let gpu = "gpu\nname NVIDIA A100-SXM4-40GB\nuuid GPU-6d6f9a3a-0000-0000-0000-000000000001\nbus_id 00000000:07:00.0\nminor 0\ncpus 0\n";
        std::fs::write(&fixture, format!("init_delay_ms 60000\n{gpu}")).unwrap_or_else(|e| panic!("{}: {e}", fixture.display()));
        let calls = dir.join(format!("hanging-{tag}.calls"));
        let _ = std::fs::remove_file(&calls);
        let mut env = standin::daemon_env(&fixture);
        env.push(("GRES_RS_NVML_CALLS".into(), calls.display().to_string()));
        HangingNvml { env, calls }
    }

    /// Nothing asked NVML since [`HangingNvml::new`].
    pub fn assert_untouched(&self, what: &str) {
        let calls = std::fs::read_to_string(&self.calls).unwrap_or_default();
        assert!(calls.trim().is_empty(), "{what} asked NVML (gres-rs without --no-detect):\n{calls}");
    }
}

/// A slurm.conf and gres.conf for this host's node: one GPU,
/// `AutoDetect=nvml`, `plugin_dir` as `PluginDir`.
pub fn nvml_node_conf(plugin_dir: &str) -> (String, String) {
    let h = fsutil::short_hostname();
    (
        format!("ClusterName=pkgtest\nSlurmctldHost={h}\nGresTypes=gpu\nPluginDir={plugin_dir}\nNodeName={h} CPUs=1 Gres=gpu:1 State=UNKNOWN\nPartitionName=p Nodes={h} Default=YES\n"),
        "AutoDetect=nvml\n".into(),
    )
}
