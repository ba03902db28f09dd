//! What NVML's readings of the GPUs (`gres_nvml::health`) mean as
//! findings: the memory faults, a lost GPU, a failing or hanging call,
//! the driver's recovery action, NVLinks that were up and are down,
//! throttling.  And the NVLinks each
//! GPU had up, remembered beside the XID cursor: a link no one wired is
//! down on every check and is no fault.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gres_health::fault::{Fault, Finding, GpuRef, RecoveryKind, Source, ThrottleKind};
use slurm_gpu_gres::nvml::health::{GpuHealth, HealthReading, Reading};

/// The file of links seen up, in the state directory.
pub const LINKS_FILE: &str = "nvlinks.state";

/// The identity of GPU `g` as far as NVML gave it.
pub fn gpu_ref(g: &GpuHealth) -> GpuRef {
    let value = |r: &Reading<String>| match r {
        Reading::Value(v) => Some(v.clone()),
        _ => None,
    };
    GpuRef { index: Some(g.index), uuid: value(&g.uuid), pci: value(&g.pci_bus_id) }
}

/// The findings of one reading.  `links_seen` holds, per UUID, the links
/// seen up before (updated with this reading's).  `sw_power_cap` is left
/// out: a GPU at its power limit under load is working as configured.
pub fn findings(reading: &HealthReading, links_seen: &mut BTreeMap<String, BTreeSet<u32>>) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(h) = &reading.hang {
        let gpu = GpuRef { index: h.gpu, ..GpuRef::default() };
        out.push(Finding::new(Fault::NvmlHang { call: h.call.to_string(), ms: h.waited_ms }, gpu, Source::Nvml));
    }
    for g in &reading.gpus {
        let gpu = gpu_ref(g);
        let mut push = |fault: Fault| out.push(Finding::new(fault, gpu.clone(), Source::Nvml));
        if g.lost {
            push(Fault::GpuLost);
            continue;
        }
        for e in g.errors() {
            push(Fault::NvmlError { call: e.call.to_string(), text: e.text.clone() });
        }
        if let Reading::Value(n) = g.dbe_volatile {
            if n > 0 {
                push(Fault::DbeVolatile(n));
            }
        }
        if let Reading::Value(p) = &g.retired_pages {
            if p.pending {
                push(Fault::RetirePending(u64::from(p.count())));
            }
        }
        if let Reading::Value(r) = &g.remapped_rows {
            if r.failure {
                push(Fault::RemapFailure);
            } else if r.pending {
                push(Fault::RemapPending);
            }
        }
        if let Reading::Value(t) = &g.throttle {
            if t.hw_slowdown {
                push(Fault::Throttle(ThrottleKind::HwSlowdown));
            }
            if t.sw_thermal || t.hw_thermal {
                push(Fault::Throttle(ThrottleKind::Thermal));
            }
            if t.hw_power_brake {
                push(Fault::Throttle(ThrottleKind::Power));
            }
        }
        // A value NVML does not document (a newer driver's) is left out.
        if let Reading::Value(v) = g.recovery_action {
            match RecoveryKind::from_nvml(v) {
                Some(RecoveryKind::None) | None => {}
                Some(kind) => push(Fault::RecoveryAction(kind)),
            }
        }
        if let (Reading::Value(links), Some(uuid)) = (&g.nvlinks, &gpu.uuid) {
            let seen = links_seen.entry(uuid.clone()).or_default();
            for l in &links.down {
                if seen.contains(l) {
                    push(Fault::NvlinkDown(*l));
                }
            }
            seen.extend(links.up.iter().copied());
        }
    }
    out
}

/// The links seen up, from `dir`'s [`LINKS_FILE`]: `<uuid> <link>,<link>`
/// lines; what does not read so is left out (the next reading writes it
/// again).
pub fn load_links(dir: &Path) -> BTreeMap<String, BTreeSet<u32>> {
    let text = gres_core::bounded_read::read_bounded(&dir.join(LINKS_FILE), 1 << 20).unwrap_or_default();
    String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|l| {
            let (uuid, links) = l.split_once(' ')?;
            let links: BTreeSet<u32> = links.split(',').filter_map(|n| n.trim().parse().ok()).collect();
            uuid.starts_with("GPU-").then(|| (uuid.to_string(), links))
        })
        .collect()
}

/// [`load_links`]'s file, replaced whole.
pub fn save_links(dir: &Path, links: &BTreeMap<String, BTreeSet<u32>>) -> std::io::Result<()> {
    let text: String = links
        .iter()
        .filter(|(_, l)| !l.is_empty())
        .map(|(uuid, l)| format!("{uuid} {}\n", l.iter().map(u32::to_string).collect::<Vec<_>>().join(",")))
        .collect();
    std::fs::create_dir_all(dir)?;
    gres_health::atomic_file::write_atomically(&dir.join(LINKS_FILE), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_gpu_gres::nvml::health::{NvLinks, Throttle};

    fn gpu(index: u32) -> GpuHealth {
        GpuHealth { index, uuid: Reading::Value(format!("GPU-{index}")), pci_bus_id: Reading::Value(format!("0000:4{index}:00.0")), ..GpuHealth::default() }
    }

    #[test]
    fn a_link_is_down_only_if_it_was_up() {
        let mut seen = BTreeMap::new();
        let mut g = gpu(0);
        g.nvlinks = Reading::Value(NvLinks { up: vec![0, 1], down: vec![2] });
        let reading = HealthReading { gpus: vec![g.clone()], ..HealthReading::default() };
        assert!(findings(&reading, &mut seen).is_empty(), "link 2 was never up");
        g.nvlinks = Reading::Value(NvLinks { up: vec![0], down: vec![1, 2] });
        let reading = HealthReading { gpus: vec![g], ..HealthReading::default() };
        let f = findings(&reading, &mut seen);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].fault, Fault::NvlinkDown(1));
        assert_eq!(f[0].gpu.pci.as_deref(), Some("0000:40:00.0"));
    }

    #[test]
    fn a_gpu_at_its_power_cap_is_no_finding() {
        let mut g = gpu(1);
        g.throttle = Reading::Value(Throttle { raw: 4, sw_power_cap: true, ..Throttle::default() });
        let reading = HealthReading { gpus: vec![g], ..HealthReading::default() };
        assert!(findings(&reading, &mut BTreeMap::new()).is_empty());
    }

    #[test]
    fn a_recovery_action_other_than_none_is_a_finding() {
        let mut quiet = gpu(0);
        quiet.recovery_action = Reading::Value(0);
        let mut reboot = gpu(1);
        reboot.recovery_action = Reading::Value(2);
        let mut old_driver = gpu(2);
        old_driver.recovery_action = Reading::NotSupported;
        let reading = HealthReading { gpus: vec![quiet, reboot, old_driver], ..HealthReading::default() };
        let f = findings(&reading, &mut BTreeMap::new());
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].fault.clone(), f[0].gpu.index), (Fault::RecoveryAction(RecoveryKind::NodeReboot), Some(1)));
    }

    #[test]
    fn links_seen_are_kept_across_runs() {
        let d = std::env::temp_dir().join(format!("gres-rs-links-{}", std::process::id()));
        let links: BTreeMap<String, BTreeSet<u32>> = [("GPU-a".to_string(), [0, 3].into())].into();
        save_links(&d, &links).unwrap();
        assert_eq!(load_links(&d), links);
        std::fs::write(d.join(LINKS_FILE), "garbage\nGPU-b 1,x,2\n").unwrap();
        assert_eq!(load_links(&d), [("GPU-b".to_string(), [1, 2].into())].into());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
