//! `gres-rs detect`: the GPUs NVML reports.

use gres_core::host::NodeConfig;
use gres_core::host::StandaloneHost;
use gres_core::model::LogLevel;
use serde::Serialize;
use slurm_gpu_gres::config::gres_conf::AutoDetect;
use slurm_gpu_gres::nvml::{self, DetectReport};

use crate::render::{JsonHeader, JsonRecord};
use crate::{host, DetectArgs, DetectFormat, EXIT_OK, EXIT_PROBLEMS};

#[derive(Serialize)]
struct JsonDetect {
    #[serde(flatten)]
    header: JsonHeader,
    library: String,
    driver_version: Option<String>,
    nvml_version: Option<String>,
    device_count: u32,
    gpus: Vec<JsonRecord>,
    error: Option<String>,
    /// `--usage`: one entry per PID asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    usage: Vec<JsonUsage>,
}

/// What gpu/nvml's `usage_read` accounts to one process now.
#[derive(Serialize)]
struct JsonUsage {
    pid: u32,
    /// `gres/gpumem`, bytes; `None` when NVML could not be used.
    gpumem_bytes: Option<u64>,
    /// `gres/gpuutil`, percent of one GPU's SMs.
    gpuutil_percent: Option<u64>,
}

/// `--usage`: each PID's accounted usage, through the plugin's own path
/// (`usage::process_usage`: one view of every GPU, shared by the PIDs).
fn usage(args: &DetectArgs, log: &mut nvml::Log) -> Vec<JsonUsage> {
    let paths = paths(args);
    args.usage
        .iter()
        .map(|&pid| {
            let u = nvml::usage::process_usage(pid, 0, &paths, log);
            JsonUsage { pid, gpumem_bytes: u.map(|u| u.mem_bytes), gpuutil_percent: u.map(|u| u.sm_util) }
        })
        .collect()
}

fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Error => "error",
        LogLevel::Info => "info",
        LogLevel::Verbose => "verbose",
        LogLevel::Debug => "debug",
        LogLevel::Debug2 => "debug2",
        LogLevel::Debug3 => "debug3",
    }
}

/// The text printed for a report in `format` (standard output), and
/// whether GPUs were found.
fn render(report: &DetectReport, args: &DetectArgs, usage: Vec<JsonUsage>) -> (String, bool) {
    let found = report.error.is_none() && !report.gpus.is_empty();
    let mut usage_lines = String::new();
    if args.format != DetectFormat::Json {
        for u in &usage {
            match (u.gpumem_bytes, u.gpuutil_percent) {
                (Some(m), Some(p)) => usage_lines.push_str(&format!("# usage of pid {}: gres/gpumem={m} gres/gpuutil={p}\n", u.pid)),
                _ => usage_lines.push_str(&format!("# usage of pid {}: NVML not available\n", u.pid)),
            }
        }
    }
    let text = match args.format {
        DetectFormat::Json => {
            let json = JsonDetect {
                header: JsonHeader::new(),
                library: report.library.clone(),
                driver_version: report.driver_version.clone(),
                nvml_version: report.nvml_version.clone(),
                device_count: report.device_count,
                gpus: report.gpus.iter().map(JsonRecord::new).collect(),
                error: report.error.as_ref().map(ToString::to_string),
                usage,
            };
            let mut s = serde_json::to_string_pretty(&json).unwrap_or_default();
            s.push('\n');
            s
        }
        _ if report.error.is_some() => String::new(),
        DetectFormat::Table => report.table(),
        DetectFormat::SlurmConf => match report.slurm_conf_words() {
            Some(words) => {
                let node = args.node_name.as_deref().map(|n| format!("NodeName={n} ")).unwrap_or_default();
                format!("# For this node's line in slurm.conf (slurmd -C prints the rest):\n{node}{words}\n")
            }
            None => String::new(),
        },
        DetectFormat::GresConf => {
            let mut s = format!(
                "# GPUs NVML reports on this host (driver {}, NVML {}), as gres.conf lines.\n# With AutoDetect=nvml slurmd finds the same; written out, they also work with gpu/generic.\n",
                report.driver_version.as_deref().unwrap_or("?"),
                report.nvml_version.as_deref().unwrap_or("?")
            );
            for l in report.gres_conf_lines(args.node_name.as_deref()) {
                s.push_str(&l);
                s.push('\n');
            }
            s
        }
    };
    (text + &usage_lines, found)
}

/// Where NVML and the device files are: the system's places, or the
/// options' ones.
fn paths(args: &DetectArgs) -> nvml::Paths {
    let mut paths = nvml::Paths::default();
    if let Some(lib) = &args.nvml_lib {
        paths.library = lib.clone().into_os_string();
    }
    if let Some(dir) = &args.dev_dir {
        paths.dev_dir = dir.clone();
    }
    if let Some(file) = &args.mig_minors {
        paths.mig_minors = file.clone();
    }
    paths
}

pub fn run(args: &DetectArgs) -> u8 {
    let cpus = host::local_cpus().map_or(1, |c| c.cpus);
    // As the release the plugins are built for detects (MIG type names,
    // whole GPUs' UniqueId=), as `check` predicts it.
    let host = StandaloneHost::new(*slurm_gpu_gres::ffi::behaviour::build());
    let report = nvml::detect_report(&host, NodeConfig { cpu_cnt: cpus, in_slurmd: true }, &paths(args));
    let mut usage_log = nvml::Log::new(LogLevel::Debug3);
    let usage = usage(args, &mut usage_log);
    if args.verbose {
        for l in report.log.iter().chain(usage_log.lines()) {
            eprintln!("gres-rs: {}: {}", level_name(l.level), l.message);
        }
    } else {
        for m in usage_log.at_most(LogLevel::Error) {
            eprintln!("gres-rs: error: {m}");
        }
    }
    let (text, found) = render(&report, args, usage);
    print!("{text}");
    if let Some(e) = &report.error {
        eprintln!("gres-rs: error: NVML is not available: {e}");
        eprintln!("gres-rs: GPU detection needs the NVIDIA driver and its NVML library ({}); --nvml-lib FILE loads another one", nvml::DEFAULT_LIB);
        return EXIT_PROBLEMS;
    }
    // Each error once, however often detection met it.
    let mut problems: Vec<&str> = Vec::new();
    for p in report.problems() {
        if !problems.contains(&p) {
            problems.push(p);
        }
    }
    if !args.verbose {
        for p in &problems {
            eprintln!("gres-rs: error: {p}");
        }
    }
    // slurmd's choice for AutoDetect=nvml on this host, for the release
    // the plugins are built for (as check predicts it).
    let slurmd_pick = crate::plugin_dir::gpu_plugin(AutoDetect::Nvml, slurm_gpu_gres::ffi::behaviour::build(), &host::library_loadable);
    if found && args.nvml_lib.is_none() && slurmd_pick.is_some_and(|p| !p.is_nvml()) {
        // As check says of AutoDetect=nvml.
        eprintln!(
            "gres-rs: warning: libnvidia-ml.so (unversioned) cannot be loaded here: slurmd picks gpu/generic instead of gpu/nvml (the stock gres/gpu then detects no GPU; ours detects through libnvidia-ml.so.1, but --gpu-freq and acct_gather_energy/gpu need gpu/nvml): install the driver's development link (Debian: apt install libnvidia-ml-dev)"
        );
    }
    eprintln!("gres-rs: detect: {}", summary(&report, problems.len()));
    if !found {
        eprintln!("gres-rs: NVML reports no GPU on this host");
        return EXIT_PROBLEMS;
    }
    EXIT_OK
}

/// The line that adds up: what NVML counted, what is listed, and the
/// errors met.
fn summary(report: &DetectReport, errors: usize) -> String {
    let mig = report.gpus.iter().filter(|g| g.type_name.as_deref().is_some_and(gres_core::nvml_model::is_mig_type)).count();
    let listed = report.gpus.len();
    let mut s = format!("NVML counts {} GPU{}; {listed} listed", report.device_count, if report.device_count == 1 { "" } else { "s" });
    if mig > 0 {
        s.push_str(&format!(" ({mig} of them MIG devices)"));
    }
    if errors > 0 {
        s.push_str(&format!("; {errors} error{} above: what it concerns is left out", if errors == 1 { "" } else { "s" }));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use gres_core::nvml_model::{system_gpu_record, SystemGpu};
    use slurm_gpu_gres::nvml::DetectError;

    fn args(format: DetectFormat) -> DetectArgs {
        DetectArgs { format, node_name: Some("gpu01".into()), verbose: false, nvml_lib: None, dev_dir: None, mig_minors: None, usage: Vec::new() }
    }

    fn report() -> DetectReport {
        let gpu = system_gpu_record(&SystemGpu {
            cpu_cnt: 8,
            cpus: Some("0-3"),
            file: Some("/dev/nvidia0"),
            type_name: Some("nvidia_a100-sxm4-80gb"),
            links: Some("-1"),
            ..Default::default()
        })
        .unwrap();
        DetectReport {
            library: "libnvidia-ml.so.1".into(),
            driver_version: Some("550.54".into()),
            nvml_version: Some("12.550.54".into()),
            device_count: 1,
            gpus: vec![gpu],
            error: None,
            log: vec![],
        }
    }

    #[test]
    fn formats() {
        let (t, found) = render(&report(), &args(DetectFormat::GresConf), Vec::new());
        assert!(found);
        assert!(t.contains("\nNodeName=gpu01 Name=gpu Type=nvidia_a100-sxm4-80gb File=/dev/nvidia0 Cores=0-3 Links=-1\n"), "{t}");
        let (t, _) = render(&report(), &args(DetectFormat::Json), Vec::new());
        let v: serde_json::Value = serde_json::from_str(&t).unwrap();
        assert_eq!(v["gpus"][0]["type"], "nvidia_a100-sxm4-80gb");
        assert_eq!(v["gpus"][0]["file"], "/dev/nvidia0");
        assert!(v["error"].is_null());
        let (t, _) = render(&report(), &args(DetectFormat::Table), Vec::new());
        assert!(t.contains("nvidia_a100-sxm4-80gb"), "{t}");
        let (t, _) = render(&report(), &args(DetectFormat::SlurmConf), Vec::new());
        assert!(t.ends_with("\nNodeName=gpu01 Gres=gpu:nvidia_a100-sxm4-80gb:1 Features=a100\n"), "{t}");
        assert_eq!(summary(&report(), 0), "NVML counts 1 GPU; 1 listed");
        assert_eq!(summary(&report(), 2), "NVML counts 1 GPU; 1 listed; 2 errors above: what it concerns is left out");
    }

    #[test]
    fn slurm_conf_words_count_types_and_mig() {
        let mut r = report();
        let mig = |t: &str| system_gpu_record(&SystemGpu { cpu_cnt: 8, file: Some("/dev/nvidia1"), type_name: Some(t), ..Default::default() }).unwrap();
        r.gpus.push(mig("nvidia_a100_3g.40gb"));
        r.gpus.push(mig("nvidia_a100_3g.40gb"));
        assert_eq!(r.slurm_conf_words().as_deref(), Some("Gres=gpu:nvidia_a100-sxm4-80gb:1,gpu:nvidia_a100_3g.40gb:2 Features=a100,mig"));
        r.gpus.clear();
        assert_eq!(r.slurm_conf_words(), None);
    }

    #[test]
    fn no_nvml() {
        let mut r = report();
        r.gpus.clear();
        r.error = Some(DetectError::Library { path: "libnvidia-ml.so.1".into(), reason: "not found".into() });
        let (t, found) = render(&r, &args(DetectFormat::Table), Vec::new());
        assert!(!found);
        assert!(t.is_empty());
        let (t, _) = render(&r, &args(DetectFormat::Json), Vec::new());
        assert!(t.contains("Cannot load the NVML library"), "{t}");
    }
}
