//! `gres-rs check` on configurations whose files are not what they seem:
//! an `Include` (or gres.conf itself, or fake_gpus.conf) that is
//! `/dev/zero`, a FIFO, a directory or a 10 GB sparse file, and long
//! chains of includes.  slurmd's parser (`s_p_parse_file`) reads a file of
//! size 0 (a device, a FIFO) and a directory as empty files, allocates and
//! reads a large regular file (from 2 GiB on, as empty: its buffer size
//! wraps as an `int`), and follows includes until it runs out of file
//! descriptors.  `check` accepts what slurmd accepts, with a warning that
//! names the file; an include beyond its bound is an error (not fatal:
//! slurmd reads it) saying that the file was not checked; it never blocks
//! and its memory stays bounded.
//!
//! Every run is under `prlimit --as` (1 GiB of address space) and a
//! timeout, so that a reader without bounds fails the test instead of
//! taking the machine's memory or hanging it.  No Slurm daemon is needed.

#![cfg(feature = "cli")]

use gres_test_harness::TempDir as Dir;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GRES_RS: &str = env!("CARGO_BIN_EXE_gres-rs");

/// Address space a check may use: far more than it needs, far less than
/// reading /dev/zero until memory runs out.
const ADDRESS_SPACE: u64 = 1 << 30;

fn temp_dir(name: &str) -> Dir {
    Dir::new(&format!("gres-rs-hostile-{}-{name}", std::process::id()))
}

const SLURM: &str = "GresTypes=gpu\nNodeName=n1 CPUs=8 Gres=gpu:2\n";
const GRES: &str = "Name=gpu File=/dev/nvidia[0-1]\n";

/// A configuration whose gres.conf includes `target` (a path in the
/// directory, or an absolute one).
fn including(name: &str, target: &str) -> Dir {
    let d = temp_dir(name);
    fs::write(d.0.join("slurm.conf"), SLURM).unwrap();
    fs::write(d.0.join("gres.conf"), format!("{GRES}Include {target}\n")).unwrap();
    d
}

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(st.success(), "mkfifo {}", path.display());
}

fn sparse(path: &Path, len: u64) {
    fs::File::create(path).unwrap().set_len(len).unwrap();
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `gres-rs check --node n1 --format slurmd` on the configuration in `dir`, under the
/// address-space limit, killed after 60 s.
fn check(dir: &Dir) -> Run {
    let slurm = dir.0.join("slurm.conf");
    let out_path = dir.0.join("check.out");
    let err_path = dir.0.join("check.err");
    let mut child = Command::new("prlimit")
        .arg(format!("--as={ADDRESS_SPACE}"))
        .arg("--")
        .arg(GRES_RS)
        .args(["check", "--node", "n1", "--format", "slurmd", "--slurm-conf"])
        .arg(&slurm)
        .env_remove("SLURM_CONF")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gres-rs check did not end within 60 s (blocked reading a file?)\n{}", fs::read_to_string(&err_path).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
    Run { code: status.code(), stdout: read(&out_path), stderr: read(&err_path) }
}

/// The check accepts the configuration (the GPUs of gres.conf), with
/// a warning containing `warning`.
#[track_caller]
fn accepted_with_warning(run: &Run, warning: &str) {
    assert_eq!(run.code, Some(0), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("\nGres Name=gpu Type=(null) Count=2 Index=0 ID=7696487 File=/dev/nvidia[0-1] (null)\n"), "{}", run.stdout);
    assert!(run.stderr.contains(&format!("warning: {warning}")), "no warning \"{warning}\" in:\n{}", run.stderr);
    assert!(run.stderr.ends_with("0 fatal, 0 errors, 1 warning\n"), "{}", run.stderr);
}

#[test]
fn include_of_dev_zero_reads_as_empty_with_a_warning() {
    let d = including("zero", "/dev/zero");
    accepted_with_warning(&check(&d), "Include /dev/zero: a character device; slurmd reads it as an empty file");
}

#[test]
fn include_of_a_symlink_to_dev_zero_names_the_link() {
    let d = including("zero-link", "zero.conf");
    symlink("/dev/zero", d.0.join("zero.conf")).unwrap();
    let name = d.0.join("zero.conf");
    accepted_with_warning(&check(&d), &format!("Include {}: a character device; slurmd reads it as an empty file", name.display()));
}

#[test]
fn include_of_a_fifo_does_not_block() {
    let d = including("fifo", "pipe.conf");
    mkfifo(&d.0.join("pipe.conf"));
    let name = d.0.join("pipe.conf");
    accepted_with_warning(&check(&d), &format!("Include {}: a FIFO; slurmd reads it as an empty file", name.display()));
}

#[test]
fn include_of_a_directory_reads_as_empty_with_a_warning() {
    let d = including("dir", "sub");
    fs::create_dir(d.0.join("sub")).unwrap();
    let name = d.0.join("sub");
    accepted_with_warning(&check(&d), &format!("Include {}: a directory; slurmd reads it as an empty file", name.display()));
}

/// An include larger than the bound is not read: an error (slurmd reads
/// it, so not a fatal one) that names it and says what slurmd does.
#[track_caller]
fn not_checked(run: &Run, file: &Path, why: &str) {
    assert_eq!(run.code, Some(1), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let expected = format!("error: Include {} not checked: {why}", file.display());
    assert!(run.stderr.contains(&expected), "no \"{expected}\" in:\n{}", run.stderr);
    assert!(run.stderr.ends_with("0 fatal, 1 error, 0 warnings\n"), "{}", run.stderr);
    assert!(run.stdout.contains("\nGres Name=gpu Type=(null) Count=2 Index=0 ID=7696487 File=/dev/nvidia[0-1] (null)\n"), "{}", run.stdout);
}

#[test]
fn include_of_a_10_gb_sparse_file_is_not_read() {
    let d = including("sparse", "big.conf");
    let big = d.0.join("big.conf");
    sparse(&big, 10 << 30);
    let why = "10737418240 bytes, more than the 16777216 read \
               (slurmd allocates a 10737418241-byte line buffer, whose size wraps to -2147483647 as an int: it reads the file as empty)";
    not_checked(&check(&d), &big, why);
}

#[test]
fn include_of_a_17_mib_file_is_not_read() {
    let d = including("17mib", "big.conf");
    let big = d.0.join("big.conf");
    // Comment lines of 100 bytes, 17 MiB in all.
    fs::write(&big, format!("{}\n", "#".repeat(99)).repeat((17 << 20) / 100)).unwrap();
    let len = fs::metadata(&big).unwrap().len();
    not_checked(&check(&d), &big, &format!("{len} bytes, more than the 16777216 read (slurmd allocates a {}-byte line buffer and reads it)", len + 1));
}

#[test]
fn gres_conf_that_is_dev_zero_reads_as_empty_with_a_warning() {
    let d = temp_dir("main-zero");
    fs::write(d.0.join("slurm.conf"), "GresTypes=gpu\nNodeName=n1 CPUs=8\n").unwrap();
    symlink("/dev/zero", d.0.join("gres.conf")).unwrap();
    let run = check(&d);
    assert_eq!(run.code, Some(0), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let expected = format!("warning: {}: a character device; slurmd reads it as an empty file", d.0.join("gres.conf").display());
    assert!(run.stderr.contains(&expected), "no \"{expected}\" in:\n{}", run.stderr);
}

#[test]
fn slurm_conf_include_of_a_fifo_reads_as_empty_with_a_warning() {
    let d = temp_dir("slurm-fifo");
    fs::write(d.0.join("slurm.conf"), format!("{SLURM}Include pipe.conf\n")).unwrap();
    fs::write(d.0.join("gres.conf"), GRES).unwrap();
    mkfifo(&d.0.join("pipe.conf"));
    let name = d.0.join("pipe.conf");
    accepted_with_warning(&check(&d), &format!("Include {}: a FIFO; slurmd reads it as an empty file", name.display()));
}

#[test]
fn fake_gpus_conf_that_is_dev_zero_is_an_error_naming_it() {
    let d = temp_dir("fake-zero");
    fs::write(d.0.join("slurm.conf"), SLURM).unwrap();
    fs::write(d.0.join("gres.conf"), GRES).unwrap();
    symlink("/dev/zero", d.0.join("fake_gpus.conf")).unwrap();
    let run = check(&d);
    assert_eq!(run.code, Some(1), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let expected = format!("Unable to read \"{}\": a character device, not a regular file", d.0.join("fake_gpus.conf").display());
    assert!(run.stderr.contains(&expected), "no \"{expected}\" in:\n{}", run.stderr);
}

/// gres.conf, then `depth` files each including the next.
fn chain(name: &str, depth: usize) -> Dir {
    let d = temp_dir(name);
    fs::write(d.0.join("slurm.conf"), SLURM).unwrap();
    fs::write(d.0.join("gres.conf"), format!("{GRES}Include c1.conf\n")).unwrap();
    for i in 1..=depth {
        let next = if i < depth { format!("Include c{}.conf\n", i + 1) } else { String::new() };
        fs::write(d.0.join(format!("c{i}.conf")), format!("# level {i}\n{next}")).unwrap();
    }
    d
}

#[test]
fn include_chains_as_deep_as_slurmd_follows_are_read() {
    for depth in [100, 1000] {
        let d = chain(&format!("chain-{depth}"), depth);
        let run = check(&d);
        assert_eq!(run.code, Some(0), "depth {depth}: stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
        assert!(run.stderr.ends_with("0 fatal, 0 errors, 0 warnings\n"), "depth {depth}: {}", run.stderr);
    }
}

#[test]
fn include_chain_deeper_than_slurmd_follows_is_refused() {
    let d = chain("chain-1001", 1001);
    let run = check(&d);
    assert_eq!(run.code, Some(1), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    let expected = format!("Include of \"{}\" nests deeper than 1000 files", d.0.join("c1001.conf").display());
    assert!(run.stderr.contains(&expected), "no \"{expected}\" in:\n{}", run.stderr);
}

#[test]
fn include_cycle_is_still_refused() {
    let d = temp_dir("cycle");
    fs::write(d.0.join("slurm.conf"), SLURM).unwrap();
    fs::write(d.0.join("gres.conf"), format!("{GRES}Include a.conf\n")).unwrap();
    fs::write(d.0.join("a.conf"), "Include b.conf\n").unwrap();
    fs::write(d.0.join("b.conf"), "Include a.conf\n").unwrap();
    let run = check(&d);
    assert_eq!(run.code, Some(1), "stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("is a cycle"), "{}", run.stderr);
}
