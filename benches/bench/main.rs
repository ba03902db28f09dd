//! Ours against the stock plugins, measured in one run on one machine.
//!
//! ```sh
//! cargo build --release --workspace        # the plugin files and gres-rs
//! cargo bench --bench bench                # table on stdout, JSON in target/bench.json
//! cargo bench --bench bench -- --quick --json /tmp/b.json --only slurmd-g,steps
//! GRES_RS_SLURM=24.11 cargo bench --bench bench -- --quick --only slurmd-g,steps
//! ```
//!
//! Releases: the `slurmd-g` and `steps` rows are measured on each Slurm
//! release of the test bed that `GRES_RS_SLURM` selects, as for the tests
//! (`22.05`, `24.11`, `26.05`, a list, or `all`; unset: the host's and
//! every chroot that is built), each row labelled with its release (also
//! in the JSON).  On a chroot's release (`harness::testbed::TestBed`) ours
//! is built for it (`target/slurm-<version>`), the daemons, `slurmd -G`
//! and valgrind are the chroot's, and `slurmd -G` is timed inside the
//! chroot (`Chroot::timed_runs`), where it needs munged (a started
//! cluster).  The NVML nodes need the test bed's stock gpu_nvml.so
//! (`TestBed::stock_gpu_nvml`; on the host `GRES_RS_STOCK_GPU_NVML` may
//! name another), with the stand-in's mig-minors where the driver has it
//! (`Chroot::command`; on the host the bench's own mount namespace).
//! `rss`, `check`, `health` and `steps-health` run on the host's release only.
//!
//! Rows (each a ratio ours/stock; lower is better for ours):
//! * `slurmd-g`: wall time of `slurmd -G` (median of many runs), on a
//!   fake-GPU node (`fake_gpus.conf`, both sides), and on NVML stand-in
//!   nodes (8 GPUs with NVLink; 8 GPUs x 7 MIG devices) where ours detects
//!   through NVML, and so does stock with the test bed's stock
//!   gpu_nvml.so (Debian ships none; the host's is built from Debian's
//!   source); plus the NVML calls of both sides
//!   (stock's also derived from gpu_nvml.c of 22.05.8, see
//!   `stock_nvml_calls`).
//!   For the fake-GPU node also the instructions `slurmd -G` executes, as
//!   counted by valgrind's callgrind (when valgrind is installed): exact
//!   where the wall time of this shared machine drifts by a few percent.
//! * `steps`: sequential `srun --gres=gpu:1 true` steps inside one
//!   allocation, time per step; and the instructions one such step's
//!   slurmstepd executes (callgrind), over a range of step environment
//!   sizes (`STEP_ENV_PADS`).
//! * `usage`: `gpu_p_usage_read` for 64 processes of a step on 8 GPUs,
//!   one poll of slurmstepd's job accounting (23.02 on): NVML calls and
//!   instructions (callgrind), both plugins in benches/usage-read.c in
//!   the release's chroot.
//! * `rss`: slurmd's resident memory once the node is idle.
//! * `check`: `gres-rs check --all-nodes` against `slurmd -G`, on a
//!   100,000-line gres.conf.
//!
//! Stock and ours alternate (stock, ours, ours, stock, ...) and medians are
//! reported, to keep a shared machine's noise out of the ratios (a step's
//! instructions: the mean over step environment sizes, `STEP_ENV_PADS`).  Needs
//! root and Debian's Slurm packages, like the real-Slurm tests.
//!
//! The code: `options` (the command line), `row` and `stats` (a row of
//! the report, the sides and their samples), `exec`, `gdir` (`slurmd -G`
//! in a prepared directory), `nvml_node` (the NVML stand-in's nodes),
//! `families` (one module per group of rows), `report` (the table and the
//! JSON) and `self_test` (what `cargo test --bench bench` checks).

mod exec;
mod families;
mod gdir;
mod nvml_node;
mod options;
mod report;
mod row;
mod self_test;
mod stats;

use families::check::rows_check;
use families::health::rows_health;
use families::rss::rows_rss;
use families::slurmd_g::rows_slurmd_g;
use families::steps::rows_steps;
use families::steps_health::rows_steps_health;
use families::usage::rows_usage;
use gres_test_harness as harness;
use harness::testbed::{Selection, TestBed};
use harness::{prereq_problems, stock_plugin_dir, testbed, tool, BUILT_LIBRARY_FILE};
use nvml_node::mig_minors_in_place;
use options::Opts;
use report::{cmd_line, json, machine, table};
use row::Row;
use self_test::self_test;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// The releases `GRES_RS_SLURM` selects (as for the tests: unset, empty
/// or `all` is the host's and every chroot that is built), opened, and a
/// line for each selected one that cannot be (a chroot not built).  An
/// explicitly named release that cannot be opened ends the bench.
fn test_beds() -> (Vec<TestBed>, Vec<String>) {
    let sel = Selection::from_env().unwrap_or_else(|e| {
        eprintln!("bench: {e}");
        std::process::exit(2)
    });
    let (mut beds, mut skipped) = (Vec::new(), Vec::new());
    for series in testbed::all_series() {
        if !sel.selects(series) {
            continue;
        }
        match TestBed::open(series) {
            Ok(b) => beds.push(b),
            Err(e) if sel == Selection::All => {
                eprintln!("bench: Slurm {series} skipped: {e}");
                skipped.push(format!("Slurm {series} not measured ({e})"));
            }
            Err(e) => {
                eprintln!("bench: GRES_RS_SLURM selects Slurm {series}, which cannot be opened: {e}");
                std::process::exit(2);
            }
        }
    }
    (beds, skipped)
}

/// `valgrind --version` of a release (the chroot's in a chroot).
fn valgrind_version(bed: &TestBed) -> String {
    let out = match &bed.chroot {
        Some(r) => match r.tool("valgrind") {
            Some(v) => r.command(v, &[]).arg("--version").output().ok(),
            None => None,
        },
        None => Command::new(tool("valgrind")).arg("--version").output().ok(),
    };
    out.filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_else(|| "none".into())
}

fn main() {
    let opts = Opts::parse();
    if !opts.bench {
        self_test();
        eprintln!("bench: checked its own rules; run it with `cargo bench --bench bench` (under `cargo test` it measures nothing)");
        return;
    }
    // Before any thread starts: the mount namespace for the MIG node.
    let mig_minors = mig_minors_in_place(&opts);
    let problems = prereq_problems();
    if !problems.is_empty() {
        eprintln!("bench: cannot run real Slurm here:\n  - {}", problems.join("\n  - "));
        std::process::exit(2);
    }
    // The release build of our plugins, unless told otherwise.
    if std::env::var_os("GRES_RS_PLUGIN_DIR").is_none() {
        let release = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release");
        if !release.join(BUILT_LIBRARY_FILE).is_file() {
            eprintln!("bench: {} lacks {BUILT_LIBRARY_FILE}; run `cargo build --release --workspace` first", release.display());
            std::process::exit(2);
        }
        std::env::set_var("GRES_RS_PLUGIN_DIR", &release);
    }
    let (beds, skipped) = test_beds();
    let started = cmd_line("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]);
    let t0 = Instant::now();
    let mut machine = machine();
    machine.push(("test bed".into(), beds.iter().map(TestBed::label).chain(skipped.iter().cloned()).collect::<Vec<_>>().join("; ")));
    machine.push(("valgrind".into(), beds.iter().map(|b| format!("{}: {}", b.version, valgrind_version(b))).collect::<Vec<_>>().join("; ")));
    // Our build for each release (a chroot's: built for it, once).
    let builds: Vec<Result<testbed::OurBuild, String>> =
        if opts.wants("slurmd-g") || opts.wants("steps") || opts.wants("usage") { beds.iter().map(TestBed::our_build).collect() } else { Vec::new() };
    let mut rows = Vec::new();
    if opts.wants("slurmd-g") {
        for (bed, build) in beds.iter().zip(&builds) {
            rows_slurmd_g(&opts, bed, build, mig_minors && bed.chroot.is_none(), &mut rows);
        }
    }
    if opts.wants("steps") {
        for (bed, build) in beds.iter().zip(&builds) {
            rows_steps(&opts, bed, build, &mut rows);
        }
    }
    if opts.wants("usage") {
        for (bed, build) in beds.iter().zip(&builds) {
            rows_usage(&opts, bed, build, &mut rows);
        }
    }
    // Memory and gres-rs check: the host's release only.
    let host = beds.iter().find(|b| b.chroot.is_none()).map(|b| b.version.clone());
    for (group, f) in [("rss", rows_rss as fn(&Opts, &str, &mut Vec<Row>)), ("check", rows_check), ("health", rows_health), ("steps-health", rows_steps_health)]
    {
        if !opts.wants(group) {
            continue;
        }
        match &host {
            Some(v) => f(&opts, v, &mut rows),
            None => rows.push(Row::not_measured(
                group,
                "-",
                group,
                "-",
                "not measured: measured on the host's release only, which GRES_RS_SLURM does not select".into(),
            )),
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("\nMachine:");
    for (k, v) in &machine {
        println!("- {k}: {v}");
    }
    println!(
        "\nPlugins: on the host ours from {}, stock from {}; in a chroot ours built for its release (target/slurm-<version>), stock the chroot's\n",
        std::env::var("GRES_RS_PLUGIN_DIR").unwrap_or_default(),
        stock_plugin_dir().display()
    );
    print!("{}", table(&rows));
    if let Some(dir) = opts.json.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    match std::fs::write(&opts.json, json(&machine, &rows, &started, secs)) {
        Ok(()) => println!("\nJSON: {} ({secs:.0} s)", opts.json.display()),
        Err(e) => eprintln!("bench: writing {}: {e}", opts.json.display()),
    }
}
