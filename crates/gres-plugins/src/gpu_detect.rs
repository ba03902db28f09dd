//! Where gres/gpu gets the node's detected GPUs: `fake_gpus.conf` when it
//! exists, else (in slurmd) slurmd's gpu plugin as the stock plugin does
//! (gpu/nvml, gpu/rsmi, gpu/oneapi or gpu/generic), with our own NVML
//! detection when `AutoDetect=nvml` and slurmd fell back to gpu/generic
//! (Debian's slurmd does when only `libnvidia-ml.so.1` is installed).
//! Then the merge with the configured records.

use super::{log_line, log_lines, Host, NodeConfig};
use gres_core::fake_gpus::{self, CpuConv};
use gres_core::merge;
use gres_core::model::{GresRecord, Log, LogLevel, LogLine};
use std::io::Write;
use std::path::Path;

/// `GRES_AUTODETECT_GPU_NVML`.
const AUTODETECT_NVML: u32 = 0x1;

/// The detected GPUs, or `None` when there is nothing to merge with.
fn system_gpus(host: &dyn Host, cfg: NodeConfig) -> Result<Option<Vec<GresRecord>>, String> {
    let nvml = host.autodetect_flags() & AUTODETECT_NVML != 0;
    if host.behaviour().core_reads_fake_gpus {
        // slurmd's core reads fake_gpus.conf and hands its GPUs over as
        // the system's (outside slurmd only those): reading it here would
        // apply it twice.
        let from_core = host.gpu_plugin_system_gpus();
        if from_core.is_none() && nvml && cfg.in_slurmd {
            tracing::debug!("slurmd's gpu plugin found no GPUs; asking NVML directly for AutoDetect=nvml");
            return Ok(crate::nvml::system_gpu_list(host, cfg, &super::nvml_paths()));
        }
        return Ok(from_core);
    }
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
                // gpu/nvml's test conversion prints the masks on stdout,
                // where Slurm's test tools read them.
                let mut stdout = std::io::stdout().lock();
                for line in &fake.stdout {
                    let _ = writeln!(stdout, "{line}");
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
    let copied = host.behaviour().merge_copied_flags;
    let outcome = merge::merge_system_gres_conf_copying(std::mem::take(records), system, max, copied).map_err(|e| e.to_string())?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use gres_core::behaviour::Behaviour;
    use gres_core::model::ConfFlags;

    /// slurmd with a fake_gpus.conf and a gpu plugin (or core) that
    /// reports one GPU of its own.
    struct FakeHost {
        behaviour: Behaviour,
        fake_path: String,
    }

    impl Host for FakeHost {
        fn behaviour(&self) -> &Behaviour {
            &self.behaviour
        }
        fn gpu_plugin_system_gpus(&self) -> Option<Vec<GresRecord>> {
            let rec = GresRecord {
                name: "gpu".into(),
                type_name: Some("from_core".into()),
                count: 1,
                cpu_cnt: 4,
                file: Some("/dev/nvidia7".into()),
                ..Default::default()
            };
            Some(vec![rec])
        }
        fn extra_conf_path(&self, _name: &str) -> Option<String> {
            Some(self.fake_path.clone())
        }
        fn test_cpu_conv(&self, _mask: &str) -> Option<String> {
            None
        }
    }

    /// Where slurmd's core reads fake_gpus.conf, gres/gpu takes the core's
    /// list and does not read the file again; before, it reads the file.
    #[test]
    fn fake_gpus_conf_is_read_once() {
        let dir = std::env::temp_dir().join(format!("gres-plugins-fake-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fake_gpus.conf");
        std::fs::write(&path, "from_file|4|(null)|(null)|/dev/nvidia0\n").unwrap();
        let files = |behaviour: Behaviour| {
            let host = FakeHost { behaviour, fake_path: path.to_str().unwrap().to_string() };
            // slurm.conf's Gres=gpu:1, as slurmd passes it.
            let mut records =
                vec![GresRecord { name: "gpu".into(), count: 1, cpu_cnt: 4, plugin_id: gres_core::model::gres_build_id("gpu"), ..Default::default() }];
            merge_detected_gpus(&host, NodeConfig { cpu_cnt: 4, in_slurmd: false }, &mut records, "gres/gpu").unwrap();
            records.iter().map(|r| r.file.clone().unwrap_or_default()).collect::<Vec<_>>()
        };
        assert_eq!(files(Behaviour::BASELINE), ["/dev/nvidia0"]);
        assert_eq!(files(Behaviour { core_reads_fake_gpus: true, ..Behaviour::BASELINE }), ["/dev/nvidia7"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The configured record's flags the release's merge copies.
    #[test]
    fn merge_copies_the_release_flags() {
        let dir = std::env::temp_dir().join(format!("gres-plugins-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fake_gpus.conf");
        std::fs::write(&path, "a100|4|(null)|(null)|/dev/nvidia0\n").unwrap();
        let flags = |behaviour: Behaviour| {
            let host = FakeHost { behaviour, fake_path: path.to_str().unwrap().to_string() };
            let conf = GresRecord {
                name: "gpu".into(),
                count: 1,
                cpu_cnt: 4,
                file: Some("/dev/nvidia0".into()),
                flags: ConfFlags(ConfFlags::HAS_FILE | ConfFlags::ENV_SET | ConfFlags::ENV_DEF | ConfFlags::EXPLICIT | ConfFlags::BIT14),
                plugin_id: gres_core::model::gres_build_id("gpu"),
                ..Default::default()
            };
            let mut records = vec![conf];
            merge_detected_gpus(&host, NodeConfig { cpu_cnt: 4, in_slurmd: false }, &mut records, "gres/gpu").unwrap();
            records[0].flags.0 & (ConfFlags::EXPLICIT | ConfFlags::BIT14)
        };
        assert_eq!(flags(Behaviour::BASELINE), 0);
        assert_eq!(flags(Behaviour { merge_copied_flags: ConfFlags(ConfFlags::EXPLICIT), ..Behaviour::BASELINE }), ConfFlags::EXPLICIT);
        let both = ConfFlags(ConfFlags::EXPLICIT | ConfFlags::BIT14);
        assert_eq!(flags(Behaviour { merge_copied_flags: both, ..Behaviour::BASELINE }), both.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
