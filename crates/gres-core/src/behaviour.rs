//! How the Slurm the plugins run in behaves where its releases differ, as
//! plain data.  The core and the plugins never test a release number: they
//! read a [`Behaviour`], which the host gives them
//! ([`crate::host::Host::behaviour`]).  The one place that maps releases
//! to behaviours is `gres_slurm_abi::behaviour::for_release`; the release
//! named in each field's comment is the first one with that behaviour, read
//! from the source of every series (22.05.8, 23.02.8, 23.11.11, 24.05.8,
//! 24.11.5, 25.05.8, 25.11.7, 26.05.3; mid-series changes from the notes'
//! tag-by-tag check).  Where a boundary is plugin or core code rather than
//! a header define (the merge's copied flags, the unique_id gating,
//! nvml's whole-GPU unique_id, who reads fake_gpus.conf, the prep index
//! check), only the point release listed was read, and the change is taken
//! to start with the series' first release: not checked tag by tag.
//!
//! [`Behaviour::default`] is Slurm 22.05's.

use crate::model::ConfFlags;

/// What `GRES_CONF_*` bit 14 ([`ConfFlags::BIT14`]) of a gres.conf record
/// means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ConfBit14 {
    /// Not defined (22.05.0 – 23.11.3).
    #[default]
    Unused,
    /// `GRES_CONF_GLOBAL_INDEX` (23.11.4 – 25.11): the devices of the record
    /// keep their global index in the environment (gpu/nvml sets it on MIG
    /// records).
    GlobalIndex,
    /// `GRES_CONF_UUID` (26.05): the vendor variables name the devices by
    /// their `unique_id` (gres.conf `Flags=env_uuid`; gpu/nvml sets it on
    /// MIG records).
    Uuid,
}

/// When the vendor variables of a job, step or task
/// (`CUDA_VISIBLE_DEVICES`, ...) name a device by its `unique_id` instead
/// of its index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum UniqueIdInEnv {
    /// Whenever the device has one (22.05 – 25.05).
    #[default]
    Always,
    /// Only when the device is a MIG device (`GRES_DEV_MIG`, which the core
    /// sets from the record's `GRES_CONF_MIG`) (25.11).
    MigOnly,
    /// Only when the plugin's node flags have `GRES_CONF_UUID` (bit 14)
    /// (26.05).
    UuidFlag,
}

/// A gres.conf value that exists only from some release on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Feature {
    /// `AutoDetect=nrt`.
    AutoDetectNrt,
    /// `AutoDetect=nvidia`.
    AutoDetectNvidia,
    /// `AutoDetect=full`.
    AutoDetectFull,
    /// `Flags=explicit`.
    FlagExplicit,
    /// `Flags=env_uuid`.
    FlagEnvUuid,
}

impl Feature {
    /// Every feature, in the order of the fields below.
    pub const ALL: [Feature; 5] = [Feature::AutoDetectNrt, Feature::AutoDetectNvidia, Feature::AutoDetectFull, Feature::FlagExplicit, Feature::FlagEnvUuid];

    /// How it is written in gres.conf.
    pub fn as_str(self) -> &'static str {
        match self {
            Feature::AutoDetectNrt => "AutoDetect=nrt",
            Feature::AutoDetectNvidia => "AutoDetect=nvidia",
            Feature::AutoDetectFull => "AutoDetect=full",
            Feature::FlagExplicit => "Flags=explicit",
            Feature::FlagEnvUuid => "Flags=env_uuid",
        }
    }
}

/// How the Slurm the plugins run in behaves where releases differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Behaviour {
    /// Meaning of `GRES_CONF_*` bit 14: unused before 23.11.4,
    /// `GLOBAL_INDEX` 23.11.4 – 25.11, `UUID` from 26.05.0
    /// (`src/interfaces/gres.h`).
    pub conf_bit14: ConfBit14,
    /// When the vendor variables use a device's `unique_id`: always up to
    /// 25.05, only for MIG devices in 25.11 (`gres_common.c`,
    /// `GRES_DEV_MIG`), only with `GRES_CONF_UUID` in the node flags from
    /// 26.05.0 (whole GPUs then need `Flags=env_uuid`).  Prolog/Epilog use
    /// it whenever it is set, in every release.
    pub unique_id_in_env: UniqueIdInEnv,
    /// gpu/nvml marks MIG records `GRES_CONF_MIG` (bit 17), from 25.11.0
    /// (`gpu_nvml.c`).
    pub mig_conf_flag: bool,
    /// gpu/nvml sets `unique_id` to the UUID of whole GPUs too (not only of
    /// MIG devices), from 25.11.0 (`gpu_nvml.c`).
    pub nvml_whole_gpu_unique_id: bool,
    /// slurmd's core reads `fake_gpus.conf` itself and hands the fake GPUs
    /// to gres/gpu as the system's GPUs (`gpu_g_get_system_gpu_list`), from
    /// 26.05.0 (`src/interfaces/gpu.c`); gres/gpu must then not read it
    /// again.  Before, gres/gpu read it (`gres_gpu.c`).
    pub core_reads_fake_gpus: bool,
    /// Flags of a configured GPU record that gres/gpu's merge copies onto
    /// the detected record it matches: none up to 25.05, `EXPLICIT` in
    /// 25.11.0, `EXPLICIT | UUID` from 26.05.0 (`gres_gpu.c`).  (The env
    /// flags are copied in every release when set explicitly.)
    pub merge_copied_flags: ConfFlags,
    /// `AutoDetect=nrt` exists, from 23.11.0 (`GRES_AUTODETECT_GPU_NRT`).
    pub autodetect_nrt: bool,
    /// `AutoDetect=nvidia` exists, from 24.11.0
    /// (`GRES_AUTODETECT_GPU_NVIDIA`).
    pub autodetect_nvidia: bool,
    /// `AutoDetect=full` exists, from 26.05.0 (`GRES_AUTODETECT_GPU_FULL`;
    /// looked for before every other value).
    pub autodetect_full: bool,
    /// `Flags=explicit` exists (`GRES_CONF_EXPLICIT`, bit 12), from 23.02.0.
    pub flag_explicit: bool,
    /// `Flags=env_uuid` exists (`GRES_CONF_UUID`, bit 14), from 26.05.0.
    pub flag_env_uuid: bool,
    /// The env code of gres/gpu, mps and shard keeps no state between calls,
    /// from 23.02.0; 22.05 keeps `static already_seen` / `local_inx` in
    /// `step_set_env` and `task_set_env` (an earlier call's variables are
    /// read back from the environment).
    pub stateless_env: bool,
    /// Stock gres/mps and gres/shard declare `task_set_env` in slurmd's
    /// argument order, from 23.02.7 (commit 0878dca8ad); before, they swap
    /// the count and the usable bitmap (docs/deviations.md, MPS/shard 1).
    /// Ours always take slurmd's order.
    pub shared_task_env_order_fixed: bool,
    /// Each device of slurmd's message to slurmstepd ends with its
    /// `gres_device_t.flags` (a u32; bit 0 `GRES_DEV_MIG` in 25.11), from
    /// 25.11.0 (`_gres_device_pack`, `src/interfaces/gres.c`).
    pub device_flags_on_wire: bool,
    /// Stock `prep_set_env` refuses a node index equal to the node count,
    /// from 25.11.0 (`>=` instead of `>`); ours always does
    /// (docs/deviations.md, MPS/shard 5).
    pub prep_node_index_checked: bool,
    /// For `AutoDetect=nvml` slurmd picks gpu/nvml when it can `dlopen()`
    /// `libnvidia-ml.so` or, from 24.05.0, `libnvidia-ml.so.1` (the name
    /// the driver installs); before, only the unversioned
    /// `libnvidia-ml.so` (the driver's development link), else
    /// gpu/generic (`_get_gpu_type()`, `src/interfaces/gpu.c`; read in
    /// 22.05.8's libslurmfull, 23.02.8, 23.11.11, 24.05.8, 24.11.5,
    /// 26.05.3).
    pub nvml_versioned_lib: bool,
    /// slurmd's line of a final record (what `slurmd -G` prints) ends
    /// `Links=<links> Flags=<gres_flags2str>` (`Links=(null)` without
    /// links), from 23.02.0 (`_log_gres_slurmd_conf`,
    /// `src/interfaces/gres.c`); 22.05 ends it with `Links=<links>` or a
    /// bare `(null)`, without flags.
    pub record_line_flags: bool,
    /// A gres.conf `Flags=` without env flags (e.g. `CountOnly`,
    /// `one_sharing`) also drops a GPU line's default env flags: 23.02 –
    /// 25.11 (`_parse_gres_config`, src/interfaces/gres.c: 23.02.8 and
    /// 25.11.7 read).  22.05 and 26.05 drop them only for env flags or
    /// `no_gpu_env` (26.05: "Pure modifier flags like env_uuid ... let
    /// defaults or AutoDetect provide vendor flags").
    pub any_flags_drop_default_env: bool,
    /// gres/mps and gres/shard's `DebugFlags=Gres` line before the first
    /// record list reads `GRES: Initialized gres.conf list`, from 23.02.0
    /// (`gres_c_s_init_share_devices`, gres_c_s.c: 23.02.8, 24.11.5,
    /// 26.05.3 read); 22.05 spells it `Initalized` (22.05.8's gres_mps.so).
    pub init_list_line_spelled: bool,
    /// gpu/nvml's `usage_read` reads `gres/gpumem` and `gres/gpuutil` each
    /// when it is accounted, from 23.11.0; 23.02 reads neither unless both
    /// are (`gpu_p_usage_read`, gpu_nvml.c: 23.02.8 and 23.11.11 read).
    pub usage_tres_independent: bool,
    /// gpu/nvml types a MIG device by the profile in NVML's name of it
    /// (`..._1c.3g.20gb`), computing one only where the name has none
    /// (compute-instance slices first, memory rounded up), from 23.02.0;
    /// 22.05 always computes `_<GI slices>g.<GiB rounded>gb`
    /// (`_handle_mig`, gpu_nvml.c: 22.05.8, 23.02.8, 26.05.3 read).
    pub mig_type_from_nvml_name: bool,
    /// gpu/nvml marks every record it detects `GRES_CONF_AUTODETECT` (bit
    /// 15), from 24.11.0 (`_get_system_gpu_list_nvml`, gpu_nvml.c; the bit
    /// in src/interfaces/gres.h: 24.05.8 has none, 24.11.5 and 26.05.3 read).
    pub autodetect_conf_flag: bool,
    /// A GPU in MIG mode none of whose MIG devices can be read is reported
    /// as the whole GPU (its full type, its device file and links), after
    /// the error, from 24.11.0; before, slurmd stops (`fatal`) when there
    /// are none and reports nothing of the GPU when none can be read
    /// (`_get_system_gpu_list_nvml`, gpu_nvml.c: 24.05.8, 24.11.5 read).
    pub mig_unreadable_reports_gpu: bool,
    /// slurmd has a built-in `GpuFreqDef` of `high,memory=high` that fills
    /// in what `--gpu-freq` leaves out: 22.05 (`read_config.c`); 23.02.0
    /// removed it (NEWS), so a component nobody asked for stays as it is.
    pub gpu_freq_def_builtin: bool,
    /// `--gpu-freq` sets memory and graphics clocks as locked clocks, each
    /// only when asked for, read back with `nvmlDeviceGetClockInfo`, and
    /// releases both locks at the end of the step, from 26.05.0 where the
    /// build's NVML has `nvmlDeviceSetMemoryLockedClocks` (every driver
    /// from 465.19.01: `HAVE_NVML_MEMORY_CLOCK`, gpu_nvml.c); before, one
    /// pair of application clocks (26.05.3, 25.11.7 read).
    pub gpu_locked_clocks: bool,
    /// gpu/nvml keeps of each GPU's NVML CPU affinity only the CPUs slurmd
    /// uses (its `block_map`, from which slurmd's hwloc load removed Intel
    /// E-cores) unless `SlurmdParameters=allow_ecores`, from 23.02.0
    /// (`_get_system_gpu_list_nvml`, gpu_nvml.c: 23.02.8, 26.05.3 read);
    /// before, the whole affinity is converted, and a GPU whose affinity
    /// names a CPU slurmd does not use fails the conversion and is dropped.
    pub gpu_affinity_enabled_cpus: bool,
}

impl Default for Behaviour {
    /// [`Behaviour::BASELINE`].
    fn default() -> Self {
        Behaviour::BASELINE
    }
}

impl Behaviour {
    /// The first release the project serves (Slurm 22.05): every field at
    /// its oldest value.
    pub const BASELINE: Behaviour = Behaviour {
        conf_bit14: ConfBit14::Unused,
        unique_id_in_env: UniqueIdInEnv::Always,
        mig_conf_flag: false,
        nvml_whole_gpu_unique_id: false,
        core_reads_fake_gpus: false,
        merge_copied_flags: ConfFlags(0),
        autodetect_nrt: false,
        autodetect_nvidia: false,
        autodetect_full: false,
        flag_explicit: false,
        flag_env_uuid: false,
        stateless_env: false,
        shared_task_env_order_fixed: false,
        device_flags_on_wire: false,
        prep_node_index_checked: false,
        nvml_versioned_lib: false,
        record_line_flags: false,
        any_flags_drop_default_env: false,
        init_list_line_spelled: false,
        usage_tres_independent: false,
        mig_type_from_nvml_name: false,
        autodetect_conf_flag: false,
        mig_unreadable_reports_gpu: false,
        gpu_freq_def_builtin: true,
        gpu_locked_clocks: false,
        gpu_affinity_enabled_cpus: false,
    };

    /// Whether a gres.conf value exists.
    pub fn has(&self, feature: Feature) -> bool {
        match feature {
            Feature::AutoDetectNrt => self.autodetect_nrt,
            Feature::AutoDetectNvidia => self.autodetect_nvidia,
            Feature::AutoDetectFull => self.autodetect_full,
            Feature::FlagExplicit => self.flag_explicit,
            Feature::FlagEnvUuid => self.flag_env_uuid,
        }
    }

    /// gpu/nvml sets bit 14 on MIG records (`GLOBAL_INDEX` or `UUID`).
    pub fn nvml_mig_bit14(&self) -> bool {
        self.conf_bit14 != ConfBit14::Unused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_22_05() {
        let b = Behaviour::default();
        assert!(Feature::ALL.iter().all(|f| !b.has(*f)));
        assert!(!b.nvml_mig_bit14());
    }
}
