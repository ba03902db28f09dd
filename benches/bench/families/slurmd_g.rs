//! `slurmd-g` rows: `slurmd -G` on a fake-GPU node and on NVML stand-in
//! nodes, wall time, instructions and NVML calls.

use crate::exec::{text, timed};
use crate::gdir::{instructions, slurmd_g_times, GDir};
use crate::nvml_node::{nvml_node, read_fixture, stock_nvml_calls};
use crate::options::Opts;
use crate::row::Row;
use crate::stats::{median, Side};
use gres_test_harness::standin;
use gres_test_harness::testbed::{self, TestBed};
use gres_test_harness::{ClusterConfig, PluginSet};
use std::path::{Path, PathBuf};
use std::process::Output;

fn gres_lines(out: &Output) -> usize {
    text(out).lines().filter(|l| l.contains("Gres Name=gpu")).count()
}

/// `slurmd -G` on two prepared directories, interleaved, `runs` times
/// each (a full run).
#[allow(clippy::too_many_arguments)]
fn bench_slurmd_g(opts: &Opts, release: &str, what: &str, stock: &GDir, ours: &GDir, runs: usize, goal: &str, note: &str) -> Row {
    let n = opts.n(runs, 7);
    // Both must configure GPUs.  (The numbers of lines may differ: with
    // gres/mps or gres/shard loaded, stock splits a MIG device into one
    // GPU per device file, ours keeps it one GPU: docs/deviations.md,
    // MPS/shard 6.)
    let (_, s_out) = timed(stock.slurmd_g(&[]));
    let (_, o_out) = timed(ours.slurmd_g(&[]));
    let (sl, ol) = (gres_lines(&s_out), gres_lines(&o_out));
    if std::env::var_os("GRES_RS_BENCH_SHOW").is_some() {
        eprintln!("---- {what}: stock ----\n{}\n---- ours ----\n{}", text(&s_out), text(&o_out));
    }
    assert!(sl > 0 && ol > 0, "{what}: stock printed {sl} GPU lines, ours {ol}\n---- stock ----\n{}\n---- ours ----\n{}", text(&s_out), text(&o_out));
    let lines = if sl == ol { format!("{sl} `Gres Name=gpu` lines") } else { format!("`Gres Name=gpu` lines: stock {sl}, ours {ol}") };
    let (s, o) = slurmd_g_times(what, stock, ours, n);
    let ms = |v: Vec<f64>| v.into_iter().map(|t| t * 1000.0).collect::<Vec<_>>();
    let (s, o) = (ms(s), ms(o));
    Row {
        group: "slurmd-g",
        release: release.into(),
        what: format!("{what} ({lines})"),
        metric: "`slurmd -G` wall time, median".into(),
        unit: "ms".into(),
        stock: Some(median(&s)),
        ours: Some(median(&o)),
        n,
        goal: goal.into(),
        note: note.into(),
    }
}

/// A copy of a stand-in fixture whose GPUs are attached to this machine's
/// CPUs 0 (first half of the GPUs) and 1 (second half): slurmd converts
/// NVML's CPU affinity with the real machine's topology and refuses CPUs
/// the machine lacks.
fn two_cpu_fixture(name: &str) -> PathBuf {
    let src = standin::fixture(name);
    let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let n = text.lines().filter(|l| l.trim() == "gpu").count();
    let (mut gpu, mut out) = (0usize, String::new());
    for line in text.lines() {
        if line.trim() == "gpu" {
            gpu += 1;
        }
        if line.trim_start().starts_with("cpus ") {
            out.push_str(if gpu <= n / 2 { "cpus 0\n" } else { "cpus 1\n" });
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    let dst = standin::scratch_dir().join(format!("bench-{name}"));
    std::fs::write(&dst, out).unwrap_or_else(|e| panic!("{}: {e}", dst.display()));
    dst
}

/// Where ours' `slurmd -G` time goes on an NVML node (stderr only):
/// the same run with NVML failing at init (library loaded, nothing
/// detected) and with a fixture of no GPU.
fn explain_nvml(ours: &GDir, fixture: &Path) {
    let variants = [
        ("as measured", fixture.to_path_buf()),
        ("nvmlInit fails", standin::scratch_dir().join("bench-init-fails.conf")),
        ("no GPU", standin::scratch_dir().join("bench-no-gpu.conf")),
    ];
    let _ = std::fs::write(&variants[1].1, "init_error 999\n");
    let _ = std::fs::write(&variants[2].1, "driver 535.104.05\n");
    for (label, f) in &variants {
        let t: Vec<f64> = (0..15)
            .map(|_| {
                let (t, out) = timed(ours.slurmd_g(&[("GRES_RS_NVML_FIXTURE", f)]));
                let _ = out;
                t * 1000.0
            })
            .collect();
        eprintln!("bench: explain {}: ours slurmd -G, {label}: median {:.1} ms", fixture.display(), median(&t));
    }
}

/// The slurmd-g rows of release `bed` with our build for it (`build`).
pub fn rows_slurmd_g(opts: &Opts, bed: &TestBed, build: &Result<testbed::OurBuild, String>, mig_minors: bool, rows: &mut Vec<Row>) {
    let v = bed.version.as_str();
    let h100 = two_cpu_fixture("h100x8.conf");
    let mig = two_cpu_fixture("a100x8_mig.conf");
    const FAKE: &str = "fake-GPU node: 8 GPUs in fake_gpus.conf";
    const NVML: [&str; 2] = ["NVML node: 8x H100 with NVLink", "NVML node: 8x A100 x 7 MIG = 56 MIG devices"];
    if let Err(e) = build {
        for what in std::iter::once(FAKE).chain(NVML) {
            rows.push(Row::not_measured("slurmd-g", v, what, "`slurmd -G`", format!("not measured: our build for Slurm {v} failed: {e}")));
        }
        return;
    }
    // Ours for a chroot's release is the build for it (on the host the
    // workspace's, as the config has it).
    let ours_cfg = |c: ClusterConfig| match (&bed.chroot, build) {
        (Some(_), Ok(b)) => b.apply(bed.on(c)),
        _ => bed.on(c),
    };
    // (a1) the same fake-GPU node on both sides.
    let fake_node = |side: Side| {
        let mut c = nvml_node(Side::Stock, &h100, 1, 2, 1, None, mig_minors);
        c.plugins = if side == Side::Stock { PluginSet::Stock } else { PluginSet::Ours };
        c.gres_conf = String::new();
        c
    };
    {
        let (s, o) = (GDir::prepare(&bed.on(fake_node(Side::Stock))), GDir::prepare(&ours_cfg(fake_node(Side::Ours))));
        let where_ = if bed.chroot.is_some() { ", timed inside the chroot" } else { "" };
        // Like with like, and a small difference: more runs.
        rows.push(bench_slurmd_g(opts, v, FAKE, &s, &o, 401, "<= 1.00", &format!("both sides read fake_gpus.conf{where_}")));
        let valgrind = if bed.chroot.is_some() { "the chroot's valgrind on its slurmd; " } else { "" };
        match (instructions(&s, &format!("{v}-stock-fake")), instructions(&o, &format!("{v}-ours-fake"))) {
            (Some(stock), Some(ours)) => rows.push(Row::instructions(
                v,
                FAKE.into(),
                stock,
                ours,
                &format!("{valgrind}the CPU part of the wall time, without the machine's noise (one run a side is exact)"),
            )),
            _ => rows.push(Row::not_measured(
                "slurmd-g",
                v,
                FAKE,
                "instructions `slurmd -G` executes (valgrind callgrind)",
                "not measured: valgrind missing or failed (see stderr)".into(),
            )),
        }
    }
    // (a2, a3) NVML stand-in nodes: the host's stock gpu_nvml.so built
    // from Debian's source, a chroot's from the test bed; in a chroot the
    // stand-in's mig-minors is where the driver has it, for both sides.
    let stock_nvml = match std::env::var_os("GRES_RS_STOCK_GPU_NVML") {
        Some(p) if bed.chroot.is_none() => Some(PathBuf::from(p)),
        _ => bed.stock_gpu_nvml().map_err(|e| eprintln!("bench: {e}")).ok(),
    };
    let mig_minors = mig_minors || bed.chroot.is_some();
    // The stock plugin reads MIG minors from MIG_MINORS_PATH only: without
    // it in place, the MIG node's stock side reads fake_gpus.conf.
    for (label, fixture, mig_node) in [("8x H100 with NVLink", &h100, false), ("8x A100 x 7 MIG = 56 MIG devices", &mig, true)] {
        let stock_so = if mig_node && !mig_minors { None } else { stock_nvml.as_deref() };
        let stock = GDir::prepare(&bed.on(nvml_node(Side::Stock, fixture, 1, 2, 1, stock_so, mig_minors)));
        let ours = GDir::prepare(&ours_cfg(nvml_node(Side::Ours, fixture, 1, 2, 1, None, mig_minors)));
        let (goal, note) = match stock_so {
            Some(_) => (
                "<= 1.00",
                if bed.chroot.is_some() {
                    "AutoDetect=nvml on the NVML stand-in, both sides, timed inside the chroot; stock gpu_nvml.so of the test bed (TestBed::stock_gpu_nvml)"
                } else {
                    "AutoDetect=nvml on the NVML stand-in, both sides; stock gpu_nvml.so of the test bed, built from Debian's slurm-wlm source (Debian ships none)"
                },
            ),
            // Not like with like: no goal.
            None => {
                ("-", "ours: AutoDetect=nvml on the NVML stand-in; stock: the same GPUs from fake_gpus.conf (no stock gpu_nvml.so, or no mig-minors for it)")
            }
        };
        rows.push(bench_slurmd_g(opts, v, &format!("NVML node: {label}"), &stock, &ours, 101, goal, note));
        if stock_so.is_some() {
            let tag = if mig_node { "mig" } else { "nvlink" };
            if let (Some(s), Some(o)) = (instructions(&stock, &format!("{v}-stock-{tag}")), instructions(&ours, &format!("{v}-ours-{tag}"))) {
                rows.push(Row::instructions(v, format!("NVML node: {label}"), s, o, "both sides include the NVML stand-in's own work"));
            }
        }
        if std::env::var_os("GRES_RS_BENCH_EXPLAIN").is_some() {
            explain_nvml(&ours, fixture);
        }
        // NVML calls: one counted run a side (stock counted too when it has
        // gpu_nvml.so); the count derived from gpu_nvml.c checks it.
        let count = |d: &GDir, who: &str| -> (f64, Vec<(String, usize)>) {
            let calls = standin::scratch_dir().join(format!("bench-calls-{who}-{}.log", fixture.file_stem().unwrap_or_default().to_string_lossy()));
            let _ = std::fs::remove_file(&calls);
            let (_, out) = timed(d.slurmd_g(&[("GRES_RS_NVML_CALLS", &calls)]));
            assert!(out.status.success(), "{}", text(&out));
            let log = std::fs::read_to_string(&calls).unwrap_or_default();
            let _ = std::fs::remove_file(&calls);
            let mut by_fn: Vec<(String, usize)> = Vec::new();
            for l in log.lines() {
                let f = l.split_whitespace().next().unwrap_or("").to_string();
                match by_fn.iter_mut().find(|(n, _)| *n == f) {
                    Some((_, c)) => *c += 1,
                    None => by_fn.push((f, 1)),
                }
            }
            (log.lines().count() as f64, by_fn)
        };
        let (ours_calls, by_fn) = count(&ours, "ours");
        eprintln!("bench: NVML calls of ours for {label}: {by_fn:?}");
        let derived = stock_nvml_calls(&read_fixture(fixture)) as f64;
        let (stock_calls, note) = if stock_so.is_some() {
            let (n, by_fn) = count(&stock, "stock");
            eprintln!("bench: NVML calls of stock for {label}: {by_fn:?}");
            let derived = if bed.chroot.is_none() { format!(" (stock derived from gpu_nvml.c 22.05.8: {derived:.0})") } else { String::new() };
            (n, format!("both counted by the stand-in{derived}"))
        } else {
            (derived, "ours counted by the stand-in; stock derived from gpu_nvml.c (22.05.8), not measured".to_string())
        };
        rows.push(Row {
            group: "slurmd-g",
            release: v.into(),
            what: format!("NVML node: {label}"),
            metric: "NVML calls during `slurmd -G`".into(),
            unit: "calls".into(),
            stock: Some(stock_calls),
            ours: Some(ours_calls),
            n: 1,
            goal: "<= 1.00".into(),
            note,
        });
    }
}
