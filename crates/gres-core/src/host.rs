//! The host a plugin is given: what slurmd offers it besides the arguments
//! of a call, as a trait, so the plugins run (and are tested) without
//! Slurm.

use crate::behaviour::Behaviour;
use crate::model::{Bitmap, GresRecord};

/// What slurmd offers a plugin besides the arguments of a call.  The real
/// implementation calls back into slurmd (`gres_slurm_abi::host`); each
/// default is what a plugin gets outside slurmd ([`StandaloneHost`]), so a
/// test's host states only where it differs.
pub trait Host {
    /// How the Slurm the plugins run in behaves where releases differ.
    fn behaviour(&self) -> &Behaviour;
    /// `GRES_AUTODETECT_*` bits of gres.conf's `AutoDetect`.
    fn autodetect_flags(&self) -> u32 {
        0
    }
    /// GPUs found by slurmd's own gpu plugin (gpu/rsmi, gpu/oneapi, ...).
    fn gpu_plugin_system_gpus(&self) -> Option<Vec<GresRecord>> {
        None
    }
    /// Path of a file in slurmd's configuration directory.
    fn extra_conf_path(&self, _name: &str) -> Option<String> {
        None
    }
    /// Convert a machine CPU range to slurmd's abstract core ids (outside
    /// slurmd: the machine ids are taken as they are).
    fn mac_to_abs(&self, mac: &str) -> Option<String> {
        Some(mac.to_string())
    }
    /// Devices are renumbered from 0 inside the job's cgroup.
    fn use_local_device_index(&self) -> bool {
        false
    }
    /// `DebugFlags=Gres` is set.
    fn debug_gres(&self) -> bool {
        false
    }
    /// Hand `--gpu-freq` to slurmd's gpu plugin for a step's GPUs.
    fn gpu_step_hardware_init(&self, _usable: Option<&Bitmap>, _settings: Option<&str>) {}
    fn gpu_step_hardware_fini(&self) {}
    /// Slurm's `gpu_g_test_cpu_conv` for `fake_gpus.conf` CPU masks
    /// (outside slurmd: what gpu/nvml's converter does).
    fn test_cpu_conv(&self, mask: &str) -> Option<String> {
        crate::nvml_model::test_cpu_mask(mask)
    }
    /// slurm.conf `GpuFreqDef`, if set.
    fn gpu_freq_def(&self) -> Option<String> {
        None
    }
    /// The machine CPUs slurmd uses (its `block_map`: without Intel E-cores,
    /// which slurmd leaves out of its topology), or `None` where every CPU
    /// counts: `SlurmdParameters=allow_ecores`, or not inside slurmd.
    fn enabled_cpus(&self) -> Option<Bitmap> {
        None
    }
    /// Unload slurmd's gpu plugin (`gpu_plugin_fini`), if one is loaded.
    fn gpu_plugin_fini(&self) {}
}

/// `node_config_load` arguments beside the record list.
#[derive(Clone, Copy, Debug, Default)]
pub struct NodeConfig {
    pub cpu_cnt: u32,
    pub in_slurmd: bool,
}

/// A [`Host`] outside slurmd (`gres-rs`, unit tests): machine CPU ids are
/// taken as the abstract core ids, and nothing else is offered.  It behaves
/// as the release whose [`Behaviour`] it is given ([`Default`]: 22.05).
#[derive(Clone, Copy, Debug, Default)]
pub struct StandaloneHost {
    behaviour: Behaviour,
}

impl StandaloneHost {
    /// A host that behaves as `behaviour` says.
    pub fn new(behaviour: Behaviour) -> StandaloneHost {
        StandaloneHost { behaviour }
    }
}

impl Host for StandaloneHost {
    fn behaviour(&self) -> &Behaviour {
        &self.behaviour
    }
}
