//! The plugin files slurmd loads from `PluginDir`, and the library beside
//! them that holds their code.  Only constants: `build.rs` compiles this
//! file on its own to make the plugin files.

/// Which interface a plugin file offers (its functions are listed in
/// [`crate::ffi::entry_points`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interface {
    /// `gres_p_*`: a generic resource.
    Gres,
    /// `gpu_p_*`: GPU detection and step hardware settings.
    Gpu,
}

/// One plugin file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PluginFile {
    /// The file is `<file>.so`; also the middle of its library function
    /// names (`gres_rs_<file>_init`).
    pub file: &'static str,
    /// `plugin_name`, as slurmd logs it.
    pub name: &'static str,
    /// `plugin_type`, by which slurmd finds the file.
    pub plugin_type: &'static str,
    pub interface: Interface,
}

pub const GRES_GPU: PluginFile = PluginFile { file: "gres_gpu", name: "Gres GPU plugin", plugin_type: "gres/gpu", interface: Interface::Gres };
pub const GRES_MPS: PluginFile = PluginFile { file: "gres_mps", name: "Gres MPS plugin", plugin_type: "gres/mps", interface: Interface::Gres };
pub const GRES_SHARD: PluginFile = PluginFile { file: "gres_shard", name: "Gres SHARD plugin", plugin_type: "gres/shard", interface: Interface::Gres };
pub const GPU_NVML: PluginFile = PluginFile { file: "gpu_nvml", name: "GPU NVML plugin", plugin_type: "gpu/nvml", interface: Interface::Gpu };

/// Every plugin file this project replaces.
pub const PLUGIN_FILES: [PluginFile; 4] = [GRES_GPU, GRES_MPS, GRES_SHARD, GPU_NVML];

/// The library beside the plugin files that holds the code of all of them
/// (built by `crates/gres_rs`; each plugin file names it in `DT_NEEDED`
/// as `$ORIGIN/libgres_rs.so`).
pub const LIBRARY_FILE: &str = "libgres_rs.so";
