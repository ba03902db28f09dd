//! What NVML's readings of the GPUs (`gres_nvml::health`) mean as
//! findings: the memory faults, a lost GPU, a failing or hanging call,
//! the driver's recovery action, NVLinks that were up and are down,
//! throttling.  And the NVLinks each
//! GPU had up, remembered beside the XID cursor: a link no one wired is
//! down on every check and is no fault.
//!
//! An NVML error is read by what it says of the GPU
//! ([`slurm_gpu_gres::nvml::health::Answer`], one table): "this driver
//! cannot tell" is a note, not a finding; an answer that may pass (a
//! timeout, a call past its deadline, a failing init, the check's time
//! running out) is a warning until it has been seen in `transient_runs`
//! checks in a row, counted per GPU and call in [`TRANSIENT_FILE`]
//! beside the links ([`Streaks`]); a broken GPU's answer is a fault at
//! once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use gres_health::fault::{Fault, Finding, GpuRef, RecoveryKind, Source, ThrottleKind};
use slurm_gpu_gres::nvml::health::{Answer, CallError, GpuHealth, HealthReading, Reading};

/// The file of links seen up, in the state directory.
pub const LINKS_FILE: &str = "nvlinks.state";

/// The file of NVML answers that may pass and the checks in a row that
/// saw each, in the state directory.
pub const TRANSIENT_FILE: &str = "nvml-transient.state";

/// The first line of [`TRANSIENT_FILE`].
const TRANSIENT_HEADER: &str = "gres-rs-nvml-transient 1";

/// At most this many answers are remembered (a node has at most 64 GPUs
/// and a reading makes at most some 30 calls a GPU).
const MAX_STREAKS: usize = 2048;

/// What one reading gives.
#[derive(Debug, Default)]
pub struct NvmlRead {
    /// Faults now (and the links' and the readings' findings).
    pub findings: Vec<Finding>,
    /// What NVML could not tell, where the reading stopped.
    pub notes: Vec<String>,
    /// The answers that may pass, for [`Streaks::advance`]: one per key.
    pub transients: Vec<Transient>,
}

/// An NVML answer that may pass, seen in this reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transient {
    /// What identifies it from one check to the next: the GPU (its UUID
    /// where read, else `gpu<index>`; `node` for nvmlInit, the count and
    /// the time budget), the call, and NVML's code or `hang`.
    pub key: String,
    pub gpu: GpuRef,
    pub call: String,
    /// NVML's text, or how long the call ran.
    pub text: String,
    /// A call past its deadline (or the check's time running out): how
    /// long it had run.
    pub hang_ms: Option<u64>,
}

/// The identity of GPU `g` as far as NVML gave it.
pub fn gpu_ref(g: &GpuHealth) -> GpuRef {
    let value = |r: &Reading<String>| match r {
        Reading::Value(v) => Some(v.clone()),
        _ => None,
    };
    GpuRef { index: Some(g.index), uuid: value(&g.uuid), pci: value(&g.pci_bus_id) }
}

/// The word for GPU `gpu` in a [`Transient::key`]: its UUID (made one
/// word), else `gpu<index>`, else `node`.
fn key_gpu(gpu: &GpuRef) -> String {
    match (&gpu.uuid, gpu.index) {
        (Some(u), _) => u.chars().map(|c| if c.is_whitespace() || c.is_control() { '_' } else { c }).collect(),
        (None, Some(i)) => format!("gpu{i}"),
        (None, None) => "node".to_string(),
    }
}

/// The GPUs `list` as a note writes them: `gpu 3`, `gpus 0-2,5`.
fn gpu_list(list: &BTreeSet<u32>) -> String {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for &i in list {
        match runs.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(i) => *end = i,
            _ => runs.push((i, i)),
        }
    }
    let text: Vec<String> = runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    format!("{} {}", if list.len() == 1 { "gpu" } else { "gpus" }, text.join(","))
}

/// Gathers one reading's findings, notes and transients.
#[derive(Default)]
struct Gather {
    read: NvmlRead,
    /// Per (call, text): the GPUs whose driver could not tell.
    cannot_tell: BTreeMap<(&'static str, String), BTreeSet<u32>>,
    keys: BTreeSet<String>,
}

impl Gather {
    fn transient(&mut self, gpu: &GpuRef, call: &str, what: &str, text: String, hang_ms: Option<u64>) {
        let key = format!("{} {call} {what}", key_gpu(gpu));
        if self.keys.insert(key.clone()) {
            self.read.transients.push(Transient { key, gpu: gpu.clone(), call: call.to_string(), text, hang_ms });
        }
    }

    /// A failed call `e` on GPU `gpu`, by what it means.
    fn error(&mut self, gpu: &GpuRef, e: &CallError) {
        match e.answer {
            Answer::CannotTell => {
                if let Some(i) = gpu.index {
                    self.cannot_tell.entry((e.call, e.text.clone())).or_default().insert(i);
                }
            }
            Answer::Transient => {
                let code = e.code.map_or_else(|| "error".to_string(), |c| c.to_string());
                self.transient(gpu, e.call, &code, e.text.clone(), None);
            }
            Answer::Fault => {
                // Once a GPU and call (the two ECC counts are one call).
                if self.keys.insert(format!("{} {} fault {}", key_gpu(gpu), e.call, e.text)) {
                    self.read.findings.push(Finding::new(Fault::NvmlError { call: e.call.to_string(), text: e.text.clone() }, gpu.clone(), Source::Nvml));
                }
            }
        }
    }
}

/// The findings of one reading, its notes, and the answers that may pass
/// (for [`Streaks::advance`]).  `links_seen` holds, per UUID, the links
/// seen up before (updated with this reading's).  `sw_power_cap` is left
/// out: a GPU at its power limit under load is working as configured.
pub fn findings(reading: &HealthReading, links_seen: &mut BTreeMap<String, BTreeSet<u32>>) -> NvmlRead {
    let mut at = Gather::default();
    let node = GpuRef::default();
    match (&reading.init_error, &reading.unusable) {
        (Some(e), _) if e.answer == Answer::CannotTell => {
            at.read.notes.push(format!("{}: {} (NVML cannot tell; the GPUs are not checked through NVML, only counted outside it)", e.call, e.text));
        }
        (Some(e), _) => at.error(&node, e),
        (None, Some(why)) => at.transient(&node, "nvmlInit_v2", "error", why.clone(), None),
        (None, None) => {}
    }
    let by_index = |i: Option<u32>| reading.gpus.iter().find(|g| Some(g.index) == i).map_or(GpuRef { index: i, ..GpuRef::default() }, gpu_ref);
    if let Some(h) = &reading.hang {
        let gpu = by_index(h.gpu);
        at.transient(&gpu, h.call, "hang", format!("did not return in {} ms", h.waited_ms), Some(h.waited_ms));
    }
    if let Some(h) = &reading.out_of_time {
        let at_gpu = h.gpu.map_or_else(String::new, |g| format!(" on GPU {g}"));
        let read: BTreeSet<u32> =
            reading.gpus.iter().filter(|g| g.nvlinks != Reading::NotRead || g.lost || g.handle_error.is_some()).map(|g| g.index).collect();
        let unread: BTreeSet<u32> = (0..reading.device_count.unwrap_or(0)).filter(|i| !read.contains(i)).collect();
        let unread = if unread.is_empty() { String::new() } else { format!("; {} not read to the end (not faults)", gpu_list(&unread)) };
        at.read.notes.push(format!("the NVML reading ran out of the check's time in {}{at_gpu} after {} NVML calls{unread}", h.call, reading.nvml_calls));
        at.transient(&node, "(run budget)", "hang", format!("the NVML reading ran out of time in {}{at_gpu}", h.call), Some(h.waited_ms));
    }
    for g in &reading.gpus {
        let gpu = gpu_ref(g);
        if g.lost {
            at.read.findings.push(Finding::new(Fault::GpuLost, gpu, Source::Nvml));
            continue;
        }
        for e in g.errors() {
            at.error(&gpu, e);
        }
        let out = &mut at.read.findings;
        let mut push = |fault: Fault| out.push(Finding::new(fault, gpu.clone(), Source::Nvml));
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
    for ((call, text), gpus) in std::mem::take(&mut at.cannot_tell) {
        at.read.notes.push(format!("{}: {call}: {text} (this driver cannot tell; not checked)", gpu_list(&gpus)));
    }
    at.read
}

/// The checks in a row that saw each NVML answer that may pass, by
/// [`Transient::key`], kept in [`TRANSIENT_FILE`] from one check to the
/// next.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Streaks(BTreeMap<String, u32>);

impl Streaks {
    /// The counts in `dir`'s [`TRANSIENT_FILE`]: `<runs> <key>` lines
    /// after its header.  A missing, unreadable or foreign file is a fresh
    /// start (no count), and lines that do not read so are left out: the
    /// worst is a warning more before a drain.
    pub fn load(dir: &Path) -> Streaks {
        let bytes = gres_core::bounded_read::read_bounded(&dir.join(TRANSIENT_FILE), 1 << 18).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let mut lines = text.lines();
        if lines.next() != Some(TRANSIENT_HEADER) {
            return Streaks::default();
        }
        let counts = lines
            .filter_map(|l| {
                let (runs, key) = l.split_once(' ')?;
                let runs: u32 = runs.parse().ok().filter(|n| *n > 0)?;
                (!key.trim().is_empty()).then(|| (key.to_string(), runs))
            })
            .take(MAX_STREAKS)
            .collect();
        Streaks(counts)
    }

    /// The checks in a row that saw `key`, this one included once
    /// [`Streaks::advance`]d.
    pub fn runs(&self, key: &str) -> u32 {
        self.0.get(key).copied().unwrap_or(0)
    }

    /// This check's answers: each seen one check more in a row, those not
    /// seen forgotten (their streak broke).  Each is a finding: a warning
    /// ([`Fault::NvmlTransient`]) below `needed` checks in a row, from
    /// then on the fault it stands for ([`Fault::NvmlHang`] for a call
    /// past its deadline, else [`Fault::NvmlError`]).
    pub fn advance(&mut self, seen: &[Transient], needed: u32) -> Vec<Finding> {
        let needed = needed.max(1);
        let mut next = BTreeMap::new();
        let mut out = Vec::new();
        for t in seen {
            if next.contains_key(&t.key) {
                continue;
            }
            let runs = self.runs(&t.key).saturating_add(1);
            if next.len() < MAX_STREAKS {
                next.insert(t.key.clone(), runs);
            }
            let fault = match t.hang_ms {
                _ if runs < needed => Fault::NvmlTransient { call: t.call.clone(), text: t.text.clone(), runs, needed },
                Some(ms) => Fault::NvmlHang { call: t.call.clone(), ms },
                None => Fault::NvmlError { call: t.call.clone(), text: t.text.clone() },
            };
            out.push(Finding::new(fault, t.gpu.clone(), Source::Nvml));
        }
        self.0 = next;
        out
    }

    /// [`Streaks::load`]'s file, replaced whole.
    pub fn save(&self, dir: &Path) -> std::io::Result<()> {
        let mut text = format!("{TRANSIENT_HEADER}\n");
        for (key, runs) in &self.0 {
            text.push_str(&format!("{runs} {key}\n"));
        }
        std::fs::create_dir_all(dir)?;
        gres_health::atomic_file::write_atomically(&dir.join(TRANSIENT_FILE), text.as_bytes())
    }
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
        assert!(findings(&reading, &mut seen).findings.is_empty(), "link 2 was never up");
        g.nvlinks = Reading::Value(NvLinks { up: vec![0], down: vec![1, 2] });
        let reading = HealthReading { gpus: vec![g], ..HealthReading::default() };
        let f = findings(&reading, &mut seen).findings;
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].fault, Fault::NvlinkDown(1));
        assert_eq!(f[0].gpu.pci.as_deref(), Some("0000:40:00.0"));
    }

    #[test]
    fn a_gpu_at_its_power_cap_is_no_finding() {
        let mut g = gpu(1);
        g.throttle = Reading::Value(Throttle { raw: 4, sw_power_cap: true, ..Throttle::default() });
        let reading = HealthReading { gpus: vec![g], ..HealthReading::default() };
        assert!(findings(&reading, &mut BTreeMap::new()).findings.is_empty());
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
        let f = findings(&reading, &mut BTreeMap::new()).findings;
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].fault.clone(), f[0].gpu.index), (Fault::RecoveryAction(RecoveryKind::NodeReboot), Some(1)));
    }

    fn failed(call: &'static str, code: u32, text: &str) -> CallError {
        CallError { call, code: Some(code), text: text.into(), answer: Answer::of_code(code, true) }
    }

    #[test]
    fn what_cannot_be_told_is_one_note_and_what_may_pass_a_transient() {
        let mut gpus: Vec<GpuHealth> = (0..8).map(gpu).collect();
        for g in &mut gpus {
            g.remapped_rows = Reading::Failed(failed("nvmlDeviceGetRemappedRows", 13, "Function Not Found"));
        }
        gpus[3].dbe_volatile = Reading::Failed(failed("nvmlDeviceGetTotalEccErrors", 10, "Timeout"));
        gpus[3].dbe_aggregate = Reading::Failed(failed("nvmlDeviceGetTotalEccErrors", 10, "Timeout"));
        gpus[5].throttle = Reading::Failed(failed("nvmlDeviceGetCurrentClocksThrottleReasons", 999, "Unknown Error"));
        let reading = HealthReading { gpus, device_count: Some(8), ..HealthReading::default() };
        let r = findings(&reading, &mut BTreeMap::new());
        assert_eq!(r.notes, ["gpus 0-7: nvmlDeviceGetRemappedRows: Function Not Found (this driver cannot tell; not checked)"]);
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        assert_eq!(
            (&r.findings[0].fault, r.findings[0].gpu.index),
            (&Fault::NvmlError { call: "nvmlDeviceGetCurrentClocksThrottleReasons".into(), text: "Unknown Error".into() }, Some(5))
        );
        // The two ECC counts are one answer.
        assert_eq!(r.transients.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(), ["GPU-3 nvmlDeviceGetTotalEccErrors 10"]);
    }

    #[test]
    fn a_transient_is_a_fault_once_it_lasts_and_a_clean_check_resets_it() {
        let t =
            |key: &str, hang: Option<u64>| Transient { key: key.into(), gpu: GpuRef::default(), call: "nvmlX".into(), text: "Timeout".into(), hang_ms: hang };
        let mut s = Streaks::default();
        let kinds = |f: Vec<Finding>| f.into_iter().map(|f| f.fault).collect::<Vec<_>>();
        let warn = |runs| Fault::NvmlTransient { call: "nvmlX".into(), text: "Timeout".into(), runs, needed: 3 };
        assert_eq!(kinds(s.advance(&[t("a", None), t("a", None)], 3)), [warn(1)]);
        assert_eq!(kinds(s.advance(&[t("a", None)], 3)), [warn(2)]);
        assert_eq!(kinds(s.advance(&[t("a", None)], 3)), [Fault::NvmlError { call: "nvmlX".into(), text: "Timeout".into() }]);
        assert!(s.advance(&[], 3).is_empty());
        assert_eq!(kinds(s.advance(&[t("a", None)], 3)), [warn(1)]);
        assert_eq!(kinds(s.advance(&[t("h", Some(7))], 1)), [Fault::NvmlHang { call: "nvmlX".into(), ms: 7 }]);
    }

    #[test]
    fn streaks_are_kept_across_runs_and_garbage_is_a_fresh_start() {
        let d = std::env::temp_dir().join(format!("gres-rs-streaks-{}", std::process::id()));
        let t = Transient { key: "GPU-a nvmlDeviceGetTotalEccErrors 10".into(), gpu: GpuRef::default(), call: "c".into(), text: "t".into(), hang_ms: None };
        let mut s = Streaks::default();
        s.advance(std::slice::from_ref(&t), 3);
        s.advance(std::slice::from_ref(&t), 3);
        s.save(&d).unwrap();
        assert_eq!(Streaks::load(&d).runs(&t.key), 2);
        std::fs::write(d.join(TRANSIENT_FILE), "garbage\n2 x\n").unwrap();
        assert_eq!(Streaks::load(&d), Streaks::default());
        std::fs::write(d.join(TRANSIENT_FILE), format!("{TRANSIENT_HEADER}\nx y\n0 z\n4 GPU-b nvmlX hang\n")).unwrap();
        assert_eq!(Streaks::load(&d).0, [("GPU-b nvmlX hang".to_string(), 4)].into());
        std::fs::remove_dir_all(&d).unwrap();
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
