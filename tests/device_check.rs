//! `tests/device/check.sh`, the real-GPU check, run here without a GPU:
//! gres-rs on the NVML stand-in, and in place of the driver's tools an
//! `nvidia-smi` that answers as the driver would for the stand-in's
//! fixture, a sysfs tree with the GPUs' `local_cpulist`, and a `gpu-hold`
//! whose PID the fixture lists as holding 1024 MiB.  What this proves is
//! the script's reading and comparing: that it passes when the two sides
//! agree and names the row when they do not.  On a machine with a GPU it
//! runs against the real driver (docs/compat.md, "Real GPU").

use gres_test_harness::standin;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GRES_RS: &str = env!("CARGO_BIN_EXE_gres-rs");

fn script(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A scratch directory with the fakes; `name` is the GPUs' name as the
/// fake nvidia-smi gives it, `mig` whether the GPU is in MIG mode.
struct Bed {
    dir: PathBuf,
    fixture: PathBuf,
}

impl Bed {
    fn new(tag: &str, name: &str, mig: bool) -> Bed {
        let dir = standin::scratch_dir().join(format!("device-check-{tag}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let pidfile = dir.join("hold.pid");
        let (fixture_text, smi) = if mig { mig_node(name) } else { h100_node(name) };
        let fixture = dir.join("fixture.conf");
        fs::write(&fixture, fixture_text.replace("PIDFILE", &pidfile.to_string_lossy())).unwrap();
        script(&dir.join("nvidia-smi"), &smi.replace("PIDFILE", &pidfile.to_string_lossy()));
        // gpu-hold: the fixture lists the PID it writes (exec: same PID).
        script(&dir.join("gpu-hold"), &format!("#!/bin/sh\necho $$ > {}\necho \"ready $$\"\nexec sleep 60\n", pidfile.display()));
        // The node's GPUs on the PCI bus and their device files (what
        // `gres-rs health` counts beside NVML).
        let gpus: &[(&str, &str)] = if mig { &[("0000:07:00.0", "0")] } else { &[("0000:18:00.0", "0"), ("0000:2a:00.0", "1")] };
        for (minor, (bus, cpus)) in gpus.iter().enumerate() {
            let d = dir.join("sys/bus/pci/devices").join(bus);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("local_cpulist"), format!("{cpus}\n")).unwrap();
            fs::write(d.join("vendor"), "0x10de\n").unwrap();
            fs::write(d.join("class"), "0x030200\n").unwrap();
            fs::create_dir_all(dir.join("dev")).unwrap();
            fs::write(dir.join(format!("dev/nvidia{minor}")), "").unwrap();
        }
        Bed { dir, fixture }
    }

    fn run(&self) -> (Output, String) {
        let out = Command::new("bash")
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/device/check.sh"))
            .env("GRES_RS", GRES_RS)
            .env("GPU_HOLD", self.dir.join("gpu-hold"))
            .env("NVIDIA_SMI", self.dir.join("nvidia-smi"))
            .env("SYSFS", self.dir.join("sys"))
            .env("DEV", self.dir.join("dev"))
            .env("GRES_RS_NVML_LIB", standin::library())
            .env("MIG_MINORS", standin::fixture("mig-minors"))
            .env("GRES_RS_NVML_FIXTURE", &self.fixture)
            .output()
            .unwrap();
        let show = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out, show)
    }
}

/// Two H100 with 2 NVLink lanes between them (h100x2.conf), the holder
/// on GPU 0; nvidia-smi's answers for them.
fn h100_node(name: &str) -> (String, String) {
    let mut fixture = String::new();
    for line in fs::read_to_string(standin::fixture("h100x2.conf")).unwrap().lines() {
        fixture.push_str(line);
        fixture.push('\n');
        if line.starts_with("uuid GPU-0") {
            fixture.push_str("proc compute pidfile:PIDFILE 1024\n");
        }
    }
    let smi = format!(
        r#"#!/bin/sh
case "$*" in
"--query-gpu=index,name,pci.bus_id,mig.mode.current --format=csv,noheader")
    printf '0, {name}, 00000000:18:00.0, [N/A]\n1, {name}, 00000000:2A:00.0, [N/A]\n' ;;
"-q -x") printf '<nvidia_smi_log>\n<gpu>\n<minor_number>0</minor_number>\n</gpu>\n<gpu>\n<minor_number>1</minor_number>\n</gpu>\n</nvidia_smi_log>\n' ;;
"topo -m") printf '\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV2\t0\t0\nGPU1\tNV2\t X \t1\t0\n\nLegend:\n  X    = Self\n' ;;
"--query-compute-apps=pid,used_memory --format=csv,noheader,nounits") printf '%s, 1024\n' "$(cat PIDFILE)" ;;
"--query-gpu=driver_version --format=csv,noheader") printf '535.104.05\n535.104.05\n' ;;
*) echo "fake nvidia-smi: not answered: $*" >&2; exit 1 ;;
esac
"#
    );
    (fixture, smi)
}

/// One A100 in MIG mode with seven 1g.10gb devices (a100_mig.conf, its
/// CPUs cut to CPU 0), the holder on its first MIG device.
fn mig_node(name: &str) -> (String, String) {
    let text = fs::read_to_string(standin::fixture("a100_mig.conf")).unwrap().replace("cpus 0-31", "cpus 0");
    let uuids: Vec<String> = text.lines().filter_map(|l| l.strip_prefix("uuid MIG-")).map(|u| format!("MIG-{u}")).collect();
    let mut fixture = String::new();
    for line in text.lines() {
        fixture.push_str(line);
        fixture.push('\n');
        if line.starts_with("uuid GPU-") {
            fixture.push_str("proc compute pidfile:PIDFILE 1024\n");
        }
    }
    let listing: String = uuids.iter().enumerate().map(|(i, u)| format!("  MIG 1g.10gb     Device  {i}: (UUID: {u})\\n")).collect();
    let smi = format!(
        r#"#!/bin/sh
case "$*" in
"--query-gpu=index,name,pci.bus_id,mig.mode.current --format=csv,noheader") printf '0, {name}, 00000000:07:00.0, Enabled\n' ;;
"-q -x") printf '<nvidia_smi_log>\n<gpu>\n<minor_number>0</minor_number>\n</gpu>\n</nvidia_smi_log>\n' ;;
"topo -m") printf '\tGPU0\tCPU Affinity\nGPU0\t X \t0\n' ;;
"-L") printf 'GPU 0: {name} (UUID: GPU-5a7e8c2d-33b1-4f0e-9a41-1c2d3e4f5a6b)\n{listing}' ;;
"--query-compute-apps=pid,used_memory --format=csv,noheader,nounits") printf '%s, 1024\n' "$(cat PIDFILE)" ;;
"--query-gpu=driver_version --format=csv,noheader") printf '535.104.05\n' ;;
*) echo "fake nvidia-smi: not answered: $*" >&2; exit 1 ;;
esac
"#
    );
    (fixture, smi)
}

fn rows<'a>(show: &'a str, what: &str) -> Vec<&'a str> {
    show.lines().filter(|l| l.split_whitespace().next() == Some(what)).collect()
}

#[test]
fn agrees_with_the_driver() {
    let bed = Bed::new("agree", "NVIDIA H100 80GB HBM3", false);
    let (out, show) = bed.run();
    assert_eq!(out.status.code(), Some(0), "{show}");
    for what in ["type", "file", "cores", "links"] {
        let r = rows(&show, what);
        assert_eq!(r.len(), 2, "{what}: a row per GPU\n{show}");
        assert!(r.iter().all(|l| l.ends_with(" ok")), "{show}");
    }
    assert!(rows(&show, "links")[0].contains("-1,2"), "{show}");
    assert!(rows(&show, "gpumem").first().is_some_and(|l| l.contains("1024 MiB") && l.ends_with(" ok")), "{show}");
    // gres-rs health on the healthy node: no drain, its calls counted.
    assert!(rows(&show, "health").first().is_some_and(|l| l.contains("no drain") && l.ends_with(" ok")), "{show}");
    assert!(show.lines().any(|l| l.starts_with("health: verdict nothing (exit 0), ") && l.contains(" NVML calls, ")), "{show}");
    assert!(show.contains("device-check: 2 GPU(s), 0 mismatch(es)"), "{show}");
}

#[test]
fn names_a_mismatch() {
    // The driver calls the GPUs something else: the type rows say so.
    let bed = Bed::new("mismatch", "NVIDIA H200", false);
    let (out, show) = bed.run();
    assert_eq!(out.status.code(), Some(1), "{show}");
    let types = rows(&show, "type");
    assert!(types.len() == 2 && types.iter().all(|l| l.contains("nvidia_h200") && l.ends_with(" MISMATCH")), "{show}");
    assert!(rows(&show, "file").iter().all(|l| l.ends_with(" ok")), "{show}");
    assert!(show.contains("device-check: 2 GPU(s), 2 mismatch(es)"), "{show}");
}

#[test]
fn mig_devices_by_uuid() {
    let bed = Bed::new("mig", "NVIDIA A100-SXM4-80GB", true);
    let (out, show) = bed.run();
    assert_eq!(out.status.code(), Some(0), "{show}");
    let uuids = rows(&show, "uuids");
    assert!(uuids.len() == 1 && uuids[0].ends_with(" ok") && uuids[0].contains("MIG-687c966c-377b-9aa2-bb2e-db20035b7399"), "{show}");
    assert!(rows(&show, "count").first().is_some_and(|l| l.ends_with(" ok")), "{show}");
    assert!(rows(&show, "health").first().is_some_and(|l| l.ends_with(" ok")), "{show}");
}
