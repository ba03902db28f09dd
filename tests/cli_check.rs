//! `gres-rs check` against the real `slurmd -G` (stock plugins) of every
//! release of the test bed (`per_release!`, `GRES_RS_SLURM`), `check`
//! told that release (`--slurm-release <version>`), on every
//! configuration of `tests/corpus/` and `examples/`:
//!
//! - whatever slurmd refuses (it stops), `check` refuses (a fatal problem),
//!   and the other way round;
//! - for whatever slurmd accepts, `check` predicts the same `Gres Name=...`
//!   lines, in the same order.
//!
//! Each corpus case is a directory with `gres.conf`, a `slurm.conf`
//! fragment (`GresTypes=` and the node's `NodeName={NODE} ...` line; other
//! lines are added to the harness's slurm.conf), optionally
//! `fake_gpus.conf`, and `case` (`expect=ok|fatal`: what slurmd does,
//! `devices=N`: fake GPU device nodes `{DEV}/nvidia0..N-1`, 4 by default).
//! Files may use the harness's placeholders `{DEV}`, `{ETC}`, `{NODE}`.
//!
//! Examples are real configurations (several nodes, `/dev/...` files): for
//! each `NodeName` line with a `Gres=`, its first node is checked, with the
//! example's device files made as device nodes in a test directory.
//!
//! Needs root and the Debian Slurm packages (see tests/harness); skipped
//! otherwise.  The harness keeps `slurmd -G`'s files (GRES_RS_KEEP) so that
//! `check` reads exactly the files slurmd read; this test removes them.
//! The examples' device nodes are made under `/dev/shm`, which a test-bed
//! chroot sees at the same path (its `/dev` is the host's; its `/tmp` a
//! tmpfs of its own).

#![cfg(feature = "cli")]

use gres_test_harness as harness;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use harness::*;

const GRES_RS: &str = env!("CARGO_BIN_EXE_gres-rs");

/// `key=value` words of a slurm.conf line.
fn pairs(line: &str) -> Vec<(String, String)> {
    line.split_whitespace().filter_map(|w| w.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A slurm.conf: its single settings and its node lines (with the
/// `NodeName=DEFAULT` options they inherit).
struct SlurmText {
    settings: Vec<(String, String)>,
    nodes: Vec<(String, Vec<(String, String)>)>,
}

fn read_slurm_conf(text: &str) -> SlurmText {
    let mut out = SlurmText { settings: Vec::new(), nodes: Vec::new() };
    let mut defaults: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let p = pairs(line);
        let Some((key, value)) = p.first() else {
            continue;
        };
        if key.eq_ignore_ascii_case("NodeName") {
            if value.eq_ignore_ascii_case("DEFAULT") {
                defaults.extend(p[1..].iter().cloned());
            } else {
                let mut options = defaults.clone();
                options.extend(p[1..].iter().cloned());
                out.nodes.push((value.clone(), options));
            }
        } else if !key.eq_ignore_ascii_case("PartitionName") {
            out.settings.extend(p);
        }
    }
    out
}

fn get<'a>(options: &'a [(String, String)], key: &str) -> Option<&'a str> {
    options.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
}

/// A harness configuration for one node line of a slurm.conf.
fn node_config(options: &[(String, String)], devices: u32) -> ClusterConfig {
    let mut cfg = ClusterConfig::gpus(PluginSet::Stock, devices);
    cfg.node_gres = get(options, "Gres").map(str::to_string);
    let num = |k: &str| get(options, k).and_then(|v| v.parse::<u32>().ok());
    let sockets = num("SocketsPerBoard").or_else(|| num("Sockets"));
    let cores = num("CoresPerSocket");
    let threads = num("ThreadsPerCore");
    match (num("CPUs"), sockets, cores, threads) {
        (Some(cpus), None, None, None) => cfg = cfg.with_cpus(1, cpus, 1),
        (cpus, s, c, t) => {
            cfg = cfg.with_cpus(s.unwrap_or(1), c.unwrap_or(1), t.unwrap_or(1));
            if let Some(cpus) = cpus {
                cfg.cpus = cpus;
            }
        }
    }
    if let Some(b) = num("Boards") {
        cfg.boards = b;
    }
    const HANDLED: [&str; 12] = [
        "Gres",
        "CPUs",
        "Sockets",
        "SocketsPerBoard",
        "CoresPerSocket",
        "ThreadsPerCore",
        "Boards",
        "RealMemory",
        "State",
        "NodeHostname",
        "NodeAddr",
        "Procs",
    ];
    cfg.extra_node_conf =
        options.iter().filter(|(k, _)| !HANDLED.iter().any(|h| h.eq_ignore_ascii_case(k))).map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
    cfg
}

/// One configuration to compare.
struct Case {
    name: String,
    cfg: ClusterConfig,
    /// What slurmd does, when the case says.
    expect: Option<bool>,
}

fn corpus_case(dir: &Path) -> Case {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let read = |f: &str| fs::read_to_string(dir.join(f));
    let meta = read("case").unwrap_or_default();
    let meta_value = |k: &str| meta.lines().find_map(|l| l.strip_prefix(&format!("{k}=")).map(str::trim).map(str::to_string));
    let devices = meta_value("devices").and_then(|d| d.parse().ok()).unwrap_or(4);
    let slurm = read_slurm_conf(&read("slurm.conf").unwrap_or_else(|e| panic!("{name}: slurm.conf: {e}")));
    let (names, options) = slurm.nodes.first().cloned().unwrap_or_else(|| ("{NODE}".into(), vec![]));
    let mut cfg = node_config(&options, devices);
    if names != "{NODE}" {
        cfg.node_name = names;
    }
    cfg.gres_types = String::new();
    for (k, v) in &slurm.settings {
        if k.eq_ignore_ascii_case("GresTypes") {
            cfg.gres_types = v.clone();
        } else {
            cfg.extra_slurm_conf.push(format!("{k}={v}"));
        }
    }
    cfg.gres_conf = read("gres.conf").unwrap_or_else(|e| panic!("{name}: gres.conf: {e}"));
    cfg.fake_gpus_conf = read("fake_gpus.conf").ok();
    let expect = meta_value("expect").map(|e| e == "ok");
    Case { name: format!("corpus/{name}"), cfg, expect }
}

/// Absolute `/dev/...` paths named in a text (hostlists expanded by the
/// caller's gres.conf reading; here, brackets expanded by hand).
fn dev_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || c == '=' || c == ',' || c == '|') {
        if let Some(rest) = word.strip_prefix("/dev/") {
            let full = format!("/dev/{rest}");
            match (full.find('['), full.find(']')) {
                (Some(open), Some(close)) => {
                    let (prefix, body) = (&full[..open], &full[open + 1..close]);
                    for part in body.split(',') {
                        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
                        let (lo, hi): (u32, u32) = (lo.parse().unwrap(), hi.parse().unwrap());
                        out.extend((lo..=hi).map(|n| format!("{prefix}{n}")));
                    }
                }
                _ => out.push(full),
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Device nodes for every `/dev/` file of an example, under `root`.
fn make_devices(root: &Path, text: &str) {
    for (i, path) in dev_paths(text).iter().enumerate() {
        let p = root.join(path.trim_start_matches("/dev/"));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        if !p.exists() {
            let st = Command::new("mknod").arg(&p).arg("c").arg("195").arg(i.to_string()).status().unwrap();
            assert!(st.success(), "mknod {}", p.display());
        }
    }
}

fn example_cases(dev_root: &Path) -> Vec<Case> {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut dirs: Vec<PathBuf> =
        fs::read_dir(&examples).unwrap().map(|e| e.unwrap().path()).filter(|p| p.join("gres.conf").is_file() && p.join("slurm.conf").is_file()).collect();
    dirs.sort();
    let dev = format!("{}/", dev_root.display());
    let mut out = Vec::new();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let gres = fs::read_to_string(dir.join("gres.conf")).unwrap();
        make_devices(dev_root, &gres);
        let slurm = read_slurm_conf(&fs::read_to_string(dir.join("slurm.conf")).unwrap());
        for (names, options) in slurm.nodes.iter().filter(|(_, o)| get(o, "Gres").is_some()) {
            let first = names.split(['[', ',']).next().unwrap().to_string();
            let first = match names.find('[') {
                Some(open) => {
                    let body = &names[open + 1..names.find(']').unwrap()];
                    let lo = body.split([',', '-']).next().unwrap();
                    format!("{first}{lo}")
                }
                None => first,
            };
            let mut cfg = node_config(options, 0);
            cfg.node_name = first.clone();
            cfg.gres_types = get(&slurm.settings, "GresTypes").unwrap_or("").to_string();
            cfg.gres_conf = gres.replace("/dev/", &dev);
            cfg.fake_gpus_conf = fs::read_to_string(dir.join("fake_gpus.conf")).ok().map(|f| f.replace("/dev/", &dev));
            out.push(Case { name: format!("examples/{name} node {first}"), cfg, expect: Some(true) });
        }
    }
    out
}

/// What `gres-rs check` says about the node of `cfg`, in `dir`.
struct CheckResult {
    starts: bool,
    lines: Vec<String>,
    output: String,
}

/// `gres-rs check` of the node, run where slurmd runs: for a test-bed
/// chroot inside it (its PluginDir is a path there), the cluster
/// directory and the tool's own directory bound at the same paths.
fn run_check(etc: &Path, node: &str, dir: &Path, release: &str, chroot: Option<&harness::chroot::Chroot>) -> CheckResult {
    let mut cmd = match chroot {
        None => Command::new(GRES_RS),
        Some(root) => {
            let tool_dir = Path::new(GRES_RS).parent().expect("gres-rs has a directory").to_path_buf();
            root.command(GRES_RS, &[dir.to_path_buf(), tool_dir])
        }
    };
    let out = cmd
        .arg("check")
        .arg("--slurm-release")
        .arg(release)
        .arg("--slurm-conf")
        .arg(etc.join("slurm.conf"))
        .arg("--node")
        .arg(node)
        .arg("--format")
        .arg("json")
        .output()
        .expect("running gres-rs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("gres-rs check output is not JSON ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    let starts = v["summary"]["fatal"].as_u64() == Some(0);
    let dir_text = dir.to_string_lossy();
    let lines = v["nodes"]
        .as_array()
        .and_then(|n| n.first())
        .and_then(|n| n["lines"].as_array())
        .map(|l| l.iter().map(|s| s.as_str().unwrap_or("").replace(&*dir_text, "$DIR")).collect())
        .unwrap_or_default();
    let code = out.status.code();
    assert!(matches!(code, Some(0) | Some(1)), "gres-rs check exit status {code:?}:\n{stdout}");
    assert_eq!(code == Some(1), v["summary"]["fatal"].as_u64() != Some(0) || v["summary"]["errors"].as_u64() != Some(0));
    CheckResult { starts, lines, output: stdout }
}

/// One release at a time: the releases' tests share the process-wide
/// GRES_RS_KEEP and would only wait for each other's clusters anyway.
static ONE_RELEASE: std::sync::Mutex<()> = std::sync::Mutex::new(());

per_release! {
    fn check_agrees_with_slurmd_g(bed) {
    let _one = ONE_RELEASE.lock().unwrap_or_else(|e| e.into_inner());
    // Keep slurmd -G's directories, to run check on the very same files.
    // (Only this test runs in this binary, one release at a time: no
    // other thread reads the environment meanwhile.)
    std::env::set_var("GRES_RS_KEEP", "1");
    let dev_root = Path::new("/dev/shm").join(format!("gres-rs-cli-check-{}-{}", std::process::id(), bed.series));
    let _ = fs::remove_dir_all(&dev_root);
    fs::create_dir_all(&dev_root).unwrap();

    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&corpus).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    dirs.sort();
    let mut cases: Vec<Case> = dirs.iter().map(|d| corpus_case(d)).collect();
    cases.extend(example_cases(&dev_root));
    assert!(cases.len() >= 40, "corpus and examples: {} cases", cases.len());

    let mut failures = Vec::new();
    let (mut accepted, mut refused) = (0, 0);
    for case in &cases {
        let g = Cluster::slurmd_g(&case.cfg);
        let slurmd_starts = g.output.ok();
        let check = run_check(&g.dir.join("etc"), &case.cfg.node_name, &g.dir, &bed.version, bed.chroot.as_ref());
        let slurmd_lines = g.gres_lines();
        let mut problems = Vec::new();
        if let Some(expect) = case.expect {
            if expect != slurmd_starts {
                problems.push(format!("the case expects slurmd to {}", if expect { "start" } else { "stop" }));
            }
        }
        if slurmd_starts != check.starts {
            problems.push(format!(
                "slurmd {}, check says it {}",
                if slurmd_starts { "starts" } else { "stops" },
                if check.starts { "starts" } else { "stops" }
            ));
        } else if slurmd_starts && slurmd_lines != check.lines {
            problems.push(format!(
                "GRES lines differ:\n  slurmd -G:\n    {}\n  gres-rs check:\n    {}",
                slurmd_lines.join("\n    "),
                check.lines.join("\n    ")
            ));
        }
        if slurmd_starts {
            accepted += 1;
        } else {
            refused += 1;
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {}\n--- slurmd -G ---\n{}\n--- gres-rs check ---\n{}", case.name, problems.join("; "), g.normalized(), check.output));
        }
        let _ = fs::remove_dir_all(&g.dir);
    }
    let _ = fs::remove_dir_all(&dev_root);
    eprintln!("cli_check: {} configurations: {accepted} accepted and {refused} refused by slurmd {}", cases.len(), bed.version);
    assert!(failures.is_empty(), "{} of {} configurations disagree on {}:\n\n{}", failures.len(), cases.len(), bed.label(), failures.join("\n\n"));
    assert!(accepted > 0 && refused > 0);
    }
}
