//! The GPUs this machine shows outside NVML: the driver's device files
//! (`/dev/nvidia<minor>`) and NVIDIA's display and 3D controllers on the
//! PCI bus (`/sys/bus/pci/devices`).  A GPU that fell off the bus is gone
//! from NVML but often still has its device file, and one the driver did
//! not take has no file but is still on the bus: the counts side by side
//! tell which.

use std::path::Path;

use gres_core::bounded_read::read_bounded;

/// NVIDIA's PCI vendor id.
const NVIDIA: &str = "0x10de";

/// The minors of the `nvidia<N>` files in `dev_dir`, sorted (`nvidiactl`,
/// `nvidia-uvm`, `nvidia-caps/` and the like are not GPUs).
pub fn device_minors(dev_dir: &Path) -> Vec<u32> {
    let mut minors: Vec<u32> =
        std::fs::read_dir(dev_dir).into_iter().flatten().flatten().filter_map(|e| e.file_name().to_str()?.strip_prefix("nvidia")?.parse().ok()).collect();
    minors.sort_unstable();
    minors
}

/// The PCI addresses (`0000:41:00.0`) of NVIDIA's VGA (class `0x0300..`)
/// and 3D (`0x0302..`) controllers in a sysfs `bus/pci/devices` directory,
/// sorted; NVSwitches and audio functions are other classes.
pub fn pci_gpus(pci_devices: &Path) -> Vec<String> {
    let attr = |dir: &Path, name: &str| -> Option<String> {
        let bytes = read_bounded(&dir.join(name), 64).ok()?;
        Some(String::from_utf8_lossy(&bytes).trim().to_ascii_lowercase())
    };
    let mut out: Vec<String> = std::fs::read_dir(pci_devices)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let dir = e.path();
            attr(&dir, "vendor").as_deref() == Some(NVIDIA) && attr(&dir, "class").is_some_and(|c| c.starts_with("0x0300") || c.starts_with("0x0302"))
        })
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gres-rs-inventory-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn device_files_are_the_numbered_ones() {
        let d = scratch("dev");
        for f in ["nvidia0", "nvidia10", "nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-modeset", "nvidia3x"] {
            fs::write(d.join(f), "").unwrap();
        }
        fs::create_dir(d.join("nvidia-caps")).unwrap();
        assert_eq!(device_minors(&d), [0, 2, 10]);
        assert!(device_minors(&d.join("missing")).is_empty());
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn pci_gpus_are_nvidia_vga_and_3d_controllers() {
        let d = scratch("pci");
        let dev = |addr: &str, vendor: &str, class: &str| {
            let p = d.join(addr);
            fs::create_dir(&p).unwrap();
            fs::write(p.join("vendor"), format!("{vendor}\n")).unwrap();
            fs::write(p.join("class"), format!("{class}\n")).unwrap();
        };
        dev("0000:41:00.0", "0x10de", "0x030200");
        dev("0000:01:00.0", "0x10DE", "0x030000");
        dev("0000:01:00.1", "0x10de", "0x040300"); // its audio function
        dev("0000:c1:00.0", "0x10de", "0x068000"); // an NVSwitch
        dev("0000:02:00.0", "0x1002", "0x030000"); // another vendor's GPU
        assert_eq!(pci_gpus(&d), ["0000:01:00.0", "0000:41:00.0"]);
        fs::remove_dir_all(&d).unwrap();
    }
}
