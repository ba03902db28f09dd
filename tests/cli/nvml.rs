//! `AutoDetect=nvml`: without a driver, and with the NVML stand-in as the
//! driver (with and without its development link), as slurmd would pick
//! gpu/nvml.

use crate::install::{install_dir, install_into, replace_all};
use crate::run::{check, conf, temp_dir, text, this_host, GRES_RS};
use gres_test_harness::standin;
use gres_test_harness::TempDir as Dir;
use slurm_gpu_gres::LIBRARY_FILE;
use std::fs;
use std::path::Path;
use std::process::Command;

#[test]
fn autodetect_nvml_and_gpu_energy_without_a_driver() {
    let host = Command::new("hostname").arg("-s").output().map(|o| text(&o.stdout).trim().to_string()).unwrap_or_default();
    let have_driver = Path::new("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists() || Path::new("/usr/lib64/libnvidia-ml.so.1").exists();
    if host.is_empty() || have_driver {
        gres_test_harness::ledger::skipped("autodetect_nvml_and_gpu_energy_without_a_driver", "needs a host without the NVIDIA driver");
        return;
    }
    let d = conf(
        "nodriver",
        &format!("GresTypes=gpu\nAcctGatherEnergyType=acct_gather_energy/gpu\nNodeName={host} CPUs=1 Gres=gpu:1\n"),
        Some("AutoDetect=nvml\nName=gpu File=/dev/null\n"),
    );
    let out = check(&d, &["--node", &host, "--no-detect"]);
    let err = text(&out.stderr);
    assert!(err.contains("warning: AutoDetect=nvml, but there is no NVIDIA driver here (libnvidia-ml.so.1 missing): NVML detects no GPU"), "{err}");
    assert!(err.contains(&format!("--> {}:1:", d.0.join("gres.conf").display())), "{err}");
    assert!(
        err.contains("warning: AcctGatherEnergyType=acct_gather_energy/gpu, but slurmd will use gpu/generic, which reads no energy: jobs' GPU energy stays 0"),
        "{err}"
    );
    assert!(err.contains(&format!("--> {}:2:", d.0.join("slurm.conf").display())), "{err}");
}

/// Whether this host has an NVIDIA driver's NVML (the tests below need
/// one the stand-in can play, not a real one).
fn host_has_nvml() -> bool {
    ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu", "/usr/lib"]
        .iter()
        .any(|d| Path::new(d).join("libnvidia-ml.so.1").exists() || Path::new(d).join("libnvidia-ml.so").exists())
}

/// A directory with the NVML stand-in as the NVIDIA driver installs it
/// (`libnvidia-ml.so.1` only), and, with `dev_link`, the unversioned
/// `libnvidia-ml.so` of the driver's development package too: given as
/// `LD_LIBRARY_PATH`, it is what `dlopen()` finds in gres-rs, as in slurmd
/// on such a host.
fn nvml_lib_dir(name: &str, dev_link: bool) -> Dir {
    let d = temp_dir(name);
    fs::copy(standin::library(), d.0.join("libnvidia-ml.so.1")).unwrap();
    if dev_link {
        std::os::unix::fs::symlink("libnvidia-ml.so.1", d.0.join("libnvidia-ml.so")).unwrap();
    }
    d
}

/// `check --verbose --no-detect` of this host as a node with
/// `AutoDetect=nvml`, `PluginDir=<dirs>` and
/// `AcctGatherEnergyType=acct_gather_energy/gpu`, NVML found in `lib_dir`,
/// the installed slurmd taken as `slurmd`: exit status, standard error and
/// the configuration's directory.
fn check_nvml_host(name: &str, dirs: &str, lib_dir: &Dir, slurmd: &str, extra: &[&str]) -> (Option<i32>, String, Dir) {
    let host = this_host();
    let d = conf(
        name,
        &format!("GresTypes=gpu\nPluginDir={dirs}\nAcctGatherEnergyType=acct_gather_energy/gpu\nNodeName={host} CPUs=1 Gres=gpu:1\n"),
        Some("AutoDetect=nvml\nName=gpu File=/dev/null\n"),
    );
    let out = Command::new(GRES_RS)
        .args(["check", "--node", &host, "--verbose", "--no-detect", "--slurm-conf"])
        .arg(d.0.join("slurm.conf"))
        .args(extra)
        .env("LD_LIBRARY_PATH", &lib_dir.0)
        .env("GRES_RS_SLURMD_VERSION", slurmd)
        .env("NO_COLOR", "1")
        .env_remove("SLURM_CONF")
        .output()
        .unwrap();
    (out.status.code(), text(&out.stderr), d)
}

#[test]
fn gpu_plugin_slurmd_picks_and_its_file() {
    let stock = "/usr/lib/x86_64-linux-gnu/slurm-wlm";
    if host_has_nvml() || !Path::new(stock).join("gpu_generic.so").is_file() || Path::new(stock).join("gpu_nvml.so").exists() {
        gres_test_harness::ledger::skipped("gpu_plugin_slurmd_picks_and_its_file", "needs Debian's stock plugins (no gpu_nvml.so) and no NVIDIA driver");
        return;
    }
    let Some(ours) = install_dir("gpu-plugin") else { return };
    assert!(install_into(&ours.0, false).status.success());
    let o = ours.0.display().to_string();
    let so1 = nvml_lib_dir("nvml-so1", false);
    let both = nvml_lib_dir("nvml-both", true);

    let slurm_conf = |d: &Dir| d.0.join("slurm.conf").display().to_string();

    // Debian 12's slurmd (22.05) with the driver's development link picks
    // gpu/nvml, and the stock directory has no gpu_nvml.so: slurmd stops.
    let (code, err, d) = check_nvml_host("gpu-nvml-missing", stock, &both, "22.05.8", &[]);
    let missing = format!(
        "error[fatal]: slurmd picks gpu/nvml (AutoDetect=nvml and libnvidia-ml.so can be loaded), but there is no gpu_nvml.so in PluginDir={stock}: it stops (cannot create gpu context for gpu/nvml) and the node gets no GRES\n \
         --> {}:2:11\n"
    , slurm_conf(&d));
    assert!(err.contains(&missing), "{err}");
    assert!(
        err.contains("= help: install ours for this release (gres-rs install --plugin-dir DIR, DIR first in PluginDir); the stock packages of Debian ship no gpu_nvml.so"),
        "{err}"
    );
    assert_eq!(code, Some(1), "{err}");
    // 24.11 also tries libnvidia-ml.so.1: the driver alone is enough.
    let (code, err, _d) = check_nvml_host("gpu-nvml-missing-2411", stock, &so1, "22.05.8", &["--slurm-release", "24.11"]);
    assert!(
        err.contains(&format!(
            "error[fatal]: slurmd picks gpu/nvml (AutoDetect=nvml and libnvidia-ml.so.1 can be loaded), but there is no gpu_nvml.so in PluginDir={stock}: it stops"
        )),
        "{err}"
    );
    assert_eq!(code, Some(1), "{err}");

    // A gpu_nvml.so of another release (ours, built for 24.11.5) beside
    // its library: passed over, and none accepted.
    let other = temp_dir("gpu-nvml-other");
    let mut bytes = fs::read(ours.0.join("gpu_nvml.so")).unwrap();
    let v2205 = 0x16_05_08u32.to_le_bytes();
    assert_eq!(bytes.windows(4).filter(|w| *w == v2205).count(), 1, "plugin_version 22.05.8 found once in gpu_nvml.so");
    assert!(replace_all(&mut bytes, &v2205, &0x18_0b_05u32.to_le_bytes()));
    fs::write(other.0.join("gpu_nvml.so"), &bytes).unwrap();
    fs::copy(ours.0.join(LIBRARY_FILE), other.0.join(LIBRARY_FILE)).unwrap();
    let x = other.0.display().to_string();
    let (code, err, _d) = check_nvml_host("gpu-nvml-mismatch", &format!("{x}:{stock}"), &both, "22.05.8", &[]);
    assert!(
        err.contains(&format!("warning: slurmd passes over {x}/gpu_nvml.so: it is built for Slurm 24.11.5, slurmd is 22.05.8, and finds no other")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "error[fatal]: slurmd picks gpu/nvml (AutoDetect=nvml and libnvidia-ml.so can be loaded), but no gpu_nvml.so in PluginDir={x}:{stock} is one it accepts: it stops (cannot create gpu context for gpu/nvml) and the node gets no GRES"
        )),
        "{err}"
    );
    assert_eq!(code, Some(1), "{err}");

    // Ours first: loaded, and slurmd starts.
    let (code, err, _d) = check_nvml_host("gpu-nvml-ours", &format!("{o}:{stock}"), &both, "22.05.8", &[]);
    assert!(
        err.contains(&format!("note: slurmd picks gpu/nvml (AutoDetect=nvml and libnvidia-ml.so can be loaded): loads {o}/gpu_nvml.so (ours, Slurm 22.05.8)")),
        "{err}"
    );
    assert!(!err.contains("AcctGatherEnergyType") && !err.contains("error:") && !err.contains("error["), "{err}");
    assert_eq!(code, Some(0), "{err}");
}

/// The `AutoDetect=nvml` warnings that depend on libnvidia-ml.so.1 being
/// there (the NVML stand-in as the driver installs it, through
/// `LD_LIBRARY_PATH`), with our gres/gpu and with the stock one.
#[test]
fn autodetect_nvml_with_the_driver_but_no_development_link() {
    let stock = "/usr/lib/x86_64-linux-gnu/slurm-wlm";
    if host_has_nvml() || !Path::new(stock).join("gpu_generic.so").is_file() {
        gres_test_harness::ledger::skipped("autodetect_nvml_with_the_driver_but_no_development_link", "needs Debian's stock plugins and no NVIDIA driver");
        return;
    }
    let Some(ours) = install_dir("nvml-so1-only") else { return };
    assert!(install_into(&ours.0, false).status.success());
    let o = ours.0.display().to_string();
    let so1 = nvml_lib_dir("nvml-so1-only", false);
    let gres = |d: &Dir| d.0.join("gres.conf").display().to_string();
    let slurm_conf = |d: &Dir| d.0.join("slurm.conf").display().to_string();

    // 22.05 with the driver's libnvidia-ml.so.1 only: gpu/generic.  Our
    // gres/gpu detects through libnvidia-ml.so.1 (AutoDetect=nvml works),
    // but gpu/nvml's --gpu-freq and energy are missing.
    let (code, err, d) = check_nvml_host("gpu-nvml-ours-so1", &format!("{o}:{stock}"), &so1, "22.05.8", &[]);
    assert!(
        err.contains(&format!(
            "note: slurmd picks gpu/generic (AutoDetect=nvml, but libnvidia-ml.so cannot be loaded): loads {stock}/gpu_generic.so (stock, Slurm 22.05.8)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "warning: AutoDetect=nvml: our gres/gpu detects the GPUs through libnvidia-ml.so.1, but slurmd picks gpu/generic (libnvidia-ml.so, unversioned, cannot be loaded), so --gpu-freq and acct_gather_energy/gpu have no gpu/nvml\n \
             --> {}:1:12\n",
            gres(&d)
        )),
        "{err}"
    );
    assert!(
        err.contains(
            "= help: install the driver's development link (Debian: apt install libnvidia-ml-dev, or ln -s libnvidia-ml.so.1 libnvidia-ml.so next to it)\n"
        ),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "warning: AcctGatherEnergyType=acct_gather_energy/gpu, but slurmd will use gpu/generic, which reads no energy: jobs' GPU energy stays 0\n \
             --> {}:3:22\n",
            slurm_conf(&d)
        )),
        "{err}"
    );
    assert!(err.contains("= help: energy needs gpu/nvml: AutoDetect=nvml in gres.conf and the driver's libnvidia-ml.so (unversioned) loadable"), "{err}");
    assert!(!err.contains("no NVIDIA driver"), "{err}");
    assert_eq!(code, Some(0), "{err}");

    // The same with the stock gres/gpu: it detects nothing then.
    let (code, err, d) = check_nvml_host("gpu-nvml-stock-so1", stock, &so1, "22.05.8", &[]);
    assert!(
        err.contains(&format!(
            "warning: AutoDetect=nvml, but libnvidia-ml.so (unversioned) cannot be loaded here: the stock slurmd falls back to gpu/generic and detects no GPU\n \
             --> {}:1:12\n",
            gres(&d)
        )),
        "{err}"
    );
    assert!(err.contains("gres-rs's gres_gpu.so asks NVML through libnvidia-ml.so.1 itself"), "{err}");
    assert!(!err.contains("our gres/gpu detects"), "{err}");
    assert_eq!(code, Some(0), "{err}");
    // 24.11 picks gpu/nvml there: no such warning (and no gpu_nvml.so).
    let (_, err, _d) = check_nvml_host("gpu-nvml-stock-so1-2411", stock, &so1, "22.05.8", &["--slurm-release", "24.11"]);
    assert!(!err.contains("cannot be loaded here") && !err.contains("acct_gather_energy/gpu, but"), "{err}");
}

/// `detect` warns as check does when slurmd would not pick gpu/nvml: the
/// GPUs detected through the driver's libnvidia-ml.so.1, no unversioned
/// libnvidia-ml.so.
#[test]
fn detect_warns_when_slurmd_would_not_pick_gpu_nvml() {
    if host_has_nvml() {
        gres_test_harness::ledger::skipped("detect_warns_when_slurmd_would_not_pick_gpu_nvml", "this host has an NVIDIA driver");
        return;
    }
    let fixture = standin::scratch_dir().join("cli-detect-a100.conf");
    fs::write(&fixture, fs::read_to_string(standin::fixture("a100_mig.conf")).unwrap().replace("cpus 0-31", "cpus 0")).unwrap();
    let detect = |lib_dir: &Dir| {
        let out = Command::new(GRES_RS)
            .args(["detect", "--mig-minors"])
            .arg(standin::fixture("mig-minors"))
            .env("LD_LIBRARY_PATH", &lib_dir.0)
            .env("GRES_RS_NVML_FIXTURE", &fixture)
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    };
    let warning = "gres-rs: warning: libnvidia-ml.so (unversioned) cannot be loaded here: slurmd picks gpu/generic instead of gpu/nvml (the stock gres/gpu then detects no GPU; ours detects through libnvidia-ml.so.1, but --gpu-freq and acct_gather_energy/gpu need gpu/nvml): install the driver's development link (Debian: apt install libnvidia-ml-dev)\n";
    let (code, err) = detect(&nvml_lib_dir("detect-so1", false));
    assert_eq!(code, Some(0), "{err}");
    // Only a slurmd before 24.05 needs the unversioned name.
    if slurm_gpu_gres::ffi::behaviour::build().nvml_versioned_lib {
        assert!(!err.contains("warning"), "{err}");
    } else {
        assert!(err.contains(warning), "{err}");
        assert_eq!(err.matches("gres-rs: warning:").count(), 1, "{err}");
    }
    // With the development link slurmd picks gpu/nvml: no warning.
    let (code, err) = detect(&nvml_lib_dir("detect-both", true));
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("warning"), "{err}");
}
