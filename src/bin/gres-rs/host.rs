//! What the tool asks of the host it runs on: its name, its CPUs, and
//! whether a shared library can be loaded.

use std::path::Path;

use gres_core::model::Bitmap;

/// This host's name up to the first dot (what slurmd matches against
/// NodeName and NodeHostname).
pub fn short_hostname() -> String {
    let full = std::fs::read_to_string("/proc/sys/kernel/hostname").ok().or_else(|| std::env::var("HOSTNAME").ok()).unwrap_or_default();
    short_name(full.trim()).to_string()
}

/// A host name up to its first dot.
pub fn short_name(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

/// This host's processors as slurmd counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalCpus {
    /// Logical CPUs (slurmd's `block_map_size`).
    pub cpus: u32,
    /// Cores of the whole host.
    pub cores: u32,
}

/// The count of a CPU list like `0-3,8`.
fn list_count(list: &str) -> Option<usize> {
    let list = list.trim();
    let last = list.split([',', '-']).filter_map(|n| n.parse::<usize>().ok()).max()?;
    Bitmap::from_ranges(last + 1, list).ok().map(|b| b.count())
}

/// The CPUs of this host, from sysfs (`None` when it cannot be read).
pub fn local_cpus() -> Option<LocalCpus> {
    local_cpus_in(Path::new("/sys/devices/system/cpu"))
}

fn local_cpus_in(sys: &Path) -> Option<LocalCpus> {
    let online = std::fs::read_to_string(sys.join("online")).ok()?;
    let cpus = list_count(&online)?;
    let last = online.trim().split([',', '-']).filter_map(|n| n.parse::<usize>().ok()).max()?;
    let set = Bitmap::from_ranges(last + 1, online.trim()).ok()?;
    let mut cores: Vec<(String, String)> = Vec::new();
    for cpu in set.ones() {
        let topo = sys.join(format!("cpu{cpu}/topology"));
        let read = |f: &str| std::fs::read_to_string(topo.join(f)).map(|s| s.trim().to_string());
        let key = match (read("physical_package_id"), read("core_id")) {
            (Ok(p), Ok(c)) => (p, c),
            _ => (String::new(), cpu.to_string()),
        };
        if !cores.contains(&key) {
            cores.push(key);
        }
    }
    Some(LocalCpus { cpus: cpus as u32, cores: cores.len().max(1) as u32 })
}

/// Whether the dynamic loader finds and loads `name` (`nvml-extra`).
pub use nvml_extra::library_loadable;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names() {
        assert_eq!(short_name("gpu01.cluster.example"), "gpu01");
        assert_eq!(short_name("gpu01"), "gpu01");
        assert_eq!(short_name(""), "");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(list_count("0-3,8\n"), Some(5));
        assert_eq!(list_count("0"), Some(1));
        assert_eq!(list_count(""), None);
    }

    #[test]
    fn sysfs_layout() {
        let dir = std::env::temp_dir().join(format!("gres-rs-host-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("online"), "0-3\n").unwrap();
        for (cpu, core) in [(0, 0), (1, 1), (2, 0), (3, 1)] {
            let t = dir.join(format!("cpu{cpu}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("physical_package_id"), "0\n").unwrap();
            std::fs::write(t.join("core_id"), format!("{core}\n")).unwrap();
        }
        assert_eq!(local_cpus_in(&dir), Some(LocalCpus { cpus: 4, cores: 2 }));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(local_cpus().is_some_and(|c| c.cpus >= 1));
    }

    #[test]
    fn libraries() {
        assert!(library_loadable("libc.so.6"));
        assert!(!library_loadable("libgres-rs-no-such-library.so"));
        assert!(!library_loadable("bad\0name"));
    }
}
