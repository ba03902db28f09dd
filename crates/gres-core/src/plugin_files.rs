//! The plugin files slurmd loads from `PluginDir`, and the library beside
//! them that holds their code.  Only constants: `build.rs` compiles this
//! file on its own to make the plugin files.

/// Which interface a plugin file offers (its functions are listed in
/// `entry_points` of the ABI layer, `crates/slurm-abi/src/entry_points.rs`).
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

/// The library beside the plugin files that holds the code of all of them,
/// as installed: `libgres_rs-<version>.so` (each plugin file names it in
/// `DT_NEEDED` as `$ORIGIN/libgres_rs-<version>.so`).  The version in the
/// name is what makes an upgrade safe at every instant: the new plugin
/// files need the new library, which is installed before them under a name
/// of its own, and the old plugin files keep finding the old library until
/// it is removed after them, so a slurmstepd that starts in between loads a
/// matching pair either way (docs/install.md, "Upgrades").
pub const LIBRARY_FILE: &str = concat!("libgres_rs-", env!("CARGO_PKG_VERSION"), ".so");

/// The library as cargo builds it (`target/<profile>/libgres_rs.so`),
/// installed under [`LIBRARY_FILE`].
pub const BUILT_LIBRARY_FILE: &str = "libgres_rs.so";

/// Whether a file name is one of our libraries, of any version: what a
/// daemon may have mapped, or a file an earlier install left behind (also
/// `libgres_rs.so`, the name before it carried the version).
pub fn is_library_file(name: &str) -> bool {
    name.strip_prefix("libgres_rs").and_then(|rest| rest.strip_suffix(".so")).is_some_and(|version| {
        version.is_empty()
            || version
                .strip_prefix('-')
                .is_some_and(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'~' | b'_')))
    })
}

/// Where plugin file `file` (e.g. "gres_gpu") was loaded from, among the
/// paths of the files loaded into the process (the dynamic loader's list,
/// or the files of `/proc/<pid>/maps`): the `<file>.so` whose directory
/// also holds a loaded copy of our library (the plugin file loads it from
/// its own directory), else the first `<file>.so`.
pub fn loaded_from<'a>(paths: impl IntoIterator<Item = &'a str>, file: &str) -> Option<String> {
    let name = format!("{file}.so");
    let split = |p: &'a str| p.rsplit_once('/').unwrap_or(("", p));
    let (mut library_dirs, mut candidates): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for p in paths {
        match split(p) {
            (dir, base) if is_library_file(base) => library_dirs.push(dir),
            (_, base) if base == name => candidates.push(p),
            _ => {}
        }
    }
    let beside_library = candidates.iter().find(|&&p| library_dirs.contains(&split(p).0));
    beside_library.or(candidates.first()).map(|p| p.to_string())
}

/// Whether the process whose `argv[0]` is `argv0` is a slurmstepd
/// (`/usr/sbin/slurmstepd`, Debian's `slurmstepd-wlm`, or the title
/// slurmstepd gives itself, `slurmstepd: [1.0]`): it loads the plugins
/// anew for every step.
pub fn is_slurmstepd(argv0: &[u8]) -> bool {
    let base = argv0.rsplit(|&b| b == b'/').next().unwrap_or(argv0);
    base.starts_with(b"slurmstepd")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_daemon() {
        for stepd in ["/usr/sbin/slurmstepd", "slurmstepd", "/usr/sbin/slurmstepd-wlm", "slurmstepd: [1.0]"] {
            assert!(is_slurmstepd(stepd.as_bytes()), "{stepd}");
        }
        for other in ["/usr/sbin/slurmd", "slurmctld", "/opt/slurmstepd/bin/slurmd", "", "/"] {
            assert!(!is_slurmstepd(other.as_bytes()), "{other}");
        }
    }

    #[test]
    fn library_names() {
        assert!(LIBRARY_FILE.starts_with("libgres_rs-") && is_library_file(LIBRARY_FILE), "{LIBRARY_FILE}");
        for ours in ["libgres_rs.so", "libgres_rs-0.1.0.so", "libgres_rs-0.2.0~rc1.so"] {
            assert!(is_library_file(ours), "{ours}");
        }
        for other in ["libgres_rs.so.1", "libgres_rs-.so", "libgres_rsx.so", "libgres_rs-a/b.so", "libgres_rs-\x1b.so", "gres_gpu.so", "libslurmfull.so"] {
            assert!(!is_library_file(other), "{other}");
        }
    }

    #[test]
    fn the_plugin_file_beside_our_library() {
        let paths = ["/usr/lib/x86_64-linux-gnu/slurm-wlm/gres_gpu.so", "/opt/ours/gres_gpu.so", "/opt/ours/libgres_rs-0.1.0.so", "/opt/x/my_gres_gpu.so"];
        assert_eq!(loaded_from(paths, "gres_gpu").as_deref(), Some("/opt/ours/gres_gpu.so"));
        assert_eq!(loaded_from(paths, "gres_mps"), None);
        assert_eq!(loaded_from(["/x/gpu_nvml.so"], "gpu_nvml").as_deref(), Some("/x/gpu_nvml.so"));
        assert_eq!(loaded_from(["/opt/x/my_gres_gpu.so"], "gres_gpu"), None);
    }
}
