//! Demo: a throwaway single-node Slurm 22.05 cluster running OUR GPU GRES
//! plugins on four fake GPUs.
//!
//! Run it with `bash examples/demo.sh` (installs what is missing, builds the
//! plugins, then `cargo run --example demo`). Needs root. This program
//! builds nothing itself; it uses the files `cargo build --workspace` made
//! (or `$GRES_RS_PLUGIN_DIR`).
//!
//! It proves which plugin files slurmd, slurmctld and slurmstepd really
//! mapped (a plugin that fails to load would silently be replaced by
//! Debian's file of the same name), runs `sbatch --gres=gpu:4` with three
//! concurrent `srun --exclusive --gres=gpu:1 -n1` steps, prints what each
//! got, and tears everything down.

use gres_test_harness as harness;

use harness::*;
use std::collections::BTreeSet;
use std::process::ExitCode;
use std::time::Instant;

const JOB_SCRIPT: &str = r#"#!/bin/bash
echo "batch script: job $SLURM_JOB_ID on $(hostname -s)"
echo "  SLURM_JOB_GPUS=$SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES SLURM_GPUS_ON_NODE=$SLURM_GPUS_ON_NODE"
echo "  batch slurmstepd mapped: $(grep -o '/[^ ]*/gres_gpu.so' /proc/$PPID/maps | sort -u)"
"$GRES_RS_DUMP_ENV" batch >/dev/null
for i in 1 2 3; do
  srun --exclusive -n1 --gres=gpu:1 bash -c '
    "$GRES_RS_DUMP_ENV" step >/dev/null
    echo "  step $SLURM_STEP_ID started $(date +%T.%3N): CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS=$SLURM_STEP_GPUS SLURM_GPUS_ON_NODE=$SLURM_GPUS_ON_NODE"
    echo "  step $SLURM_STEP_ID slurmstepd mapped: $(grep -o "/[^ ]*/gres_gpu.so" /proc/$PPID/maps | sort -u)"
    sleep 2' &
done
wait
echo "batch script: all steps done"
"#;

fn section(t: &str) {
    println!("\n=== {t} ===");
}

fn main() -> ExitCode {
    let t0 = Instant::now();
    println!("slurm-gpu-gres demo: Slurm 22.05 GPU GRES plugins written in Rust, on a throwaway cluster");

    let problems = prereq_problems();
    if !problems.is_empty() {
        eprintln!("cannot run the demo:\n  - {}\n(run `bash examples/demo.sh` as root)", problems.join("\n  - "));
        return ExitCode::FAILURE;
    }
    let built = match locate_our_library() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    println!("our plugins' code: {}/{BUILT_LIBRARY_FILE}; their files {}.so are built into this program", built.display(), OUR_PLUGINS.join(".so, "));

    let mut failures: Vec<String> = Vec::new();

    section("1. start a single-node cluster with OUR plugins on 4 fake GPUs");
    let mut cfg = ClusterConfig::gpus(PluginSet::Ours, 4);
    cfg.verify_ours_loaded = false; // the demo shows the proof itself
    let cluster = match Cluster::try_start(cfg) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cluster failed to start:\n{e}");
            return ExitCode::FAILURE;
        }
    };
    println!("cluster {} up: dir {}", cluster.name, cluster.layout.root.display());
    println!(
        "  munged pid {:?}, slurmctld pid {:?} (port {}), slurmd pid {:?} (port {})",
        cluster.pid(Daemon::Munged),
        cluster.pid(Daemon::Slurmctld),
        cluster.ctld_port,
        cluster.pid(Daemon::Slurmd),
        cluster.slurmd_port
    );
    println!("  PluginDir={}", cluster.plugin_dir_setting);
    println!("  fake GPUs (char devices 195:N): {}", cluster.fake_gpus.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" "));
    println!("  node: Gres={}", cluster.node_field("Gres").unwrap_or_default());

    section("2. proof of loading (/proc/<pid>/maps)");
    let our_dir = cluster.our_dir.clone().expect("ours");
    let stock = stock_plugin_dir();
    let show = |who: &str, files: Result<Vec<String>, String>, names: &[&str], failures: &mut Vec<String>| match files {
        Ok(files) => {
            for n in names {
                let ours = our_dir.join(format!("{n}.so")).to_string_lossy().into_owned();
                let theirs = stock.join(format!("{n}.so")).to_string_lossy().into_owned();
                let has_ours = files.iter().any(|f| f.starts_with(&ours));
                let has_theirs = files.iter().any(|f| f.starts_with(&theirs));
                let verdict = if has_ours && !has_theirs { "OURS" } else { "NOT OURS" };
                println!("  {who:<11} {n:<11} {verdict:<8} ours mapped: {has_ours:<5} stock {theirs} mapped: {has_theirs}");
                if verdict != "OURS" {
                    failures.push(format!("{who}: {n} is not ours"));
                }
            }
            // The code behind those files, once per process.
            let library = our_dir.join(LIBRARY_FILE).to_string_lossy().into_owned();
            let has_library = files.iter().any(|f| f.starts_with(&library));
            println!("  {who:<11} {:<11} {:<8} {library} mapped: {has_library}", "(code)", if has_library { "OURS" } else { "MISSING" });
            if !has_library {
                failures.push(format!("{who}: {LIBRARY_FILE} is not mapped"));
            }
        }
        Err(e) => {
            println!("  {who}: {e}");
            failures.push(format!("{who}: {e}"));
        }
    };
    let gres = ["gres_gpu", "gres_mps", "gres_shard"];
    show("slurmd", cluster.mapped_files(Daemon::Slurmd), &gres, &mut failures);
    show("slurmctld", cluster.mapped_files(Daemon::Slurmctld), &["gres_gpu"], &mut failures);
    show("slurmstepd", cluster.stepd_mapped_files(&["--gres=gpu:1"]), &gres, &mut failures);
    // gpu_nvml.so is loaded only when slurmd selects gpu/nvml: gres.conf
    // AutoDetect=nvml plus a loadable libnvidia-ml.so (a stub without GPUs).
    let mut gcfg = ClusterConfig::gpus(PluginSet::Ours, 4);
    gcfg.nvml_stub = true;
    gcfg.gres_conf = format!("AutoDetect=nvml\n{}", gpu_gres_line(4));
    let g = Cluster::slurmd_g(&gcfg);
    let gdir = g.our_dir.clone().unwrap();
    for n in ["gres_gpu", "gpu_nvml"] {
        let ours = gdir.join(format!("{n}.so")).to_string_lossy().into_owned();
        let loaded = g.loaded_files.contains(&ours);
        let stock_loaded = g.loaded_files.iter().any(|f| *f == stock.join(format!("{n}.so")).to_string_lossy());
        let ok = loaded && !stock_loaded;
        println!("  slurmd -G   {n:<11} {:<8} (AutoDetect=nvml, stub libnvidia-ml.so; LD_DEBUG=files)", if ok { "OURS" } else { "NOT OURS" });
        if !ok {
            failures.push(format!("slurmd -G with AutoDetect=nvml: {n} not loaded from our dir"));
        }
    }
    if !g.output.ok() {
        failures.push(format!("slurmd -G with AutoDetect=nvml failed:\n{}", g.output));
    }

    section("3. sbatch --gres=gpu:4 -n3: three concurrent `srun --exclusive -n1 --gres=gpu:1` steps");
    println!("job script:\n{}", JOB_SCRIPT.lines().map(|l| format!("  | {l}")).collect::<Vec<_>>().join("\n"));
    let job = cluster.sbatch(&["--gres=gpu:4", "-n3", "--job-name=gpu-demo"], JOB_SCRIPT);
    cluster.wait_no_jobs(std::time::Duration::from_secs(30));
    println!("\njob {} finished: {} (exit {})", job.job_id, job.state, job.exit_code);
    println!("job output:\n{}", job.output.lines().map(|l| format!("  > {l}")).collect::<Vec<_>>().join("\n"));
    if !job.ok() {
        failures.push(format!("job {} ended {} {}", job.job_id, job.state, job.exit_code));
    }

    section("4. what each part of the job got");
    let blocks = cluster.collect_dumps();
    let show_vars =
        ["SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"];
    println!("  {:<10} {}", "who", show_vars.iter().map(|v| format!("{v:<22}")).collect::<String>().trim_end());
    let mut sorted = blocks.clone();
    sorted.sort_by_key(|b| (b.tag != "batch", b.step_id()));
    for b in &sorted {
        let who = if b.tag == "batch" { "batch".to_string() } else { format!("step {}", b.step_id()) };
        println!("  {who:<10} {}", show_vars.iter().map(|v| format!("{:<22}", b.get(v).unwrap_or("-"))).collect::<String>().trim_end());
    }
    let steps: Vec<&EnvBlock> = blocks.iter().filter(|b| b.tag == "step").collect();
    let distinct: BTreeSet<&str> = steps.iter().filter_map(|b| b.get("CUDA_VISIBLE_DEVICES")).collect();
    if steps.len() == 3 && distinct.len() == 3 && steps.iter().all(|b| b.get("SLURM_GPUS_ON_NODE") == Some("1")) {
        println!("  => the three concurrent steps got three distinct GPUs: {}", distinct.into_iter().collect::<Vec<_>>().join(", "));
    } else {
        failures.push(format!("expected 3 steps with distinct single GPUs, got {} steps, GPUs {distinct:?}", steps.len()));
    }

    section("5. teardown");
    drop(cluster);
    println!("cluster stopped (daemons stopped by PID, temp dir removed); total {:.1?}", t0.elapsed());

    if failures.is_empty() {
        println!("\nDEMO OK: our gres_gpu/gres_mps/gres_shard/gpu_nvml plugins were loaded and served the job.");
        ExitCode::SUCCESS
    } else {
        println!("\nDEMO FAILED:\n  - {}", failures.join("\n  - "));
        ExitCode::FAILURE
    }
}
