//! Where gres/gpu gets the node's detected GPUs: `fake_gpus.conf` when it
//! exists, else (in slurmd) slurmd's gpu plugin as the stock plugin does
//! (gpu/nvml, gpu/rsmi, gpu/oneapi or gpu/generic), with our own NVML
//! detection when `AutoDetect=nvml` and slurmd fell back to gpu/generic
//! (Debian's slurmd does when only `libnvidia-ml.so.1` is installed).
//! Then the merge with the configured records.

use super::{log_line, log_lines, Host, NodeConfig};
use crate::core::fake_gpus::{self, CpuConv};
use crate::core::merge;
use crate::core::model::{GresRecord, Log, LogLevel, LogLine};
use std::path::Path;

/// `GRES_AUTODETECT_GPU_NVML`.
const AUTODETECT_NVML: u32 = 0x1;

/// The detected GPUs, or `None` when there is nothing to merge with.
fn system_gpus(host: &dyn Host, cfg: NodeConfig) -> Result<Option<Vec<GresRecord>>, String> {
    let nvml = host.autodetect_flags() & AUTODETECT_NVML != 0;
    if let Some(path) = host.extra_conf_path("fake_gpus.conf") {
        let conv = if nvml { CpuConv::Nvml } else { CpuConv::Unsupported };
        match fake_gpus::load_fake_gpus(Path::new(&path), conv) {
            Ok(None) => {}
            Ok(Some(fake)) => {
                for d in &fake.diagnostics {
                    let message = match &d.location {
                        Some(l) => format!("{l}: {}", d.message),
                        None => d.message.clone(),
                    };
                    log_line(&LogLine { level: d.level, message });
                }
                return Ok(Some(fake.records));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    // Only slurmd looks at the real hardware.
    if !cfg.in_slurmd {
        return Ok(None);
    }
    let from_gpu_plugin = host.gpu_plugin_system_gpus();
    if from_gpu_plugin.is_none() && nvml {
        tracing::debug!("slurmd's gpu plugin found no GPUs; asking NVML directly for AutoDetect=nvml");
        return Ok(crate::nvml::system_gpu_list(host, cfg, &super::nvml_paths()));
    }
    Ok(from_gpu_plugin)
}

/// Replace `records`' GPU records by the merge of configured and detected
/// GPUs, when GPUs were detected.
pub fn merge_detected_gpus(host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>, plugin_name: &str) -> Result<(), String> {
    let Some(system) = system_gpus(host, cfg)? else { return Ok(()) };
    // Stock logs these at verbose with DebugFlags=Gres, else at debug.
    let level = if host.debug_gres() { LogLevel::Verbose } else { LogLevel::Debug };
    let max = crate::log::max_level();
    let mut log = Log::new(max);
    if system.is_empty() {
        log.push(level, "There were 0 GPUs detected on the system");
    }
    log.push_with(level, || format!("{plugin_name}: Merging configured GRES with system GPUs"));
    log_lines(log.lines());
    let outcome = merge::merge_system_gres_conf(std::mem::take(records), system, max).map_err(|e| e.to_string())?;
    log_lines(&outcome.log);
    *records = outcome.records;
    let mut log = Log::new(max);
    if records.is_empty() {
        log.push_with(level, || format!("{plugin_name}: Final merged GRES list is empty"));
    } else {
        log.push_with(level, || format!("{plugin_name}: Final merged GRES list:"));
        log.push_each(level, records, fake_gpus::to_log_line);
    }
    log_lines(log.lines());
    Ok(())
}
