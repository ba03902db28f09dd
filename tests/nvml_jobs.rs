//! Jobs on GPUs found by our NVML detection (`AutoDetect=nvml`), on real
//! slurmd of every release of the test bed (`GRES_RS_SLURM`) with the NVML
//! stand-in as `libnvidia-ml.so` (in a chroot bound at its host path,
//! [`standin::chroot_binds`], with the device directory): an 8-GPU H100 node,
//! an A100 split into seven MIG devices, and a mixed MIG/non-MIG node.
//! The device files NVML names are made as character devices in a
//! directory of the test (`GRES_RS_DEV_DIR`, read by the harness's test
//! build of our plugins), so slurmd accepts them and the jobs get their GPU
//! variables: MIG jobs get `MIG-...` ids.
//!
//! Needs root, the Debian Slurm packages and `cc` (see crates/test-harness);
//! skipped otherwise.

use gres_test_harness as harness;
use gres_test_harness::standin;

use harness::*;
use std::path::{Path, PathBuf};

/// The fixture's text for a node of 2 CPUs (every GPU's affinity `0-1`),
/// in a file of the test's `tag` (tests of the releases run at once).
fn fixture_for_two_cpus(name: &str, tag: &str) -> PathBuf {
    let text = std::fs::read_to_string(standin::fixture(name)).expect("fixture");
    let text: String = text.lines().map(|l| if l.starts_with("cpus ") { "cpus 0-1".to_string() } else { l.to_string() } + "\n").collect();
    let p = standin::scratch_dir().join(format!("jobs-{tag}-{name}"));
    std::fs::write(&p, text).expect("write fixture");
    p
}

/// MIG UUIDs of a fixture, in order.
fn mig_uuids(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(standin::fixture(name)).expect("fixture");
    text.lines().filter_map(|l| l.strip_prefix("uuid MIG-")).map(|u| format!("MIG-{u}")).collect()
}

fn mknod(path: &Path, minor: u32) {
    let _ = std::fs::remove_file(path);
    let ok = std::process::Command::new("mknod").arg(path).args(["c", "195", &minor.to_string()]).status().map(|s| s.success()).unwrap_or(false);
    assert!(ok, "mknod {}", path.display());
}

/// A directory with `nvidia0..7` and every capability file `mig-minors`
/// names, as the NVIDIA driver makes them under /dev.
fn dev_dir(tag: &str) -> PathBuf {
    let dir = standin::scratch_dir().join(format!("jobs-dev-{tag}"));
    std::fs::create_dir_all(dir.join("nvidia-caps")).expect("dev dir");
    for m in 0..8 {
        mknod(&dir.join(format!("nvidia{m}")), m);
    }
    let minors = std::fs::read_to_string(standin::fixture("mig-minors")).expect("mig-minors");
    for n in minors.lines().filter_map(|l| l.split_whitespace().nth(1)?.parse::<u32>().ok()) {
        mknod(&dir.join(format!("nvidia-caps/nvidia-cap{n}")), n);
    }
    dir
}

/// Our plugins on the stand-in's `fixture` node, slurm.conf `Gres=<gres>`;
/// `None` when there is no build of ours for the release (skipped).
fn cluster(bed: &testbed::TestBed, test: &str, fixture: &str, gres: &str) -> Option<Cluster> {
    // The test build: it reads GRES_RS_MIG_MINORS and GRES_RS_DEV_DIR.
    let cfg = ClusterConfig::gpus(PluginSet::Ours, 0).with_cpus(1, 2, 1).with_gres(gres, "AutoDetect=nvml\n").with_test_build();
    let mut cfg = bed.ours_config(cfg.with_binds(standin::chroot_binds()), test)?;
    cfg.slurmd_env = vec![
        ("LD_LIBRARY_PATH".into(), standin::library_dir().to_string_lossy().into_owned()),
        ("GRES_RS_NVML_FIXTURE".into(), fixture_for_two_cpus(fixture, &bed.series).to_string_lossy().into_owned()),
        ("GRES_RS_MIG_MINORS".into(), standin::fixture("mig-minors").to_string_lossy().into_owned()),
        ("GRES_RS_DEV_DIR".into(), dev_dir(&format!("{fixture}-{}", bed.series)).to_string_lossy().into_owned()),
    ];
    let c = Cluster::start(cfg);
    c.assert_ours_loaded(&["gres_gpu"]);
    c.assert_ours_gpu_plugin_loaded("gpu_nvml");
    Some(c)
}

/// `CUDA_VISIBLE_DEVICES` of a one-task step with `--gres=gpu:<n>`.
fn visible(c: &Cluster, n: usize) -> Vec<String> {
    let out = c.srun(&[&format!("--gres=gpu:{n}"), "printenv", "CUDA_VISIBLE_DEVICES"]).expect_ok("srun");
    out.stdout.trim().split(',').map(str::to_string).collect()
}

per_release! {
    fn jobs_on_eight_nvlinked_h100(bed) {
        let Some(c) = cluster(bed, "jobs_on_eight_nvlinked_h100", "h100x8.conf", "gpu:nvidia_h100_80gb_hbm3:8") else { return };
        assert_eq!(visible(&c, 8), (0..8).map(|i| i.to_string()).collect::<Vec<_>>());
        assert_eq!(visible(&c, 1).len(), 1);
        let gres = c.node_field("Gres").unwrap_or_default();
        assert!(gres.contains("gpu:nvidia_h100_80gb_hbm3:8"), "node Gres: {gres}");
    }

    fn mig_jobs_get_mig_ids(bed) {
        let uuids = mig_uuids("a100_mig.conf");
        assert_eq!(uuids.len(), 7);
        // gres/mps and gres/shard are loaded too (GresTypes=gpu,mps,shard): the
        // MIG devices stay whole (docs/deviations.md, MPS/shard 6).
        let Some(c) = cluster(bed, "mig_jobs_get_mig_ids", "a100_mig.conf", "gpu:nvidia_a100_1g.10gb:7") else { return };
        let one = visible(&c, 1);
        assert_eq!(one.len(), 1);
        assert!(uuids.contains(&one[0]), "a MIG job must get a MIG id, got {one:?}");
        let mut all = visible(&c, 7);
        all.sort();
        let mut want = uuids.clone();
        want.sort();
        assert_eq!(all, want, "seven MIG devices, seven ids");
        let gres = c.node_field("Gres").unwrap_or_default();
        assert!(gres.contains("1g.10gb:7"), "node Gres: {gres}");
    }

    /// A job for every GPU of a node with MIG devices and NVLinked whole
    /// GPUs gets all five, the MIG devices by id.  (With stock gpu/nvml's
    /// MIG records, which have no links from 23.02, slurmctld 24.11 on
    /// gives such a job one GPU fewer and its step fails: docs/deviations.md
    /// NVML 6.  Stock gpu/nvml cannot run jobs here: it names the devices
    /// in /dev only.)
    fn mixed_mig_and_whole_gpus(bed) {
        let uuids = mig_uuids("mixed.conf");
        assert_eq!(uuids.len(), 2);
        let Some(c) = cluster(bed, "mixed_mig_and_whole_gpus", "mixed.conf", "gpu:5") else { return };
        let all = visible(&c, 5);
        assert_eq!(all.len(), 5, "{all:?}");
        let migs: Vec<_> = all.iter().filter(|v| v.starts_with("MIG-")).cloned().collect();
        let mut got = migs.clone();
        got.sort();
        let mut want = uuids;
        want.sort();
        assert_eq!(got, want, "the MIG devices by id: {all:?}");
        let whole: Vec<&String> = all.iter().filter(|v| !v.starts_with("MIG-")).collect();
        if bed.behaviour.gpu_env_uuid_node_wide {
            // The node's gres/gpu names GPUs by UUID once its MIG devices
            // are: the whole GPUs by their `GPU-` UUIDs from NVML.
            let text = std::fs::read_to_string(standin::fixture("mixed.conf")).expect("fixture");
            let mut want: Vec<String> = standin::parse_fixture(&text).into_iter().filter(|g| !g.mig_mode).map(|g| g.uuid).collect();
            want.sort();
            let mut got: Vec<String> = whole.iter().map(|v| v.to_string()).collect();
            got.sort();
            assert_eq!(got, want, "the whole GPUs by UUID (StockQuirks::gpu_env_uuid_node_wide): {all:?}");
        } else {
            assert!(whole.iter().all(|v| v.parse::<u32>().is_ok()), "the whole GPUs by index: {all:?}");
        }
    }
}
