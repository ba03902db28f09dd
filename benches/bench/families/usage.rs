//! `usage` rows: one poll of a step's GPU accounting (`gpu_p_usage_read`),
//! NVML calls and instructions.

use crate::exec::text;
use crate::options::Opts;
use crate::row::Row;
use gres_test_harness as harness;
use harness::chroot::Chroot;
use harness::standin;
use harness::testbed::{self, TestBed};
use harness::{BUILT_LIBRARY_FILE, LIBRARY_FILE};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Processes of the step each poll asks about (8 on each of the 8 GPUs of
/// h100x8.conf).
const USAGE_PIDS: u32 = 64;
const USAGE_FIRST_PID: u32 = 1000;

/// h100x8.conf with 8 of the step's processes on each GPU, each holding
/// memory and with a utilisation sample.
fn usage_fixture() -> String {
    let text = std::fs::read_to_string(standin::fixture("h100x8.conf")).expect("h100x8.conf");
    let mut parts = text.split("\ngpu\n");
    let mut out = parts.next().unwrap_or_default().to_string();
    let per_gpu = USAGE_PIDS / 8;
    for (g, part) in parts.enumerate() {
        out.push_str("\ngpu\n");
        out.push_str(part.trim_end_matches('\n'));
        out.push('\n');
        for k in 0..per_gpu {
            let pid = USAGE_FIRST_PID + g as u32 * per_gpu + k;
            let _ = writeln!(out, "proc compute {pid} {}\nutil {pid} {} {}", 256 * (k + 1), 10 + k, 5 + k);
        }
    }
    out
}

/// Runs benches/usage-read.c in the release's chroot on `plugin` for
/// `polls` polls; with `calls`, the stand-in logs the NVML calls of all
/// polls but the first there; with `callgrind`, under the chroot's
/// callgrind, counting inside gpu_p_usage_read only.  Returns the
/// program's line ("memory_bytes ... util ...") and the instructions.
fn usage_run(root: &Chroot, dir: &Path, plugin: &Path, polls: u32, calls: Option<&Path>, callgrind: bool) -> Result<(String, Option<f64>), String> {
    let full = ["slurm-wlm", "slurm"]
        .iter()
        .map(|d| format!("/usr/lib/{}/{d}/libslurmfull.so", harness::chroot::triplet()))
        .find(|p| root.host_path(p).is_file())
        .ok_or("no libslurmfull.so in the chroot")?;
    let driver = dir.join("usage-read").to_string_lossy().into_owned();
    let args = [full, plugin.to_string_lossy().into_owned(), polls.to_string(), USAGE_FIRST_PID.to_string(), USAGE_PIDS.to_string()];
    let mut cmd = if callgrind {
        let mut c = root.command("valgrind", &[dir.to_path_buf()]);
        c.args(["--tool=callgrind", "--toggle-collect=gpu_p_usage_read", "--callgrind-out-file=/dev/null", &driver]);
        c
    } else {
        root.command(&driver, &[dir.to_path_buf()])
    };
    cmd.args(&args);
    cmd.env("LD_LIBRARY_PATH", dir).env("GRES_RS_NVML_FIXTURE", dir.join("usage.conf"));
    if let Some(c) = calls {
        let _ = std::fs::remove_file(c);
        cmd.env("GRES_RS_NVML_CALLS", c);
    }
    let out = cmd.output().map_err(|e| format!("usage-read: {e}"))?;
    if !out.status.success() {
        return Err(format!("usage-read {} failed:\n{}", plugin.display(), text(&out)));
    }
    let line = String::from_utf8_lossy(&out.stdout).lines().find(|l| l.starts_with("memory_bytes ")).unwrap_or_default().to_string();
    let ir = text(&out).lines().find_map(|l| l.split_once("Collected :").and_then(|(_, n)| n.trim().parse::<f64>().ok()));
    Ok((line, ir))
}

/// The work directory: the driver, the fixture, the stand-in NVML, and
/// both plugin files (ours beside its library); (stock, ours) plugins.
fn usage_setup(bed: &TestBed, build: &testbed::OurBuild, stock: &Path) -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target").join(format!("bench-usage-{}", bed.version));
    fn e(what: &'static str) -> impl Fn(std::io::Error) -> String {
        move |err| format!("{what}: {err}")
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("stock")).map_err(e("work dir"))?;
    std::fs::create_dir_all(dir.join("ours")).map_err(e("work dir"))?;
    let src = root.join("benches/usage-read.c");
    // Built with the release's own declarations of what the plugins use.
    let headers = root.join("crates/slurm-abi/slurm-headers").join(&bed.series);
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-rdynamic", "-I"])
        .arg(&headers)
        .arg("-o")
        .arg(dir.join("usage-read"))
        .arg(&src)
        .arg("-ldl")
        .output()
        .map_err(e("cc"))?;
    if !out.status.success() {
        return Err(format!("cc {}:\n{}", src.display(), text(&out)));
    }
    std::fs::write(dir.join("usage.conf"), usage_fixture()).map_err(e("fixture"))?;
    std::fs::copy(standin::library_dir().join("libnvidia-ml.so.1"), dir.join("libnvidia-ml.so.1")).map_err(e("stand-in"))?;
    std::os::unix::fs::symlink("libnvidia-ml.so.1", dir.join("libnvidia-ml.so")).map_err(e("stand-in link"))?;
    std::fs::copy(stock, dir.join("stock/gpu_nvml.so")).map_err(e("stock gpu_nvml.so"))?;
    let files = build.plugin_files_dir.as_ref().ok_or("our build names no plugin files")?;
    std::fs::copy(files.join("gpu_nvml.so"), dir.join("ours/gpu_nvml.so")).map_err(e("our gpu_nvml.so"))?;
    std::fs::copy(build.lib_dir.join(BUILT_LIBRARY_FILE), dir.join("ours").join(LIBRARY_FILE)).map_err(e("our library"))?;
    Ok((dir.clone(), dir.join("stock/gpu_nvml.so"), dir.join("ours/gpu_nvml.so")))
}

/// `usage` rows: slurmstepd's jobacct_gather asks the gpu plugin about
/// every process of the step at every poll (gpu_p_usage_read, 23.02 on).
/// Stock queries each GPU's processes again for each process; ours reads
/// each GPU once a poll.  NVML calls and instructions per poll, 8 GPUs x
/// 64 processes, both plugins in one program against the same stand-in
/// (benches/usage-read.c); the accounted memory and utilisation must agree.
pub fn rows_usage(opts: &Opts, bed: &TestBed, build: &Result<testbed::OurBuild, String>, rows: &mut Vec<Row>) {
    let v = bed.version.as_str();
    let what = format!("gpu_p_usage_read for each of {USAGE_PIDS} processes of a step on 8 GPUs, one poll");
    let no = |metric: &str, note: String| Row::not_measured("usage", v, &what, metric, note);
    let (calls_metric, ir_metric) = ("NVML calls per poll", "instructions per poll in gpu_p_usage_read (valgrind callgrind)");
    let skip = |rows: &mut Vec<Row>, note: String| {
        rows.push(no(calls_metric, note.clone()));
        rows.push(no(ir_metric, note));
    };
    let Some(root) = &bed.chroot else {
        return skip(rows, format!("not measured: Slurm {v} has no gpu_p_usage_read (23.02 on)"));
    };
    let stock = match bed.stock_gpu_nvml() {
        Ok(p) => p,
        Err(e) => return skip(rows, format!("not measured: {e}")),
    };
    let build = match build {
        Ok(b) => b,
        Err(e) => return skip(rows, format!("not measured: our build for Slurm {v} failed: {e}")),
    };
    let setup = usage_setup(bed, build, &stock);
    let (dir, stock, ours) = match setup {
        Ok(s) => s,
        Err(e) => return skip(rows, format!("not measured: {e}")),
    };
    let polls = opts.n(6, 3) as u32;
    // NVML calls of polls 2..=polls, per poll; the sums must agree.
    let calls = |plugin: &Path, side: &str| -> Result<(f64, String), String> {
        let log = dir.join(format!("calls-{side}.log"));
        let (line, _) = usage_run(root, &dir, plugin, polls, Some(&log), false)?;
        let n = std::fs::read_to_string(&log).unwrap_or_default().lines().filter(|l| !l.starts_with("nvmlShutdown")).count();
        Ok((n as f64 / f64::from(polls - 1), line))
    };
    match (calls(&stock, "stock"), calls(&ours, "ours")) {
        (Ok((s, sl)), Ok((o, ol))) => {
            // 23.11's stock keeps only the last GPU's figures of a process
            // (docs/deviations.md, NVML 5); elsewhere both sum all GPUs.
            let agree = if bed.behaviour.usage_last_gpu_only {
                format!("stock keeps the last GPU's only: stock {sl}, ours {ol}")
            } else {
                assert_eq!(ol, sl, "ours accounts other GPU memory or utilisation than stock ({v})");
                format!("both sides accounted the same ({sl})")
            };
            rows.push(Row {
                group: "usage",
                release: v.into(),
                what: what.clone(),
                metric: calls_metric.into(),
                unit: "calls".into(),
                stock: Some(s),
                ours: Some(o),
                n: 1,
                goal: "<= 0.10".into(),
                note: format!("the NVML stand-in's call log, polls 2 to {polls}; {agree}"),
            });
        }
        (s, o) => rows.push(no(calls_metric, format!("not measured: {}", [s.err(), o.err()].into_iter().flatten().collect::<Vec<_>>().join("; ")))),
    }
    if root.tool("valgrind").is_none() {
        rows.push(no(ir_metric, "not measured: no valgrind in the chroot".into()));
        return;
    }
    // Instructions of polls 2..=polls: the run with them less the run of
    // the first poll alone (NVML's initialization).
    let per_poll = |plugin: &Path| -> Result<f64, String> {
        let one = usage_run(root, &dir, plugin, 1, None, true)?.1.ok_or("no callgrind total")?;
        let all = usage_run(root, &dir, plugin, polls, None, true)?.1.ok_or("no callgrind total")?;
        Ok((all - one) / f64::from(polls - 1))
    };
    match (per_poll(&stock), per_poll(&ours)) {
        (Ok(s), Ok(o)) => rows.push(Row {
            group: "usage",
            release: v.into(),
            what,
            metric: ir_metric.into(),
            unit: "k".into(),
            stock: Some(s / 1e3),
            ours: Some(o / 1e3),
            n: 1,
            goal: "<= 0.10".into(),
            note: format!("--toggle-collect=gpu_p_usage_read (the stand-in's work included); runs of {polls} polls less runs of 1"),
        }),
        (s, o) => rows.push(no(ir_metric, format!("not measured: {}", [s.err(), o.err()].into_iter().flatten().collect::<Vec<_>>().join("; ")))),
    }
}
