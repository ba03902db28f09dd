//! NVML detection against the NVML stand-in (tests/nvml-standin): the
//! records `detect()` builds for each fixture node, failures, and the
//! calls made.  Needs `cc`; no GPU, no Slurm.

use gres_test_harness::standin;

use gres_core::behaviour::Behaviour;
use gres_core::model::{gres_build_id, Bitmap, ConfFlags, GresRecord, LogLevel};
use slurm_gpu_gres::nvml::detect::detect_logged;
use slurm_gpu_gres::nvml::{self, DetectError, Log};
use slurm_gpu_gres::plugins::{Host, NodeConfig};
use standin::Standin;

/// slurmd's side for the tests: `mac_to_abs` converts with `map` and fails
/// for CPUs past `cpu_cnt`, as slurmd's converter does for CPUs the
/// machine lacks.
struct TestHost {
    cpu_cnt: u32,
    map: fn(usize) -> usize,
    behaviour: Behaviour,
    /// slurmd's machine CPUs (`Host::enabled_cpus`); `None`: all.
    enabled: Option<Bitmap>,
}

impl Host for TestHost {
    fn behaviour(&self) -> &Behaviour {
        &self.behaviour
    }
    fn mac_to_abs(&self, mac: &str) -> Option<String> {
        let b = Bitmap::from_ranges(self.cpu_cnt as usize, mac).ok()?;
        let mut out = Bitmap::new(self.cpu_cnt as usize);
        for i in b.ones() {
            out.set((self.map)(i));
        }
        Some(out.to_ranges())
    }
    fn test_cpu_conv(&self, _mask: &str) -> Option<String> {
        None
    }
    fn enabled_cpus(&self) -> Option<Bitmap> {
        self.enabled.clone()
    }
}

fn identity(cpu_cnt: u32) -> TestHost {
    TestHost { cpu_cnt, map: |c| c, behaviour: Behaviour::BASELINE, enabled: None }
}

/// Slurm's abstract ids on 2 sockets x 56 cores x 2 threads: machine CPU
/// c < 112 is thread 0 of core c, c >= 112 thread 1 of core c - 112;
/// abstract id = 2 * core + thread.
fn h100_host() -> TestHost {
    TestHost { cpu_cnt: 224, map: |c| if c < 112 { 2 * c } else { 2 * (c - 112) + 1 }, behaviour: Behaviour::BASELINE, enabled: None }
}

fn cfg(cpu_cnt: u32) -> NodeConfig {
    NodeConfig { cpu_cnt, in_slurmd: true }
}

fn run(host: &TestHost) -> (Vec<GresRecord>, Log) {
    run_with(host, &standin::paths())
}

fn run_with(host: &TestHost, paths: &nvml::Paths) -> (Vec<GresRecord>, Log) {
    let mut log = Log::default();
    let d = detect_logged(host, cfg(host.cpu_cnt), paths, &mut log).unwrap_or_else(|e| panic!("detect failed: {e}\n{log:#?}"));
    (d.gpus, log)
}

fn errors(log: &Log) -> Vec<&str> {
    log.lines().iter().filter(|l| l.level == LogLevel::Error).map(|l| l.message.as_str()).collect()
}

fn has_line(log: &Log, level: LogLevel, text: &str) -> bool {
    log.lines().iter().any(|l| l.level == level && l.message == text)
}

const BASE: u32 = ConfFlags::ENV_NVML | ConfFlags::HAS_FILE | ConfFlags::HAS_TYPE;

#[test]
fn h100x8_nvlink_and_two_sockets() {
    let s = Standin::new("h100x8.conf");
    let (gpus, log) = run(&h100_host());
    assert!(errors(&log).is_empty(), "{:#?}", errors(&log));
    assert_eq!(gpus.len(), 8);
    for (i, g) in gpus.iter().enumerate() {
        let mut links = ["2"; 8];
        links[i] = "-1";
        let (abs, mac) = if i < 4 { ("0-111", "0-55,112-167") } else { ("112-223", "56-111,168-223") };
        assert_eq!(g.name, "gpu");
        assert_eq!(g.count, 1);
        assert_eq!(g.plugin_id, gres_build_id("gpu"));
        assert_eq!(g.type_name.as_deref(), Some("nvidia_h100_80gb_hbm3"));
        assert_eq!(g.file.as_deref(), Some(format!("/dev/nvidia{i}").as_str()));
        assert_eq!(g.links.as_deref(), Some(links.join(",").as_str()), "GPU {i}");
        assert_eq!(g.cpus.as_deref(), Some(abs), "GPU {i}");
        // Slurm keeps the machine CPUs in the bitmap, sized to the node.
        let b = g.cpus_bitmap.as_ref().unwrap();
        assert_eq!((b.size(), b.to_ranges().as_str()), (224, mac), "GPU {i}");
        assert_eq!(g.cpu_cnt, 224);
        assert_eq!(g.unique_id, None);
        assert_eq!(g.flags, ConfFlags(BASE));
    }
    assert!(has_line(&log, LogLevel::Debug, "Systems Graphics Driver Version: 535.104.05"));
    assert!(has_line(&log, LogLevel::Debug, "NVML Library Version: 12.535.104.05"));
    assert!(has_line(&log, LogLevel::Debug2, "Device count: 8"));
    assert!(has_line(&log, LogLevel::Debug2, "GPU index 5:"));
    assert!(has_line(&log, LogLevel::Debug2, "    Name: nvidia_h100_80gb_hbm3"));
    assert!(has_line(&log, LogLevel::Debug2, "    PCI Bus ID: 00000000:9A:00.0"));
    assert!(has_line(&log, LogLevel::Debug2, "    PCI Domain/Bus/Device: 0:154:0"));
    assert!(has_line(&log, LogLevel::Debug2, "    CPU Affinity Range - Machine: 56-111,168-223"));
    assert!(has_line(&log, LogLevel::Debug2, "    Core Affinity Range - Abstract: 112-223"));
    assert!(has_line(&log, LogLevel::Debug2, "    MIG mode: disabled"));
    assert!(has_line(&log, LogLevel::Info, "8 GPU system device(s) detected"));

    // One init, the lookup table and the main loop each take every handle,
    // every lane of every GPU is asked, nothing is changed.
    assert_eq!(s.count("nvmlInit_v2"), 1);
    assert_eq!(s.count("nvmlDeviceGetHandleByIndex_v2"), 16);
    assert_eq!(s.count("nvmlDeviceGetNvLinkState"), 8 * 18);
    assert_eq!(s.count("nvmlDeviceGetNvLinkRemotePciInfo_v2"), 8 * 18);
    assert_eq!(s.count("nvmlDeviceGetMaxMigDeviceCount"), 0);
    assert_eq!(s.count("nvmlDeviceSetApplicationsClocks"), 0);
    assert_eq!(s.count("nvmlShutdown"), 0);
}

#[test]
fn a100_seven_mig_devices() {
    let _s = Standin::new("a100_mig.conf");
    let (gpus, log) = run(&identity(64));
    assert!(errors(&log).is_empty(), "{:#?}", errors(&log));
    assert_eq!(gpus.len(), 7);
    let text = std::fs::read_to_string(standin::fixture("a100_mig.conf")).unwrap();
    let mig_uuids: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("uuid MIG-")).collect();
    for (j, g) in gpus.iter().enumerate() {
        // mig-minors: gpu0/gi<N>/access is 3 + 9 N, its ci0 the next one.
        let gi = 7 + j as u32;
        let (gi_minor, ci_minor) = (3 + 9 * gi, 4 + 9 * gi);
        assert_eq!(g.type_name.as_deref(), Some("nvidia_a100_1g.10gb"));
        assert_eq!(g.file.as_deref(), Some(format!("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap{gi_minor},/dev/nvidia-caps/nvidia-cap{ci_minor}").as_str()));
        let mut links = ["0"; 7];
        links[j] = "-1";
        assert_eq!(g.links.as_deref(), Some(links.join(",").as_str()));
        assert_eq!(g.unique_id.as_deref(), Some(format!("MIG-{}", mig_uuids[j]).as_str()));
        assert_eq!(g.cpus.as_deref(), Some("0-31"));
        assert_eq!(g.flags, ConfFlags(BASE | ConfFlags::HAS_MULT));
    }
    assert!(has_line(&log, LogLevel::Debug2, "    MIG mode: enabled"));
    assert!(has_line(&log, LogLevel::Debug2, "    MIG count: 7"));
    assert!(has_line(&log, LogLevel::Debug2, "    MIG Profile: nvidia_a100_1g.10gb"));
    assert!(has_line(&log, LogLevel::Debug2, "    GI Minor Number: 75"));
    assert!(has_line(&log, LogLevel::Info, "1 GPU system device(s) detected"));
}

/// How Slurm `release` behaves (the product's table).
fn release(major: u32, minor: u32, micro: u32) -> Behaviour {
    slurm_gpu_gres::ffi::behaviour::for_release(major, minor, micro).expect("a supported release")
}

/// MIG device types as each release's gpu/nvml gives them: 22.05 computes
/// every profile (GPU-instance slices, memory to the nearest GiB); 23.02 on
/// takes NVML's own profile name (compute-instance profiles, `+me`) and
/// computes only where NVML gives none (compute slices first, memory
/// rounded up).
#[test]
fn mig_types_by_release() {
    let s = Standin::new("mig_profiles.conf");
    let (gpus, log) = run(&identity(2));
    assert!(errors(&log).is_empty(), "{:#?}", errors(&log));
    let types: Vec<&str> = gpus.iter().filter_map(|g| g.type_name.as_deref()).collect();
    assert_eq!(
        types,
        [
            "nvidia_a100_3g.20gb",
            "nvidia_a100_3g.20gb",
            "nvidia_a100_2g.10gb",
            "nvidia_a100_1g.5gb",
            "nvidia_h100_80gb_hbm3_7g.79gb",
            "nvidia_h100_80gb_hbm3_3g.40gb"
        ]
    );
    // 22.05 never asks NVML for a MIG device's name.
    assert_eq!(s.calls().iter().filter(|c| c.starts_with("nvmlDeviceGetName gpu") && c.contains("/mig")).count(), 0);
    assert_eq!(s.count("nvmlDeviceGetAttributes_v2"), 6);
    drop(s);

    for later in [release(23, 2, 8), release(24, 11, 5), release(26, 5, 5)] {
        let s = Standin::new("mig_profiles.conf");
        let (gpus, log) = run(&TestHost { behaviour: later, ..identity(2) });
        // The nameless device's name fails as NVML fails it, logged.
        assert_eq!(errors(&log), ["Failed to get name of the GPU: Insufficient Size"], "{:#?}", log);
        let types: Vec<&str> = gpus.iter().filter_map(|g| g.type_name.as_deref()).collect();
        assert_eq!(
            types,
            [
                "nvidia_a100_1c.3g.20gb",
                "nvidia_a100_2c.3g.20gb",
                "nvidia_a100_2g.10gb",
                "nvidia_a100_1g.5gb+me",
                "nvidia_h100_80gb_hbm3_7g.80gb",
                "nvidia_h100_80gb_hbm3_2c.3g.40gb"
            ]
        );
        // Attributes only for the device NVML gives no name.
        assert_eq!(s.count("nvmlDeviceGetAttributes_v2"), 1);
    }
}

/// A GPU in MIG mode whose MIG devices cannot be read: nothing of it
/// before 24.11 (stock stops slurmd when there are none; ours logs the
/// same error and goes on: docs/deviations.md NVML 1), the whole GPU from
/// 24.11, flagged as each release flags it.
#[test]
fn mig_gpu_without_readable_devices() {
    let text = "driver 550.127.05\ngpu\nname NVIDIA A100-SXM4-40GB\nuuid GPU-x\nminor 0\ncpus 0-1\nmig_mode 1 1\nmig_max 7\n";
    let no_devices = "MIG mode is enabled, but no MIG devices were found. Please either create MIG instances, disable MIG mode, remove AutoDetect=nvml, or remove GPUs from the configuration completely.";
    for (b, want) in [
        (release(24, 5, 8), None),
        (release(24, 11, 5), Some((ConfFlags::AUTODETECT, None))),
        (release(25, 11, 7), Some((ConfFlags::AUTODETECT | ConfFlags::MIG, Some("GPU-x")))),
    ] {
        let _s = Standin::from_text(text);
        let (gpus, log) = run(&TestHost { behaviour: b, ..identity(2) });
        assert!(errors(&log).contains(&no_devices), "{log:#?}");
        match want {
            None => assert!(gpus.is_empty(), "{gpus:#?}"),
            Some((flags, uuid)) => {
                assert_eq!(gpus.len(), 1, "{gpus:#?}");
                let g = &gpus[0];
                assert_eq!(g.type_name.as_deref(), Some("nvidia_a100-sxm4-40gb"));
                assert_eq!(g.file.as_deref(), Some("/dev/nvidia0"));
                assert_eq!(g.unique_id.as_deref(), uuid);
                assert_eq!(g.flags, ConfFlags(BASE | flags));
            }
        }
    }
}

#[test]
fn mig_ids_before_driver_470_42_01() {
    let text = std::fs::read_to_string(standin::fixture("a100_mig.conf")).unwrap().replace("driver 535.104.05", "driver 460.32.03");
    let _s = Standin::from_text(&text);
    let (gpus, _) = run(&identity(64));
    assert_eq!(gpus.len(), 7);
    assert_eq!(gpus[0].unique_id.as_deref(), Some("MIG-GPU-5a7e8c2d-33b1-4f0e-9a41-1c2d3e4f5a6b/7/0"));
    assert_eq!(gpus[6].unique_id.as_deref(), Some("MIG-GPU-5a7e8c2d-33b1-4f0e-9a41-1c2d3e4f5a6b/13/0"));
}

#[test]
fn mig_without_minors_file() {
    let s = Standin::new("a100_mig.conf");
    let paths = nvml::Paths { mig_minors: "/nonexistent/mig-minors".into(), ..s.paths() };
    let (gpus, log) = run_with(&identity(64), &paths);
    assert!(gpus.is_empty(), "{gpus:#?}");
    let e = errors(&log);
    assert_eq!(e.len(), 7, "{e:#?}");
    assert!(e[0].starts_with("Could not open file `/nonexistent/mig-minors`"), "{e:#?}");
}

/// A mig-minors file (or what /proc/driver/nvidia-caps/mig-minors links
/// to) that is not a regular file: an error naming it, at once,
/// instead of reading /dev/zero until memory runs out or blocking on a FIFO.
#[test]
fn mig_minors_that_is_not_a_regular_file() {
    let dir = std::env::temp_dir().join(format!("gres-rs-mig-minors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("mig-minors");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for (path, what) in [(std::path::Path::new("/dev/zero"), "a character device"), (fifo.as_path(), "a FIFO"), (dir.as_path(), "a directory")] {
        let s = Standin::new("a100_mig.conf");
        let paths = nvml::Paths { mig_minors: path.into(), ..s.paths() };
        let (gpus, log) = run_with(&identity(64), &paths);
        assert!(gpus.is_empty(), "{gpus:#?}");
        let e = errors(&log);
        assert_eq!(e.len(), 7, "{e:#?}");
        assert_eq!(e[0], format!("Could not open file `{}`: {what}, not a regular file", path.display()));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mixed_models_and_mig() {
    let _s = Standin::new("mixed.conf");
    let (gpus, log) = run(&identity(16));
    assert!(errors(&log).is_empty(), "{:#?}", errors(&log));
    // (type, file, links, cores) of each record.
    type Row<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>, Option<&'a str>);
    let got: Vec<Row> = gpus.iter().map(|g| (g.type_name.as_deref(), g.file.as_deref(), g.links.as_deref(), g.cpus.as_deref())).collect();
    assert_eq!(
        got,
        vec![
            (Some("nvidia_a100-pcie-40gb"), Some("/dev/nvidia0"), Some("-1,4,0,0"), Some("0-7")),
            (Some("nvidia_a100_3g.20gb"), Some("/dev/nvidia1,/dev/nvidia-caps/nvidia-cap147,/dev/nvidia-caps/nvidia-cap148"), Some("-1,0"), Some("0-7")),
            (Some("nvidia_a100_2g.10gb"), Some("/dev/nvidia1,/dev/nvidia-caps/nvidia-cap183,/dev/nvidia-caps/nvidia-cap184"), Some("0,-1"), Some("0-7")),
            (Some("tesla_v100-pcie-32gb"), Some("/dev/nvidia3"), Some("0,0,-1,0"), Some("8-15")),
            (Some("nvidia_geforce_rtx_3090"), Some("/dev/nvidia2"), Some("0,0,0,-1"), Some("8-15")),
        ]
    );
    assert!(gpus[1].unique_id.as_deref().unwrap().starts_with("MIG-"));
    assert_eq!(gpus[0].unique_id, None);
    assert!(has_line(&log, LogLevel::Info, "MIG is disabled, but set to be enabled on next GPU reset"));
    assert!(has_line(&log, LogLevel::Debug, "Note: GPU index 2 is different from minor number 3"));
    assert!(has_line(&log, LogLevel::Debug, "Note: GPU index 3 is different from minor number 2"));
    assert!(has_line(&log, LogLevel::Info, "4 GPU system device(s) detected"));
}

#[test]
fn failing_gpus_are_logged_and_skipped() {
    let _s = Standin::new("failing.conf");
    let (gpus, log) = run(&identity(8));
    let e = errors(&log);
    let files: Vec<Option<&str>> = gpus.iter().map(|g| g.file.as_deref()).collect();
    assert_eq!(files, vec![Some("/dev/nvidia0"), None, Some("/dev/nvidia3"), Some("/dev/nvidia4")], "{gpus:#?}\n{e:#?}");

    // Index 0: healthy; MIG "not supported" is silent.
    assert_eq!(gpus[0].links.as_deref(), Some("-1,0,0,0,0,0,0"));
    assert_eq!(gpus[0].cpus.as_deref(), Some("0-3"));
    // Index 1: no handle: Slurm's null record.
    assert_eq!(gpus[1].flags, ConfFlags(ConfFlags::ENV_NVML));
    assert_eq!((gpus[1].type_name.as_deref(), gpus[1].cpus.as_deref(), gpus[1].count), (None, None, 1));
    assert!(e.contains(&"Failed to get device handle for GPU 1: GPU is lost"), "{e:#?}");
    assert!(e.contains(&"Creating null GRES GPU record"));
    // Index 2: no minor number: left out.
    assert!(e.contains(&"Failed to get minor number of GPU: Unknown Error"), "{e:#?}");
    // Index 3: no name, UUID or affinity: empty type, no Cores.
    assert_eq!(gpus[2].type_name.as_deref(), Some(""));
    assert_eq!((gpus[2].cpus.as_deref(), gpus[2].cpus_bitmap.as_ref()), (None, None));
    assert!(e.iter().any(|l| l.starts_with("Failed to get name of the GPU:")));
    assert!(e.iter().any(|l| l.starts_with("Failed to get UUID of GPU:")));
    assert!(e.iter().any(|l| l.starts_with("Failed to get cpu affinity of GPU:")));
    // Index 4: MIG mode and NVLink errors: a plain GPU without links.
    assert_eq!(gpus[3].type_name.as_deref(), Some("nvidia_h100_pcie"));
    assert_eq!(gpus[3].links.as_deref(), Some("0,0,0,0,-1,0,0"));
    assert!(e.iter().any(|l| l.starts_with("Failed to get MIG mode of the GPU:")));
    assert_eq!(e.iter().filter(|l| l.starts_with("Failed to get nvlink info from GPU:")).count(), 18);
    // Index 5: MIG mode without MIG devices: Slurm's fatal message, left out.
    assert!(
        e.contains(&"MIG device count is 0; MIG is either disabled or not supported")
            || e.iter().any(|l| l.starts_with("MIG mode is enabled, but no MIG devices"))
    );
    // Index 6: affinity the host cannot convert: left out.
    assert!(e.contains(&"    Conversion from machine to abstract failed"));
    assert!(has_line(&log, LogLevel::Info, "7 GPU system device(s) detected"));
}

#[test]
fn no_driver_means_no_gpus() {
    // No fixture: nvmlInit fails as without a loaded driver.
    let s = Standin::with_fixture(None);
    let host = identity(8);
    match nvml::detect(&host, cfg(8), &s.paths()) {
        // The wording is the library's nvmlErrorString() (the stand-in's).
        Err(DetectError::Init(m)) => assert_eq!(m, "Driver Not Loaded"),
        other => panic!("{other:?}"),
    }
    // Like the stock plugin: an empty list, so slurmd keeps configured GPUs.
    assert_eq!(nvml::system_gpu_list(&host, cfg(8), &s.paths()), Some(vec![]));
}

#[test]
fn init_error_and_count_error() {
    let s = Standin::from_text("init_error 4\ngpu\nname X\n");
    assert_eq!(nvml::detect(&identity(8), cfg(8), &s.paths()), Err(DetectError::Init("Insufficient Permissions".into())));
    drop(s);
    let s = Standin::from_text("count_error 999\ngpu\nname X\n");
    assert!(matches!(nvml::detect(&identity(8), cfg(8), &s.paths()), Err(DetectError::DeviceCount(_))));
}

#[test]
fn missing_library() {
    let s = Standin::new("h100x8.conf");
    let paths = nvml::Paths { library: "/nonexistent/libnvidia-ml.so.1".into(), ..s.paths() };
    let host = identity(8);
    assert!(matches!(nvml::detect(&host, cfg(8), &paths), Err(DetectError::Library { .. })));
    // Like slurmd's gpu/generic: no list at all.
    assert_eq!(nvml::system_gpu_list(&host, cfg(8), &paths), None);
    let r = nvml::detect_report(&host, cfg(8), &paths);
    assert!(r.error.is_some() && r.gpus.is_empty());
    assert!(r.table().contains("error: Cannot load the NVML library /nonexistent/libnvidia-ml.so.1"), "{}", r.table());
}

#[test]
fn session_is_shared_and_released() {
    let s = Standin::new("h100x8.conf");
    let host = h100_host();
    let paths = s.paths();
    let a = nvml::detect(&host, cfg(224), &paths).unwrap();
    let b = nvml::detect(&host, cfg(224), &paths).unwrap();
    assert_eq!(a, b);
    assert_eq!(s.count("nvmlInit_v2"), 1);
    // From several threads at once: still one initialization.
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| assert_eq!(nvml::device_count(&paths), Some(8)));
        }
    });
    assert_eq!(s.count("nvmlInit_v2"), 1);
    // system_gpu_list shuts NVML down afterwards, as the stock plugin does.
    assert_eq!(nvml::system_gpu_list(&host, cfg(224), &paths).unwrap().len(), 8);
    assert_eq!(s.count("nvmlShutdown"), 1);
    assert_eq!(nvml::device_count(&paths), Some(8));
    assert_eq!(s.count("nvmlInit_v2"), 2);
}

#[test]
fn report_renders_gres_conf() {
    let s = Standin::new("mixed.conf");
    let r = nvml::detect_report(&identity(16), cfg(16), &s.paths());
    assert!(r.error.is_none());
    assert_eq!(r.device_count, 4);
    assert_eq!(r.driver_version.as_deref(), Some("535.104.05"));
    let lines = r.gres_conf_lines(Some("node1"));
    assert_eq!(lines[0], "NodeName=node1 Name=gpu Type=nvidia_a100-pcie-40gb File=/dev/nvidia0 Cores=0-7 Links=-1,4,0,0");
    assert!(lines[1].starts_with("# UniqueId=MIG-"));
    assert_eq!(
        lines[2],
        "NodeName=node1 Name=gpu Type=nvidia_a100_3g.20gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap147,/dev/nvidia-caps/nvidia-cap148 Cores=0-7 Links=-1,0"
    );
    let t = r.table();
    assert!(t.contains("nvidia_geforce_rtx_3090"), "{t}");
    assert_eq!(t.lines().count(), 2 + 5, "{t}");
}

/// A hybrid Intel CPU (hybrid.conf: NVML gives both GPUs CPUs 0-23; slurmd
/// uses only the 16 P-core CPUs 0-15).  From 23.02 each GPU keeps only the
/// CPUs slurmd uses; 22.05 converts the whole affinity, which slurmd's
/// converter refuses, and the GPUs are left out.
#[test]
fn hybrid_cpu_affinity_without_ecores() {
    let _s = Standin::new("hybrid.conf");
    let p_cores = Bitmap::from_ranges(16, "0-15").unwrap();
    let later = Behaviour { gpu_affinity_enabled_cpus: true, ..Behaviour::BASELINE };
    let (gpus, log) = run(&TestHost { behaviour: later, enabled: Some(p_cores.clone()), ..identity(16) });
    assert!(errors(&log).is_empty(), "{:#?}", errors(&log));
    assert_eq!(gpus.len(), 2);
    for g in &gpus {
        assert_eq!(g.cpus.as_deref(), Some("0-15"), "{g:?}");
        assert_eq!(g.cpus_bitmap.as_ref().map(|b| b.ones().collect::<Vec<_>>()), Some((0..16).collect()), "{g:?}");
    }
    assert!(has_line(&log, LogLevel::Debug2, "    CPU Affinity Range - Machine: 0-15"), "{log:#?}");

    // SlurmdParameters=allow_ecores: slurmd keeps the E-cores (the host
    // says every CPU counts) and so do the GPUs.
    let (gpus, log) = run(&TestHost { behaviour: later, enabled: None, ..identity(24) });
    assert!(errors(&log).is_empty(), "{:#?}", errors(&log));
    assert!(gpus.iter().all(|g| g.cpus.as_deref() == Some("0-23")), "{gpus:?}");

    // 22.05: the whole affinity goes to slurmd's converter, which refuses
    // CPUs it does not use.
    let (gpus, log) = run(&TestHost { enabled: Some(p_cores), ..identity(16) });
    assert!(gpus.is_empty(), "{gpus:?}");
    assert_eq!(errors(&log).iter().filter(|l| l.contains("Conversion from machine to abstract failed")).count(), 2, "{log:#?}");
}
