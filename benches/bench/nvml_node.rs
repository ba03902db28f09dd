//! NVML nodes: the stand-in's fixtures as the stock side's
//! `fake_gpus.conf`, stock's NVML call count, the mig-minors file in
//! place, and the node's cluster configuration a side.

use crate::options::Opts;
use crate::stats::Side;
use gres_core::nvml_model;
use gres_test_harness::standin::{self, FixtureGpu, FixtureMig};
use gres_test_harness::{test_build_dir, ClusterConfig, PluginSet};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// The GPUs of a stand-in fixture file (`standin::parse_fixture`, the
/// Rust reader of the format the stand-in's `fixture.c` reads).
pub fn read_fixture(path: &Path) -> Vec<FixtureGpu> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    standin::parse_fixture(&text)
}

/// NVML calls stock gpu/nvml (src/plugins/gpu/nvml/gpu_nvml.c of 22.05.8,
/// `_get_system_gpu_list_nvml`, built with MIG support and NVML 12's
/// `NVML_NVLINK_MAX_LINKS` = 18) makes to detect `gpus`:
/// init, driver and NVML versions, device count, shutdown; per GPU a
/// handle and PCI info for the bus-id table, then handle, MIG mode, name,
/// UUID, PCI info, minor number, CPU affinity, NVLink state of all 18
/// lanes (one call when NVLink is not supported) plus the remote PCI info
/// of each active lane, the supported memory clocks and the graphics
/// clocks of each (at most 5) memory clock; per MIG GPU the maximum MIG
/// count, one handle per MIG device (plus the failing one when fewer than
/// the maximum exist), and per MIG device handle, UUID, GPU and compute
/// instance ids and attributes; the driver version once more for the first
/// MIG device.
pub fn stock_nvml_calls(gpus: &[FixtureGpu]) -> u64 {
    let mut calls = 5u64;
    let mut mig_driver_asked = false;
    for g in gpus {
        calls += 2;
        calls += 7;
        calls += if g.lanes == 0 { 1 } else { 18 + g.links.len() as u64 };
        if g.mig_mode {
            let migs = g.migs.len() as u64;
            calls += 1 + migs + u64::from(migs < u64::from(g.mig_max)) + 5 * migs;
            if migs > 0 && !mig_driver_asked {
                calls += 1;
                mig_driver_asked = true;
            }
        }
        calls += 1 + if g.mem_clocks == 0 { 0 } else { u64::from(g.mem_clocks.min(5)) };
    }
    calls
}

/// Slurm's type name of a GPU or of one of its MIG devices
/// (`gres_core::nvml_model`, the rule our gpu/nvml applies).
fn type_name(g: &FixtureGpu, mig: Option<&FixtureMig>) -> String {
    let t = nvml_model::gpu_type_from_name(&g.name);
    match mig {
        None => t,
        Some(m) => nvml_model::mig_type(&t, m.slices, m.mem_mb),
    }
}

/// The fixture's node as `fake_gpus.conf` lines (what the stock side
/// reads instead of asking NVML), and the node's `Gres=`: the type names,
/// NVLink strings, MIG capability minors and device files by the rules of
/// `gres_core::nvml_model`, as our gpu/nvml builds them from NVML.
pub fn fake_gpus_of(gpus: &[FixtureGpu], cpus: u32, mig_minors: &Path) -> (String, String) {
    let minors = std::fs::read_to_string(mig_minors).unwrap_or_default();
    let dev = nvml_model::DEV_DIR;
    let mut lines = String::new();
    let mut types: Vec<(String, u32)> = Vec::new();
    let mut count_type = |t: &str| match types.iter_mut().find(|(n, _)| n == t) {
        Some((_, c)) => *c += 1,
        None => types.push((t.to_string(), 1)),
    };
    let n = gpus.len();
    let lut: Vec<Option<String>> = gpus.iter().map(|g| Some(g.bus_id.clone())).collect();
    for (i, g) in gpus.iter().enumerate() {
        let gpu_file = nvml_model::device_file(dev, g.minor);
        if g.mig_mode && !g.migs.is_empty() {
            let m = g.migs.len();
            for (j, mig) in g.migs.iter().enumerate() {
                let (gi_minor, ci_minor) =
                    nvml_model::mig_cap_minors(&minors, g.minor, mig.gi, mig.ci).unwrap_or_else(|e| panic!("{}: {e}", mig_minors.display()));
                let files = nvml_model::mig_files(dev, &gpu_file, gi_minor, ci_minor);
                let t = type_name(g, Some(mig));
                count_type(&t);
                let _ = writeln!(lines, "{t}|{cpus}|{}|{}|{files}|{}|nvidia_gpu_env", g.cpus, nvml_model::empty_links(j, m), mig.uuid);
            }
        } else {
            let links = nvml_model::links_string(i, n, &lut, &g.links);
            let t = type_name(g, None);
            count_type(&t);
            let _ = writeln!(lines, "{t}|{cpus}|{}|{links}|{gpu_file}|(null)|nvidia_gpu_env", g.cpus);
        }
    }
    let gres = types.iter().map(|(t, c)| format!("gpu:{t}:{c}")).collect::<Vec<_>>().join(",");
    (lines, gres)
}

/// Where the stock gpu/nvml plugin reads MIG minors (the only place; ours
/// too, in a release build).
const MIG_MINORS_PATH: &str = nvml_model::MIG_MINORS_PATH;
/// Set once the bench runs in its own mount namespace.
const MOUNT_NS_ENV: &str = "GRES_RS_BENCH_MOUNT_NS";

/// Put the stand-in's `mig-minors` where the stock plugin reads it, so
/// that the MIG node compares like with like: the bench re-runs itself in
/// a mount namespace of its own (`unshare -m`; it and its children only),
/// where a tmpfs over `/proc/driver` holds the file.  `false` (the MIG
/// node's stock side then reads `fake_gpus.conf`) where that cannot be
/// done.
pub fn mig_minors_in_place(opts: &Opts) -> bool {
    if !opts.wants("slurmd-g") {
        return false;
    }
    if std::env::var_os(MOUNT_NS_ENV).is_none() {
        let probe = Command::new("unshare").args(["-m", "--propagation", "private", "true"]).status();
        if !probe.map(|s| s.success()).unwrap_or(false) {
            eprintln!("bench: no mount namespace (unshare -m); the MIG node's stock side reads fake_gpus.conf");
            return false;
        }
        let exe = std::env::current_exe().expect("the bench's own path");
        // Returns only if the exec failed.
        let err = std::os::unix::process::CommandExt::exec(
            Command::new("unshare").args(["-m", "--propagation", "private"]).arg(exe).args(std::env::args_os().skip(1)).env(MOUNT_NS_ENV, "1"),
        );
        eprintln!("bench: unshare -m: {err}; the MIG node's stock side reads fake_gpus.conf");
        return false;
    }
    let mounted = Command::new("mount").args(["-t", "tmpfs", "gres-rs-bench", "/proc/driver"]).status().map(|s| s.success()).unwrap_or(false);
    let placed = mounted
        && Path::new(MIG_MINORS_PATH).parent().is_some_and(|d| std::fs::create_dir_all(d).is_ok())
        && std::fs::copy(standin::fixture("mig-minors"), MIG_MINORS_PATH).is_ok();
    if !placed {
        eprintln!("bench: could not place {MIG_MINORS_PATH} in the bench's mount namespace; the MIG node's stock side reads fake_gpus.conf");
    }
    placed
}

/// The node of a fixture for `slurmd -G`: ours asks the NVML stand-in; so
/// does stock with `stock_nvml` (the stock gpu_nvml.so), else it reads the
/// same GPUs from `fake_gpus.conf`.  Ours is the release build, which
/// reads `mig-minors` where the driver has it, as stock does: when that
/// file could not be put in place (`mig_minors_placed` false), ours on a
/// MIG node is the release build with the feature `test-hooks` (harness
/// `test_build_dir`), told the stand-in's file by `GRES_RS_MIG_MINORS`.
pub fn nvml_node(side: Side, fixture: &Path, sockets: u32, cores: u32, threads: u32, stock_nvml: Option<&Path>, mig_minors_placed: bool) -> ClusterConfig {
    let gpus = read_fixture(fixture);
    let cpus = sockets * cores * threads;
    let minors = standin::fixture("mig-minors");
    let (fake, gres) = fake_gpus_of(&gpus, cpus, &minors);
    let plugins = match side {
        Side::Stock => PluginSet::Stock,
        Side::Ours => PluginSet::Ours,
    };
    let mut c = ClusterConfig::gpus(plugins, 0).with_cpus(sockets, cores, threads).with_gres(&gres, "AutoDetect=nvml\n").with_binds(standin::chroot_binds());
    c.node_name = "gpunode".into();
    c.real_memory_mb = 1000;
    let mut standin_env = standin::daemon_env(fixture);
    // In a chroot: the driver's mig-minors file for both sides (the
    // chroot's commands mount it where stock reads it).
    standin_env.push(("GRES_RS_TEST_MIG_MINORS".into(), minors.to_string_lossy().into_owned()));
    match (side, stock_nvml) {
        (Side::Stock, None) => c.fake_gpus_conf = Some(fake),
        (Side::Stock, Some(so)) => {
            c.extra_stock_plugins = vec![so.to_path_buf()];
            c.slurmd_env = standin_env;
        }
        (Side::Ours, _) => {
            c.slurmd_env = standin_env;
            if !mig_minors_placed && gpus.iter().any(|g| g.mig_mode) {
                c.plugin_build_dir = Some(test_build_dir(true));
                c.slurmd_env.push(("GRES_RS_MIG_MINORS".into(), minors.to_string_lossy().into_owned()));
            }
        }
    }
    c
}
