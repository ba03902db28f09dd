//! The `steps` rows of a step's slurmstepd instructions (callgrind),
//! over a range of step environment sizes.

use crate::options::Opts;
use crate::row::Row;
use crate::stats::mean;
use gres_test_harness::testbed::{self, TestBed};
use gres_test_harness::{tool, Cluster, ClusterConfig, PluginSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `ours - stock` per step environment size (the mean of the rounds), in
/// thousands, in the order of the sizes.
pub fn by_layout_k(stock: &[f64], ours: &[f64]) -> String {
    let mut d = [(0.0, 0); STEP_ENV_PADS];
    for (j, (s, o)) in stock.iter().zip(ours).enumerate() {
        let e = &mut d[j % STEP_ENV_PADS];
        e.0 += o - s;
        e.1 += 1;
    }
    d.iter().filter(|e| e.1 > 0).map(|(sum, n)| format!("{:+.0}", sum / *n as f64 / 1e3)).collect::<Vec<_>>().join(" ")
}

/// The step-instruction runs give each step's environment one more
/// variable, `GRES_RS_BENCH_PAD`, of `k * 8 KiB` bytes for `k` in
/// `0..STEP_ENV_PADS`: users' environments differ in size, and so does
/// where slurmstepd's heap stands when its own code `xcalloc`s.  glibc's
/// `calloc` clears only the part of a block that the heap had in use
/// before (memory fresh from the kernel is zero), so the same step's
/// instructions depend on the sizes of what was allocated before it by
/// up to some 250,000 instructions (24.11.5's `setenvf` and
/// `env_array_merge` `xcalloc` 256 KiB buffers): a side that keeps 22 KiB
/// less on the heap (ours: the step's device lists as Rust data, stock:
/// five Slurm lists and twelve device records) can count 80,000 more or
/// 80,000 fewer in one layout.  Sixteen sizes 8 KiB apart step the heap
/// through the 128 KiB by which glibc grows it, and the rows report the
/// mean over them, the same sizes for both sides: the cost of a step
/// whatever its environment.  Each size stays below the kernel's 128 KiB
/// limit on one environment string.
pub const STEP_ENV_PADS: usize = 16;
const STEP_ENV_PAD_STEP: usize = 8 * 1024;

/// How the step-instruction clusters install the plugins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StepdSide {
    Stock,
    /// Ours among the stock files, one `PluginDir` entry as stock has
    /// (`ClusterConfig::single_plugin_dir`): the plugins' own cost.
    OursOneDir,
    /// `PluginDir=<ours>:<stock>`, as the README installs them: slurmd
    /// also looks in our directory first for every other plugin.
    OursFirst,
}

impl StepdSide {
    fn label(self) -> &'static str {
        match self {
            StepdSide::Stock => "stock",
            StepdSide::OursOneDir => "ours-onedir",
            StepdSide::OursFirst => "ours-first",
        }
    }
}

/// One side of [`stepd_instructions`]: its label (the name of its profile
/// directory), its cluster, and whether it runs our plugins.
pub struct StepdCluster {
    pub label: &'static str,
    pub cfg: ClusterConfig,
    pub ours: bool,
}

/// The instructions a step's slurmstepd executes on each side, counted by
/// callgrind: each side's slurmd starts its slurmstepd through a wrapper
/// (`slurmd -d <wrapper>`) that runs it under the release's valgrind
/// (`--callgrind-out-file=<dir>/cg.%p.out`), with a dump before every
/// `fork`/`vfork` and `execve` (a dump zeroes the counters, so the parts
/// of a process and of its forked children add up without counting the
/// parent's part twice).  A step is one `srun <request> true`: the
/// step's slurmstepd and its task's fork up to the exec of `true`, which
/// callgrind does not follow; on the sides of ours, slurmstepd must have
/// mapped our files of `plugins`.  The daemons log at info without
/// DebugFlags=Gres, as a production node does, and track processes with
/// proctrack/pgid (linuxproc's walk of /proc depends on the machine).  `n` steps a side in
/// rotating order after one warm-up each; `None` without valgrind.
pub fn stepd_instructions(opts: &Opts, bed: &TestBed, sides: Vec<StepdCluster>, request: &[&str], plugins: &[&str]) -> Option<(Vec<Vec<f64>>, usize)> {
    let valgrind_missing = bed.chroot.as_ref().map_or(!tool("valgrind").is_file(), |r| r.tool("valgrind").is_none());
    if valgrind_missing {
        eprintln!("bench: no valgrind for Slurm {}", bed.version);
        return None;
    }
    let keep = std::env::var_os("GRES_RS_CALLGRIND_DIR").map(PathBuf::from);
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("target/tmp/bench-stepd-{}", bed.version));
    let _ = std::fs::remove_dir_all(&base);
    let stepd = bed.chroot.as_ref().and_then(|r| r.tool("slurmstepd")).unwrap_or_else(|| tool("slurmstepd"));
    let side_dir = |label: &str| base.join(label);
    let labels: Vec<&'static str> = sides.iter().map(|s| s.label).collect();
    let mut clusters = Vec::new();
    for side in sides {
        let dir = side_dir(side.label);
        std::fs::create_dir_all(&dir).expect("bench: stepd profile directory");
        let wrapper = dir.join("slurmstepd-callgrind");
        let script = format!(
            "#!/bin/sh\nexec valgrind --tool=callgrind --dump-before=fork --dump-before=vfork --dump-before=execve --log-file={d}/vg.%p.log --callgrind-out-file={d}/cg.%p.out {stepd} \"$@\"\n",
            d = dir.display(),
            stepd = stepd.display()
        );
        std::fs::write(&wrapper, script).expect("bench: stepd wrapper");
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("bench: stepd wrapper mode");
        }
        let mut cfg = side.cfg;
        // proctrack/linuxproc reads every process's /proc/<pid>/stat to
        // find the step's, which made the count vary by up to 470,000
        // with what else ran on the machine.
        cfg.proctrack = "proctrack/pgid".into();
        cfg.slurmd_debug = "info".into();
        cfg.debug_gres = false;
        cfg.slurmd_args = vec!["-d".into(), wrapper.display().to_string()];
        let c = Cluster::start(cfg.with_binds([dir.clone()]));
        if side.ours {
            c.assert_stepd_ours_loaded(plugins, request);
        }
        clusters.push(c);
    }
    // The profiles of one step: every process of it has ended once its
    // log has callgrind's closing lines or it is gone.
    let one_step = |i: usize, label: &str, pad: usize| -> (f64, usize) {
        let (c, side): (&Cluster, &str) = (&clusters[i], labels[i]);
        let dir = side_dir(side);
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("cg.") || name.starts_with("vg.") {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let export = format!("--export=ALL,GRES_RS_BENCH_PAD={}", "x".repeat(pad));
        let mut args: Vec<&str> = request.to_vec();
        args.extend([export.as_str(), "true"]);
        let out = c.srun_timeout(&args, Duration::from_secs(300));
        assert!(out.ok(), "step under callgrind ({side}) failed:\n{out}\n{}", c.log_tails(20));
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            // vg.<pid>.log: the task's fork execs `true`, which runs
            // without valgrind, so its log never closes.
            let logs: Vec<(bool, String)> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let pid = name.strip_prefix("vg.")?.strip_suffix(".log")?.to_string();
                    let log = std::fs::read_to_string(e.path()).unwrap_or_default();
                    Some((log.contains("Collected") || !Path::new("/proc").join(&pid).exists(), log))
                })
                .collect();
            if !logs.is_empty() && logs.iter().all(|(done, _)| *done) {
                break;
            }
            let logs: Vec<String> = logs.into_iter().map(|(_, l)| l).collect();
            assert!(Instant::now() < deadline, "bench: the step's slurmstepd under callgrind ({side}) did not end:\n{}", logs.join("\n"));
            std::thread::sleep(Duration::from_millis(100));
        }
        let (mut total, mut files) = (0.0, 0);
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("cg.") {
                continue;
            }
            // One part of one process (a process that execs leaves an
            // empty file after its last dump).
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            if text.is_empty() {
                continue;
            }
            let n = text.lines().find_map(|l| l.strip_prefix("summary:")).and_then(|v| v.trim().parse::<f64>().ok());
            total += n.unwrap_or_else(|| panic!("bench: no summary line in {}", e.path().display()));
            files += 1;
            if let Some(k) = &keep {
                let _ = std::fs::create_dir_all(k);
                let _ = std::fs::copy(e.path(), k.join(format!("{}-{label}-stepd.{name}", bed.version)));
            }
        }
        (total, files)
    };
    // Warm-up: the first step of a node (page cache, first allocation).
    for (i, label) in labels.iter().enumerate() {
        one_step(i, &format!("warmup-{label}"), 0);
    }
    let mut counts = vec![Vec::new(); labels.len()];
    let mut files = 0;
    // Every side runs each environment size once a round, in the same
    // order, so `counts[side][j]` are one layout; which side goes first
    // rotates from step to step.
    for round in 0..opts.n(2, 1) {
        for layout in 0..STEP_ENV_PADS {
            let pad = layout * STEP_ENV_PAD_STEP;
            for k in 0..labels.len() {
                let i = (round * STEP_ENV_PADS + layout + k) % labels.len();
                let (t, f) = one_step(i, &format!("{}-{round}-pad{layout}", labels[i]), pad);
                files = files.max(f);
                counts[i].push(t);
            }
        }
    }
    Some((counts, files))
}

/// The step-instruction rows of a release: ours among the stock files and
/// ours first in `PluginDir`, each against stock.
pub fn rows_stepd_instructions(opts: &Opts, bed: &TestBed, build: &Result<testbed::OurBuild, String>, rows: &mut Vec<Row>) {
    let v = bed.version.as_str();
    let metric = "instructions the step's slurmstepd executes (valgrind callgrind), mean over step environment sizes";
    let sides = [StepdSide::Stock, StepdSide::OursOneDir, StepdSide::OursFirst];
    let what = |side: StepdSide| match side {
        StepdSide::OursFirst => "one `srun --gres=gpu:1 true` step's slurmstepd; ours first in PluginDir (ours:stock, as the README installs)",
        _ => "one `srun --gres=gpu:1 true` step's slurmstepd; ours among the stock files (one PluginDir entry, as stock)",
    };
    let measured = match build {
        Ok(b) => {
            let cfg = |side: StepdSide| {
                let mut cfg = bed.config(if side == StepdSide::Stock { PluginSet::Stock } else { PluginSet::Ours }, 4);
                if side != StepdSide::Stock && bed.chroot.is_some() {
                    cfg = b.apply(cfg);
                }
                cfg.single_plugin_dir = side == StepdSide::OursOneDir;
                StepdCluster { label: side.label(), cfg, ours: side != StepdSide::Stock }
            };
            stepd_instructions(opts, bed, sides.iter().map(|s| cfg(*s)).collect(), &["--gres=gpu:1"], &["gres_gpu", "gres_mps", "gres_shard"])
        }
        Err(e) => {
            for side in &sides[1..] {
                rows.push(Row::not_measured("steps", v, what(*side), metric, format!("not measured: our build for Slurm {v} failed: {e}")));
            }
            return;
        }
    };
    let Some((counts, files)) = measured else {
        for side in &sides[1..] {
            rows.push(Row::not_measured("steps", v, what(*side), metric, "not measured: no valgrind for this release".into()));
        }
        return;
    };
    for (i, side) in sides.iter().enumerate().skip(1) {
        rows.push(Row {
            group: "steps",
            release: v.into(),
            what: what(*side).into(),
            metric: metric.into(),
            unit: "k".into(),
            stock: Some(mean(&counts[0]) / 1e3),
            ours: Some(mean(&counts[i]) / 1e3),
            n: counts[0].len().min(counts[i].len()),
            goal: "<= 1.00".into(),
            note: format!(
                "slurmd starts slurmstepd under the release's callgrind (slurmd -d <wrapper>), SlurmdDebug=info, ProctrackType=proctrack/pgid; {files} profiles a step (slurmstepd and its forks, to the task's exec); environment 0 to {} KiB larger in {} steps (see STEP_ENV_PADS); ours - stock by size: {}",
                (STEP_ENV_PADS - 1) * STEP_ENV_PAD_STEP / 1024,
                STEP_ENV_PADS,
                by_layout_k(&counts[0], &counts[i])
            ),
        });
    }
}
