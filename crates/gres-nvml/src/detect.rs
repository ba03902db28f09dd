//! The node's NVIDIA GPUs as gres.conf records, as Slurm 22.05's gpu/nvml
//! reports them: one record per GPU in NVML index order (which is PCI bus
//! id order), or per MIG device for a GPU in MIG mode.
//!
//! Where the stock plugin stops slurmd (a GPU in MIG mode without MIG
//! devices, an empty CPU affinity, an affinity past the node's CPU count),
//! this logs the same message as an error and goes on: the MIG GPU is left
//! out, the GPU without affinity gets no `Cores`, the GPU whose affinity
//! does not fit is left out.

use super::session::DetectError;
use super::{Log, Paths, Session};
use gres_core::bounded_read::{read_bounded, MAX_FILE_LEN};
use gres_core::gpu_freq;
use gres_core::host::{Host, NodeConfig};
use gres_core::model::{Bitmap, ConfFlags, GresRecord};
use gres_core::nvml_model::{self as model, SystemGpu};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;

/// NVLink lanes a GPU can have (NVML's `NVML_NVLINK_MAX_LINKS`).
pub const NVLINK_MAX_LINKS: u32 = 18;
/// NVML's MIG mode value for "enabled".
const MIG_ENABLE: u32 = 1;

/// What detection found, besides the records: for the report.
#[derive(Debug, Default)]
pub struct Detection {
    pub driver_version: Option<String>,
    pub nvml_version: Option<String>,
    pub device_count: u32,
    pub gpus: Vec<GresRecord>,
}

/// The flags of every record gpu/nvml detects: `ENV_NVML`, with
/// `GRES_CONF_AUTODETECT` from the releases that have it.
pub fn record_flags(behaviour: &gres_core::behaviour::Behaviour) -> u32 {
    if behaviour.autodetect_conf_flag {
        ConfFlags::ENV_NVML | ConfFlags::AUTODETECT
    } else {
        ConfFlags::ENV_NVML
    }
}

/// The flags of a MIG device's record: [`record_flags`], with
/// `GRES_CONF_MIG` and bit 14 (`GLOBAL_INDEX` or `UUID`) from the releases
/// whose gpu/nvml sets them.
pub fn mig_record_flags(behaviour: &gres_core::behaviour::Behaviour) -> u32 {
    let mut flags = record_flags(behaviour);
    if behaviour.mig_conf_flag {
        flags |= ConfFlags::MIG;
    }
    if behaviour.nvml_mig_bit14() {
        flags |= ConfFlags::BIT14;
    }
    flags
}

/// The node's GPUs as gres.conf records (name `gpu`, count 1, `ENV_NVML`),
/// with `Cores` converted to abstract ids by `host.mac_to_abs` and sized
/// for `cfg.cpu_cnt` CPUs, with NVML and the device files where `paths`
/// says.  Errors about single GPUs are logged and the GPU is skipped;
/// `Err` only when NVML itself is unusable.
pub fn detect(host: &dyn Host, cfg: NodeConfig, paths: &Paths) -> Result<Vec<GresRecord>, DetectError> {
    detect_logged(host, cfg, paths, &mut Log::default()).map(|d| d.gpus)
}

/// [`detect`], keeping its log lines in `log`.
pub fn detect_logged(host: &dyn Host, cfg: NodeConfig, paths: &Paths, log: &mut Log) -> Result<Detection, DetectError> {
    let s = super::session(paths)?;
    run(&s, host, cfg, paths, log)
}

/// The gpu plugin's `get_system_gpu_list`, with the stock plugin's
/// outcomes: the records; an empty list when NVML does not initialize or
/// cannot count GPUs (slurmd then keeps only configured GPUs that name a
/// File); `None` when there is no NVML library (what slurmd's gpu/generic
/// answers).  NVML is shut down afterwards, as the stock plugin does.
pub fn system_gpu_list(host: &dyn Host, cfg: NodeConfig, paths: &Paths) -> Option<Vec<GresRecord>> {
    let mut log = Log::daemon();
    let out = match detect_logged(host, cfg, paths, &mut log) {
        Ok(d) => Some(d.gpus),
        Err(e @ DetectError::Library { .. }) => {
            log.error(e.to_string());
            log.error("System GPU detection failed");
            None
        }
        Err(e) => {
            log.error(e.to_string());
            log.info("0 GPU system device(s) detected");
            Some(Vec::new())
        }
    };
    super::release();
    out
}

fn run(s: &Session, host: &dyn Host, cfg: NodeConfig, paths: &Paths, log: &mut Log) -> Result<Detection, DetectError> {
    let nvml = &s.nvml;
    let mut d = Detection::default();
    let driver = match nvml.sys_driver_version() {
        Ok(v) => Some(v),
        Err(e) => {
            log.error(format_args!("Failed to get the NVIDIA graphics driver version: {}", s.text(&e)));
            None
        }
    };
    let version = match nvml.sys_nvml_version() {
        Ok(v) => Some(v),
        Err(e) => {
            log.error(format_args!("Failed to get the NVML library version: {}", s.text(&e)));
            None
        }
    };
    log.debug(format_args!("Systems Graphics Driver Version: {}", driver.as_deref().unwrap_or("")));
    log.debug(format_args!("NVML Library Version: {}", version.as_deref().unwrap_or("")));
    d.driver_version = driver;
    d.nvml_version = version;

    let count = nvml.device_count().map_err(|e| DetectError::DeviceCount(s.text(&e)))?;
    d.device_count = count;
    log.debug2(format_args!("Total CPU count: {}", cfg.cpu_cnt));
    log.debug2(format_args!("Device count: {count}"));

    // NVML index -> PCI bus id, for the NVLink peers.
    let mut lut: Vec<Option<String>> = Vec::new();
    for i in 0..count {
        lut.push(match nvml.device_by_index(i) {
            Ok(dev) => pci_bus_id(s, &dev, log),
            Err(e) => {
                log.error(format_args!("Failed to get device handle for GPU {i}: {}", s.text(&e)));
                None
            }
        });
    }

    let enabled_cpus = if host.behaviour().gpu_affinity_enabled_cpus { host.enabled_cpus() } else { None };
    let mut ctx = Ctx { s, host, cfg, paths, lut: &lut, driver: d.driver_version.as_deref().unwrap_or(""), mig_minors: None, enabled_cpus };
    for i in 0..count {
        ctx.gpu(i, &mut d.gpus, log);
    }
    log.info(format_args!("{count} GPU system device(s) detected"));
    Ok(d)
}

fn pci_bus_id(s: &Session, dev: &Device<'_>, log: &mut Log) -> Option<String> {
    match dev.pci_info() {
        Ok(p) => Some(p.bus_id),
        Err(e) => {
            log.error(format_args!("Failed to get PCI info of GPU: {}", s.text(&e)));
            None
        }
    }
}

/// What every GPU's detection needs.
struct Ctx<'a> {
    s: &'a Session,
    host: &'a dyn Host,
    cfg: NodeConfig,
    paths: &'a Paths,
    lut: &'a [Option<String>],
    driver: &'a str,
    /// The `mig-minors` text, read at the first MIG device.
    mig_minors: Option<Result<String, String>>,
    /// The machine CPUs slurmd uses, to which each GPU's affinity is cut
    /// (`Behaviour::gpu_affinity_enabled_cpus`); `None`: all of it.
    enabled_cpus: Option<Bitmap>,
}

/// One GPU's common facts.
struct Gpu {
    type_name: String,
    uuid: String,
    file: String,
    minor: u32,
    cpus_abs: Option<String>,
    cpus_mac: Option<Bitmap>,
}

impl Ctx<'_> {
    fn gpu(&mut self, i: u32, out: &mut Vec<GresRecord>, log: &mut Log) {
        let s = self.s;
        let nvml = &s.nvml;
        let flags = record_flags(self.host.behaviour());
        let dev = match nvml.device_by_index(i) {
            Ok(d) => d,
            Err(e) => {
                log.error(format_args!("Failed to get device handle for GPU {i}: {}", s.text(&e)));
                log.error("Creating null GRES GPU record");
                self.push(out, &SystemGpu { cpu_cnt: self.cfg.cpu_cnt, flags, ..Default::default() }, log);
                return;
            }
        };
        let mig_mode = mig_enabled(s, &dev, log);

        let name = dev.name().unwrap_or_else(|e| {
            log.error(format_args!("Failed to get name of the GPU: {}", s.text(&e)));
            String::new()
        });
        let type_name = model::gpu_type_from_name(&name);
        let uuid = dev.uuid().unwrap_or_else(|e| {
            log.error(format_args!("Failed to get UUID of GPU: {}", s.text(&e)));
            String::new()
        });
        let pci = dev.pci_info().map_err(|e| log.error(format_args!("Failed to get PCI info of GPU: {}", s.text(&e)))).ok();
        let minor = match dev.minor_number() {
            Ok(m) => m,
            Err(e) => {
                log.error(format_args!("Failed to get minor number of GPU: {}", s.text(&e)));
                return;
            }
        };

        let cpus_mac = match dev.cpu_affinity(model::CPU_SET_WORDS) {
            Ok(words) => {
                // `c_ulong` is 64-bit here but not on every target.
                #[allow(clippy::useless_conversion)]
                let words: Vec<u64> = words.into_iter().map(u64::from).collect();
                let b = model::cpu_mask_to_bitmap(&words);
                if b.count() == 0 {
                    log.error("cpu_set_bitstr is empty! No CPU affinity for device");
                    None
                } else {
                    // Without the E-cores slurmd left out (which it could
                    // not convert to its core ids).
                    Some(match &self.enabled_cpus {
                        Some(enabled) => b.and(enabled),
                        None => b,
                    })
                }
            }
            Err(e) => {
                log.error(format_args!("Failed to get cpu affinity of GPU: {}", s.text(&e)));
                None
            }
        };
        let mac_range = cpus_mac.as_ref().map(Bitmap::to_ranges);
        let cpus_abs = match &mac_range {
            None => None,
            Some(r) => match self.host.mac_to_abs(r) {
                Some(abs) => Some(abs),
                None => {
                    log.error("    Conversion from machine to abstract failed");
                    return;
                }
            },
        };

        let nvlinks = self.nvlinks(&dev, i as usize, log);
        let file = model::device_file(&self.paths.dev_dir, minor);

        log.debug2(format_args!("GPU index {i}:"));
        log.debug2(format_args!("    Name: {type_name}"));
        log.debug2(format_args!("    UUID: {uuid}"));
        let (dom, bus, devno, bus_id) = pci.as_ref().map(|p| (p.domain, p.bus, p.device, p.bus_id.as_str())).unwrap_or((0, 0, 0, ""));
        log.debug2(format_args!("    PCI Domain/Bus/Device: {dom}:{bus}:{devno}"));
        log.debug2(format_args!("    PCI Bus ID: {bus_id}"));
        log.debug2(format_args!("    NVLinks: {nvlinks}"));
        log.debug2(format_args!("    Device File (minor number): {file}"));
        if minor != i {
            log.debug(format_args!("Note: GPU index {i} is different from minor number {minor}"));
        }
        log.debug2(format_args!("    CPU Affinity Range - Machine: {}", mac_range.as_deref().unwrap_or("")));
        log.debug2(format_args!("    Core Affinity Range - Abstract: {}", cpus_abs.as_deref().unwrap_or("")));
        log.debug2(format_args!("    MIG mode: {}", if mig_mode { "enabled" } else { "disabled" }));

        let gpu = Gpu { type_name, uuid, file, minor, cpus_abs, cpus_mac };
        let added_migs = mig_mode && self.mig_devices(&dev, &gpu, out, log);
        // A GPU whose MIG devices could not be read is the whole GPU from
        // 24.11 (with GRES_CONF_MIG where MIG records have it: stock sets
        // it before it reads them).
        let whole_gpu = !mig_mode || (!added_migs && self.host.behaviour().mig_unreadable_reports_gpu);
        if whole_gpu {
            let flags = if mig_mode && self.host.behaviour().mig_conf_flag { flags | ConfFlags::MIG } else { flags };
            let g = SystemGpu {
                cpu_cnt: self.cfg.cpu_cnt,
                cpus: gpu.cpus_abs.as_deref(),
                cpus_mac: gpu.cpus_mac.as_ref(),
                file: Some(&gpu.file),
                type_name: Some(&gpu.type_name),
                links: Some(&nvlinks),
                // From the release that names whole GPUs by UUID too.
                unique_id: (self.host.behaviour().nvml_whole_gpu_unique_id && !gpu.uuid.is_empty()).then_some(gpu.uuid.as_str()),
                flags,
            };
            self.push(out, &g, log);
        }
        if tracing::enabled!(tracing::Level::TRACE) {
            print_freqs(s, &dev, log);
        }
    }

    fn push(&self, out: &mut Vec<GresRecord>, g: &SystemGpu<'_>, log: &mut Log) {
        match model::system_gpu_record(g) {
            Ok(r) => out.push(r),
            Err(e) => log.error(e),
        }
    }

    /// Slurm's NVLink string for GPU `index`.
    fn nvlinks(&self, dev: &Device<'_>, index: usize, log: &mut Log) -> String {
        let mut remote = Vec::new();
        for lane in 0..NVLINK_MAX_LINKS {
            let link = dev.link_wrapper_for(lane);
            match link.is_active() {
                Err(NvmlError::InvalidArg) => {
                    log.debug3(format_args!("Device/lane {lane} is invalid"));
                    continue;
                }
                Err(NvmlError::NotSupported) => {
                    log.debug3(format_args!("Device {lane} does not support nvmlDeviceGetNvLinkState()"));
                    break;
                }
                Err(e) => log.error(format_args!("Failed to get nvlink info from GPU: {}", self.s.text(&e))),
                Ok(false) => log.debug3(format_args!("nvlink {lane} is disabled")),
                Ok(true) => {
                    log.debug3(format_args!("nvlink {lane} is enabled"));
                    match link.remote_pci_info() {
                        Ok(p) => remote.push(p.bus_id),
                        Err(e) => log.error(format_args!("Failed to get PCI info of endpoint device for lane {lane}: {}", self.s.text(&e))),
                    }
                }
            }
        }
        model::links_string(index, self.lut.len(), self.lut, &remote)
    }

    /// The records of a GPU in MIG mode, one per MIG device that could be
    /// read; whether there was one.
    fn mig_devices(&mut self, dev: &Device<'_>, gpu: &Gpu, out: &mut Vec<GresRecord>, log: &mut Log) -> bool {
        let calls = &self.s.extra;
        let max = match calls.max_mig_device_count(dev) {
            Ok(n) => n,
            Err(e) => {
                log.error(format_args!("Failed to get MIG device count: {}", self.s.text(&e)));
                0
            }
        };
        if max == 0 {
            log.error("MIG device count is 0; MIG is either disabled or not supported");
        }
        // MIG indexes start at 0 and are contiguous.
        let mut mig_count = 0;
        for j in 0..max {
            if mig_handle(self.s, dev, j, log).is_none() {
                break;
            }
            mig_count += 1;
        }
        log.debug2(format_args!("    MIG count: {mig_count}"));
        if mig_count == 0 {
            log.error("MIG mode is enabled, but no MIG devices were found. Please either create MIG instances, disable MIG mode, remove AutoDetect=nvml, or remove GPUs from the configuration completely.");
            return false;
        }
        let mut added = false;
        for j in 0..mig_count {
            let Some(m) = self.mig_device(dev, gpu, j, log) else { continue };
            // A MIG device's links among its GPU's, as 22.05 gives them in
            // every release: from 23.02 stock gives none, and slurmctld
            // then gives a job for every GPU of a node with MIG and
            // NVLinked GPUs one GPU fewer (docs/deviations.md NVML 6).
            let links = model::empty_links(j as usize, mig_count as usize);
            let g = SystemGpu {
                cpu_cnt: self.cfg.cpu_cnt,
                cpus: gpu.cpus_abs.as_deref(),
                cpus_mac: gpu.cpus_mac.as_ref(),
                file: Some(&m.files),
                type_name: Some(&m.profile),
                links: Some(&links),
                unique_id: Some(&m.unique_id),
                flags: mig_record_flags(self.host.behaviour()),
            };
            self.push(out, &g, log);
            added = true;
        }
        added
    }

    fn mig_device(&mut self, dev: &Device<'_>, gpu: &Gpu, j: u32, log: &mut Log) -> Option<MigFacts> {
        let calls = &self.s.extra;
        let mig = mig_handle(self.s, dev, j, log)?;
        let mig_uuid = mig.uuid().unwrap_or_else(|e| {
            log.error(format_args!("Failed to get UUID of GPU: {}", self.s.text(&e)));
            String::new()
        });
        let gi = calls.gpu_instance_id(&mig).unwrap_or_else(|e| {
            log.error(format_args!("Failed to get MIG GPU instance ID: {}", self.s.text(&e)));
            0
        });
        let ci = calls.compute_instance_id(&mig).unwrap_or_else(|e| {
            log.error(format_args!("Failed to get MIG compute instance ID: {}", self.s.text(&e)));
            0
        });
        let (gi_minor, ci_minor) = self.cap_minors(gpu.minor, gi, ci, log)?;
        let profile = format!("{}{}", model::mig_type_base(&gpu.type_name), self.mig_suffix(&mig, log)?);
        let unique_id = model::mig_unique_id(self.driver, &mig_uuid, &gpu.uuid, gi, ci);
        let files = model::mig_files(&self.paths.dev_dir, &gpu.file, gi_minor, ci_minor);
        log.debug2(format_args!("GPU minor {}, MIG index {j}:", gpu.minor));
        log.debug2(format_args!("    MIG Profile: {profile}"));
        log.debug2(format_args!("    MIG UUID: {mig_uuid}"));
        log.debug2(format_args!("    UniqueID: {unique_id}"));
        log.debug2(format_args!("    GPU Instance (GI) ID: {gi}"));
        log.debug2(format_args!("    Compute Instance (CI) ID: {ci}"));
        log.debug2(format_args!("    GI Minor Number: {gi_minor}"));
        log.debug2(format_args!("    CI Minor Number: {ci_minor}"));
        log.debug2(format_args!("    Device Files: {files}"));
        Some(MigFacts { profile, unique_id, files })
    }

    /// The profile part of a MIG device's type: from NVML's name of it
    /// where the release does so and the name has one, else computed from
    /// its attributes (`None`, logged, when they cannot be read).
    fn mig_suffix(&self, mig: &Device<'_>, log: &mut Log) -> Option<String> {
        let from_name = self.host.behaviour().mig_type_from_nvml_name;
        if from_name {
            let name = mig.name().unwrap_or_else(|e| {
                log.error(format_args!("Failed to get name of the GPU: {}", self.s.text(&e)));
                String::new()
            });
            if let Some(suffix) = model::mig_suffix_from_name(&name) {
                return Some(suffix);
            }
        }
        match mig.attributes() {
            Ok(a) => Some(model::mig_suffix_from_attributes(a.gpu_instance_slice_count, a.compute_instance_slice_count, a.memory_size_mb, from_name)),
            Err(e) => {
                log.error(format_args!("Failed to get MIG attributes: {}", self.s.text(&e)));
                None
            }
        }
    }

    fn cap_minors(&mut self, gpu_minor: u32, gi: u32, ci: u32, log: &mut Log) -> Option<(u32, u32)> {
        let text = self.mig_minors.get_or_insert_with(|| {
            let path = &self.paths.mig_minors;
            // A regular file of at most MAX_FILE_LEN bytes (the real one is
            // a few KiB): what the variable points at is never read blindly.
            read_bounded(path, MAX_FILE_LEN)
                .map_err(|e| e.to_string())
                .and_then(|b| String::from_utf8(b).map_err(|e| e.to_string()))
                .map_err(|e| format!("Could not open file `{}`: {e}", path.display()))
        });
        match text {
            Err(e) => {
                log.error(e.clone());
                None
            }
            Ok(t) => match model::mig_cap_minors(t, gpu_minor, gi, ci) {
                Ok(m) => {
                    log.debug3(format_args!("GPU:{gpu_minor}|GI:{gi},GI_minor={}|CI:{ci},CI_minor={}", m.0, m.1));
                    Some(m)
                }
                Err(e) => {
                    log.error(e);
                    None
                }
            },
        }
    }
}

struct MigFacts {
    profile: String,
    unique_id: String,
    files: String,
}

fn mig_handle<'n>(s: &Session, dev: &Device<'n>, j: u32, log: &mut Log) -> Option<Device<'n>> {
    match s.extra.mig_device_by_index(dev, j) {
        Ok(m) => Some(m),
        Err(NvmlError::NotFound) => None,
        Err(e) => {
            log.error(format_args!("Failed to get MIG device at MIG index {j}: {}", s.text(&e)));
            None
        }
    }
}

/// Whether the GPU is in MIG mode now (a pending change is only noted).
fn mig_enabled(s: &Session, dev: &Device<'_>, log: &mut Log) -> bool {
    match dev.mig_mode() {
        Ok(m) => {
            if m.current != MIG_ENABLE && m.pending == MIG_ENABLE {
                log.info("MIG is disabled, but set to be enabled on next GPU reset");
            } else if m.current == MIG_ENABLE && m.pending != MIG_ENABLE {
                log.info("MIG is enabled, but set to be disabled on next GPU reset");
            }
            m.current == MIG_ENABLE
        }
        Err(NvmlError::NotSupported) => false,
        Err(e) => {
            log.error(format_args!("Failed to get MIG mode of the GPU: {}", s.text(&e)));
            false
        }
    }
}

/// The supported memory clocks and, for each, the graphics clocks, at
/// debug2 (Slurm's `_nvml_print_freqs`).
fn print_freqs(s: &Session, dev: &Device<'_>, log: &mut Log) {
    let Some(mem) = super::clocks::supported_memory_clocks(s, dev, log) else { return };
    log.debug2(format_args!("Possible GPU Memory Frequencies ({}):", mem.len()));
    log.debug2("-------------------------------");
    for i in gpu_freq::listing_indexes(mem.len()) {
        let Some(i) = i else {
            log.debug2("    ...");
            continue;
        };
        log.debug2(format_args!("    *{} MHz [{i}]", mem[i]));
        if let Some(gfx) = super::clocks::supported_graphics_clocks(s, dev, mem[i], log) {
            for line in gpu_freq::freq_listing(&gfx, "GPU Graphics", 8) {
                log.debug2(line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_core::behaviour::{Behaviour, ConfBit14};

    #[test]
    fn mig_record_flags_follow_the_behaviour() {
        assert_eq!(mig_record_flags(&Behaviour::BASELINE), ConfFlags::ENV_NVML);
        let global_index = Behaviour { conf_bit14: ConfBit14::GlobalIndex, ..Behaviour::BASELINE };
        assert_eq!(mig_record_flags(&global_index), ConfFlags::ENV_NVML | ConfFlags::BIT14);
        let mig = Behaviour { mig_conf_flag: true, ..global_index };
        assert_eq!(mig_record_flags(&mig), ConfFlags::ENV_NVML | ConfFlags::BIT14 | ConfFlags::MIG);
        let uuid = Behaviour { conf_bit14: ConfBit14::Uuid, ..mig };
        assert_eq!(mig_record_flags(&uuid), ConfFlags::ENV_NVML | ConfFlags::BIT14 | ConfFlags::MIG);
        let autodetect = Behaviour { autodetect_conf_flag: true, ..uuid };
        assert_eq!(record_flags(&autodetect), ConfFlags::ENV_NVML | ConfFlags::AUTODETECT);
        assert_eq!(record_flags(&uuid), ConfFlags::ENV_NVML);
        assert_eq!(mig_record_flags(&autodetect), ConfFlags::ENV_NVML | ConfFlags::AUTODETECT | ConfFlags::BIT14 | ConfFlags::MIG);
    }
}
