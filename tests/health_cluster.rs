//! `gres-rs health` as slurmd runs it (as root, no arguments, only
//! `SLURMD_NODENAME` in its environment; here a wrapper that points it at
//! the test's files), against a real slurmctld and slurmd of every release
//! of the test bed (`GRES_RS_SLURM`): for each class of fault, injected
//! through the NVML stand-in or a recorded kernel log, the node's state
//! and reason in Slurm after the check, that the next job stays pending on
//! a drained node, that application XIDs drain nothing, that an admin's
//! resume and an admin's drain are respected, and that a recoverable drain
//! is resumed once the check is clean.
//!
//! Needs root, the Debian Slurm packages and `cc` (crates/test-harness);
//! skipped otherwise.

use gres_test_harness as harness;
use gres_test_harness::standin;

use harness::*;
use std::fs;
use std::path::PathBuf;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The node's files as the check sees them: a copy of `gres-rs` and the
/// wrapper slurmd would run, 8 GPU device files and 8 NVIDIA GPUs on a
/// PCI bus (the stand-in's 8-GPU node), the kernel log, the state
/// directory.  In the stand-in's scratch directory, which a chroot's
/// daemons see at the same path.
struct Node {
    dir: PathBuf,
    /// The copy of `gres-rs` the wrapper runs (one node's, or shared).
    bin: PathBuf,
    /// More arguments for `gres-rs health` (e.g. `--config FILE`).
    args: String,
}

impl Node {
    fn new(tag: &str) -> Node {
        let dir = standin::scratch_dir().join(format!("health-{tag}"));
        let bin = dir.join("gres-rs");
        let node = Node::files(tag, bin.clone());
        fs::copy(env!("CARGO_BIN_EXE_gres-rs"), &bin).unwrap();
        node
    }

    /// A node that runs `other`'s copy of `gres-rs` (a cluster of many
    /// nodes need not copy it for each), with `args` added.
    fn beside(tag: &str, other: &Node, args: &str) -> Node {
        Node { args: args.to_string(), ..Node::files(tag, other.bin.clone()) }
    }

    fn files(tag: &str, bin: PathBuf) -> Node {
        let dir = standin::scratch_dir().join(format!("health-{tag}"));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("dev")).unwrap();
        for i in 0..8 {
            fs::write(dir.join(format!("dev/nvidia{i}")), "").unwrap();
            let p = dir.join(format!("sys/bus/pci/devices/0000:{:02x}:00.0", 0x10 + i));
            fs::create_dir_all(&p).unwrap();
            fs::write(p.join("vendor"), "0x10de\n").unwrap();
            fs::write(p.join("class"), "0x030200\n").unwrap();
        }
        Node { dir, bin, args: String::new() }
    }

    /// The program slurmd would run: `gres-rs health` on this node's files,
    /// with the stand-in playing `fixture` and `kmsg` as the kernel log.
    fn wrapper(&self, c: &Cluster, fixture: &str, kmsg: &str) -> PathBuf {
        let d = self.dir.display();
        fs::write(self.dir.join("kmsg.log"), kmsg).unwrap();
        let script = format!(
            "#!/bin/sh\nexec env SLURM_CONF={conf} GRES_RS_NVML_FIXTURE={fixture} {bin} health --format json --nvml-timeout 1000 \
             --nvml-lib {lib} --kmsg {d}/kmsg.log --state-dir {d}/state --dev-dir {d}/dev --sys-dir {d}/sys {args}\n",
            conf = c.layout.slurm_conf().display(),
            bin = self.bin.display(),
            args = self.args,
            fixture = standin::fixture(fixture).display(),
            lib = standin::library().display(),
        );
        let path = self.dir.join("health-check");
        fs::write(&path, script).unwrap();
        let _ = std::process::Command::new("chmod").arg("755").arg(&path).status();
        path
    }

    /// Runs the check as slurmd does, beside slurmd (in its chroot); its
    /// exit status and JSON document.
    fn check(&self, c: &Cluster, fixture: &str, kmsg: &str) -> (Option<i32>, serde_json::Value) {
        let cmd = c.command_beside(Daemon::Slurmd, "/usr/bin/env").unwrap_or_else(|e| panic!("{e}"));
        self.run(cmd, c, &c.config.node_name, fixture, kmsg)
    }

    /// The same for `node` of several, from the cluster's hub (where
    /// slurmctld and every node are reachable).
    fn check_node(&self, c: &Cluster, node: &str, fixture: &str, kmsg: &str) -> (Option<i32>, serde_json::Value) {
        self.run(c.command("/usr/bin/env"), c, node, fixture, kmsg)
    }

    fn run(&self, cmd: std::process::Command, c: &Cluster, node: &str, fixture: &str, kmsg: &str) -> (Option<i32>, serde_json::Value) {
        let wrapper = self.wrapper(c, fixture, kmsg);
        run_wrapper(cmd, &wrapper, node)
    }
}

/// Runs a written wrapper as slurmd does for `node` (written beforehand:
/// a script being written while another thread starts a program may be
/// "busy" for exec).
fn run_wrapper(mut cmd: std::process::Command, wrapper: &std::path::Path, node: &str) -> (Option<i32>, serde_json::Value) {
    cmd.args(["-i", &format!("SLURMD_NODENAME={node}")]).arg(wrapper);
    let out = cmd.output().expect("run the health check");
    let doc = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), doc)
}

/// The node's state (lower case) and reason, as sinfo says.
fn node_state(c: &Cluster) -> (String, String) {
    state_of(c, &c.config.node_name)
}

fn state_of(c: &Cluster, node: &str) -> (String, String) {
    let out = c.sinfo(&["-h", "-N", "-n", node, "-o", "%T|%E"]).expect_ok("sinfo");
    let line = out.stdout.lines().next().unwrap_or_default().to_string();
    let (state, reason) = line.split_once('|').unwrap_or((&line, ""));
    (state.trim().to_ascii_lowercase(), reason.trim().to_string())
}

/// The admin puts the node back in service.
fn resume(c: &Cluster) {
    resume_node(c, &c.config.node_name);
}

fn resume_node(c: &Cluster, node: &str) {
    c.scontrol(&["update", &format!("NodeName={node}"), "State=RESUME"]).expect_ok("scontrol resume");
}

fn xid(code: u32, text: &str) -> String {
    format!("[ 1234.5678] NVRM: Xid (PCI:0000:41:00): {code}, pid=4242, name=python3, {text}\n")
}

/// One case of the matrix: the stand-in's fixture, the kernel log, the
/// verdict and what the reason must say (drains only).
struct Case {
    what: &'static str,
    fixture: &'static str,
    kmsg: String,
    verdict: &'static str,
    reason: &'static str,
}

fn matrix() -> Vec<Case> {
    let ok = "health_h100x8.conf";
    let case = |what, fixture, kmsg: String, verdict, reason| Case { what, fixture, kmsg, verdict, reason };
    vec![
        case("application xid 13", ok, xid(13, "Graphics SM Warp Exception"), "nothing", ""),
        case("application xid 31", ok, xid(31, "MMU Fault"), "nothing", ""),
        case("application xid 43", ok, xid(43, "Ch 00000008"), "nothing", ""),
        case("application xid 45", ok, xid(45, "Ch 00000008"), "nothing", ""),
        case("xid 48 double-bit ECC", ok, xid(48, "An uncorrectable double bit error"), "drain", "xid 48"),
        case("xid 63 row remap pending", ok, xid(63, "Row remapping event"), "warn", ""),
        case("xid 64 row remap failure", ok, xid(64, "Row remapping failure"), "drain", "xid 64"),
        case("xid 74 NVLink", ok, xid(74, "NVLink: fatal error"), "drain", "xid 74"),
        case("xid 79 fallen off the bus", ok, xid(79, "GPU has fallen off the bus."), "drain", "xid 79 (fallen off the bus) -> reboot node"),
        case("xid 94 contained ECC", ok, xid(94, "Contained ECC error"), "warn", ""),
        case("xid 95 uncontained ECC", ok, xid(95, "Uncontained ECC error"), "drain", "xid 95"),
        case("xid 119 GSP timeout", ok, xid(119, "Timeout waiting for RPC from GSP"), "drain", "xid 119"),
        case("volatile double-bit ECC", "health_dbe.conf", String::new(), "drain", "dbe"),
        case("pages pending retirement", "health_retired.conf", String::new(), "drain", "retire"),
        case("remap failure", "health_remap.conf", String::new(), "drain", "remap failure"),
        case("lost GPU", "health_lost.conf", String::new(), "drain", "gpu lost"),
        // A hang may pass: a warning until three checks in a row see it
        // (the lifecycle test below drains on the third).
        case("NVML hang, first check", "health_hang.conf", String::new(), "warn", ""),
        case("throttling", "health_throttle.conf", String::new(), "warn", ""),
    ]
}

fn cluster(bed: &testbed::TestBed, test: &str) -> Option<Cluster> {
    let cfg = ClusterConfig::gpus(PluginSet::Ours, 2).with_binds(standin::chroot_binds());
    let cfg = bed.ours_config(cfg, test)?;
    let c = Cluster::start(cfg);
    c.assert_ours_loaded(&["gres_gpu"]);
    Some(c)
}

per_release! {
    fn each_fault_gets_its_action_on_the_node(bed) {
        let Some(c) = cluster(bed, "each_fault_gets_its_action_on_the_node") else { return };
        let node = Node::new(&format!("matrix-{}", bed.series));
        for case in matrix() {
            let _ = fs::remove_dir_all(node.dir.join("state"));
            let (code, doc) = node.check(&c, case.fixture, &case.kmsg);
            assert_eq!(doc["verdict"], case.verdict, "{}: {doc:#}", case.what);
            let (state, reason) = node_state(&c);
            if case.verdict == "drain" {
                assert_eq!(code, Some(3), "{}: {doc:#}", case.what);
                assert!(state.contains("drain"), "{}: node {state}", case.what);
                assert!(reason.starts_with("gres-rs: ") && reason.contains(case.reason), "{}: reason {reason:?}", case.what);
                resume(&c);
            } else {
                assert!(!state.contains("drain"), "{}: node {state} ({reason})", case.what);
                assert_eq!(code, Some(if case.verdict == "warn" { 1 } else { 0 }), "{}: {doc:#}", case.what);
            }
        }
        // The GPU counts: a device file gone.
        let _ = fs::remove_dir_all(node.dir.join("state"));
        fs::remove_file(node.dir.join("dev/nvidia7")).unwrap();
        let (_, doc) = node.check(&c, "health_h100x8.conf", "");
        assert!(doc["reason"].as_str().unwrap_or("").contains("gpu count"), "{doc:#}");
        assert!(node_state(&c).0.contains("drain"));
        resume(&c);
        fs::write(node.dir.join("dev/nvidia7"), "").unwrap();
        // An NVLink seen up on a clean check, then down.
        let _ = fs::remove_dir_all(node.dir.join("state"));
        assert_eq!(node.check(&c, "health_h100x8.conf", "").0, Some(0));
        let (code, doc) = node.check(&c, "health_nvlink_down.conf", "");
        assert_eq!(code, Some(3), "{doc:#}");
        assert!(node_state(&c).1.contains("nvlink"), "{:?}", node_state(&c));
        resume(&c);
    }

    fn drains_are_kept_resumed_and_left_as_slurm_users_expect(bed) {
        let Some(c) = cluster(bed, "drains_are_kept_resumed_and_left_as_slurm_users_expect") else { return };
        let node = Node::new(&format!("lifecycle-{}", bed.series));
        let fell = xid(79, "GPU has fallen off the bus.");
        // Drained: the next job waits.
        assert_eq!(node.check(&c, "health_h100x8.conf", &fell).0, Some(3));
        let (out, id) = c.sbatch_submit(&["--gres=gpu:1", "-o", "/dev/null"], "hostname");
        let id = id.unwrap_or_else(|| panic!("sbatch: {out:?}"));
        std::thread::sleep(std::time::Duration::from_secs(2));
        let q = c.squeue(&["-h", "-j", &id.to_string(), "-o", "%T"]).expect_ok("squeue");
        assert_eq!(q.stdout.trim(), "PENDING", "the job on a drained node");
        c.scancel(&[&id.to_string()]);
        // The admin resumes it: the XID, reported once, drains no more.
        resume(&c);
        let (code, doc) = node.check(&c, "health_h100x8.conf", &fell);
        assert_eq!((code, doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc:#}");
        assert!(!node_state(&c).0.contains("drain"));
        // A recoverable fault (a hanging NVML call) is resumed once the
        // check is clean again.
        for _ in 0..2 {
            assert_eq!(node.check(&c, "health_hang.conf", &fell).0, Some(1), "a hang warns until it lasts");
        }
        assert_eq!(node.check(&c, "health_hang.conf", &fell).0, Some(3));
        assert!(node_state(&c).0.contains("drain"));
        let (code, doc) = node.check(&c, "health_h100x8.conf", &fell);
        assert_eq!((code, doc["verdict"].as_str()), (Some(0), Some("resume")), "{doc:#}");
        assert!(!node_state(&c).0.contains("drain"), "{:?}", node_state(&c));
        // An admin's drain is never touched: not by a fault, not by a clean check.
        c.scontrol(&["update", &format!("NodeName={}", c.config.node_name), "State=DRAIN", "Reason=maintenance window"]).expect_ok("drain");
        let (code, doc) = node.check(&c, "health_dbe.conf", &fell);
        assert_eq!((code, doc["verdict"].as_str()), (Some(3), Some("foreign")), "{doc:#}");
        assert_eq!(node_state(&c).1, "maintenance window");
        assert_eq!(node.check(&c, "health_h100x8.conf", &fell).1["verdict"], "foreign");
        assert_eq!(node_state(&c).1, "maintenance window");
        resume(&c);
    }

    fn one_bad_gpu_drains_one_node_and_the_guard_holds(bed) {
        let nodes = vec![NodeConfig::new("n1", 2, "gpu:2"), NodeConfig::new("n2", 2, "gpu:2"), NodeConfig::new("n3", 2, "gpu:2")];
        let mut cfg = ClusterConfig::multi(PluginSet::Ours, nodes).with_binds(standin::chroot_binds());
        cfg.gres_conf = (1..=3).map(|i| format!("NodeName=n{i} Name=gpu File={{DEV}}/n{i}/nvidia[0-1]\n")).collect();
        cfg.gres_types = "gpu".into();
        let Some(cfg) = bed.ours_config(bed.on(cfg), "one_bad_gpu_drains_one_node_and_the_guard_holds") else { return };
        let c = Cluster::start(cfg);
        c.assert_ours_loaded_on_every_node(&["gres_gpu"]);
        let fell = xid(79, "GPU has fallen off the bus.");
        let node = |n: &str| Node::new(&format!("guard-{}-{n}", bed.series));
        let (n1, n2, n3) = (node("n1"), node("n2"), node("n3"));
        // One bad GPU: its node only.
        assert_eq!(n1.check_node(&c, "n1", "health_h100x8.conf", &fell).0, Some(3));
        assert!(state_of(&c, "n1").0.contains("drain"));
        for n in ["n2", "n3"] {
            assert!(!state_of(&c, n).0.contains("drain"), "{n}: {:?}", state_of(&c, n));
        }
        assert_eq!(n2.check_node(&c, "n2", "health_h100x8.conf", "").1["verdict"], "nothing");
        // The same fault everywhere (a driver bug?): with one of three
        // nodes drained by gres-rs, the guard (10%, at least one node)
        // refuses to drain another.
        for (n, check) in [("n2", &n2), ("n3", &n3)] {
            let (code, doc) = check.check_node(&c, n, "health_h100x8.conf", &fell);
            assert_eq!((code, doc["verdict"].as_str()), (Some(4), Some("guard_refused")), "{n}: {doc:#}");
            assert_eq!(doc["guard"]["drained_by_gres_rs"], 1, "{n}: {doc:#}");
            assert!(!state_of(&c, n).0.contains("drain"), "{n}: {:?}", state_of(&c, n));
        }
        resume_node(&c, "n1");
    }

    /// Ten nodes find the same fault at the same moment (slurmctld runs
    /// the check on every node at once; a driver bug): with
    /// `guard_max_nodes = 2`, exactly two stay drained and the others exit
    /// 4, undrained, round after round.
    fn simultaneous_checks_drain_only_as_many_nodes_as_the_guard_allows(bed) {
        const NODES: usize = 10;
        let test = "simultaneous_checks_drain_only_as_many_nodes_as_the_guard_allows";
        let names: Vec<String> = (1..=NODES).map(|i| format!("g{i:02}")).collect();
        let nodes = names.iter().map(|n| NodeConfig::new(n, 2, "gpu:2")).collect();
        let mut cfg = ClusterConfig::multi(PluginSet::Ours, nodes).with_binds(standin::chroot_binds());
        cfg.gres_conf = names.iter().map(|n| format!("NodeName={n} Name=gpu File={{DEV}}/{n}/nvidia[0-1]\n")).collect();
        cfg.gres_types = "gpu".into();
        let Some(cfg) = bed.ours_config(bed.on(cfg), test) else { return };
        let t = Instant::now();
        let c = Cluster::start(cfg);
        eprintln!("{test}: {NODES} nodes up in {:.1?}", t.elapsed());
        let site = standin::scratch_dir().join(format!("health-guard-{}.conf", bed.series));
        fs::write(&site, "guard_max_nodes = 2\n").unwrap();
        let bin = Node::new(&format!("many-{}", bed.series));
        let args = format!("--config {}", site.display());
        let checks: Vec<Node> = names.iter().map(|n| Node::beside(&format!("many-{}-{n}", bed.series), &bin, &args)).collect();
        let fell = xid(79, "GPU has fallen off the bus.");
        for round in 1..=3 {
            // Fresh state: the XID is new to every node.  The wrappers are
            // written before any check starts.
            let wrappers: Vec<PathBuf> = checks
                .iter()
                .map(|n| {
                    let _ = fs::remove_dir_all(n.dir.join("state"));
                    n.wrapper(&c, "health_h100x8.conf", &fell)
                })
                .collect();
            let barrier = Barrier::new(NODES);
            let t = Instant::now();
            let results: Vec<(Option<i32>, serde_json::Value)> = std::thread::scope(|s| {
                let threads: Vec<_> = names
                    .iter()
                    .zip(&wrappers)
                    .map(|(n, w)| {
                        let (cmd, barrier) = (c.command("/usr/bin/env"), &barrier);
                        s.spawn(move || {
                            barrier.wait();
                            run_wrapper(cmd, w, n)
                        })
                    })
                    .collect();
                threads.into_iter().map(|t| t.join().expect("a check's thread")).collect()
            });
            let took = t.elapsed();
            let (mut kept, mut undone, mut refused) = (Vec::new(), 0, 0);
            for (n, (code, doc)) in names.iter().zip(&results) {
                match (code, doc["verdict"].as_str()) {
                    (Some(3), Some("drain")) => kept.push(n.as_str()),
                    (Some(4), Some("guard_refused")) => {
                        assert_eq!(doc["guard"]["limit"], 2, "{n}: {doc:#}");
                        assert!(doc["guard"]["drained_by_gres_rs"].as_u64().is_some_and(|d| d >= 2), "{n}: {doc:#}");
                        if doc["action"].as_str().is_some_and(|a| a.contains("drained and undone")) {
                            undone += 1;
                        } else {
                            assert!(doc["action"].is_null(), "{n}: {doc:#}");
                            refused += 1;
                        }
                    }
                    other => panic!("round {round}, {n}: {other:?}: {doc:#}"),
                }
            }
            eprintln!("{test}: round {round} in {took:.1?}: {kept:?} drained, {undone} drained and undone, {refused} refused before draining");
            let drained: Vec<&str> = names.iter().map(String::as_str).filter(|n| state_of(&c, n).0.contains("drain")).collect();
            assert_eq!(drained, kept, "round {round}: drained in Slurm, and the checks that say they drained");
            assert_eq!(kept.len(), 2, "round {round}: {results:#?}");
            for n in kept {
                let (_, reason) = state_of(&c, n);
                assert!(reason.starts_with("gres-rs: ") && reason.contains("xid 79"), "{n}: {reason:?}");
                resume_node(&c, n);
            }
        }
    }

    /// A fault found while slurmctld is away cannot be acted on (the
    /// node's state cannot be read: nothing to drain with); the next check,
    /// with slurmctld back and the same kernel log, drains for it, and
    /// after the admin's resume it is not reported again.  (A failing
    /// `scontrol` with a working `sinfo` is not arranged: the tool runs
    /// Slurm's commands from the system's directories only.)
    fn a_fault_found_while_slurmctld_is_away_drains_at_the_next_check(bed) {
        let test = "a_fault_found_while_slurmctld_is_away_drains_at_the_next_check";
        let Some(mut c) = cluster(bed, test) else { return };
        let node = Node::new(&format!("away-{}", bed.series));
        assert_eq!(node.check(&c, "health_h100x8.conf", "").0, Some(0));
        let dbe = xid(48, "An uncorrectable double bit error");
        assert!(c.stop_slurmctld().is_some(), "slurmctld was not running");
        let t = Instant::now();
        let (_, doc) = node.check(&c, "health_h100x8.conf", &dbe);
        eprintln!("{test}: the check without slurmctld took {:.1?}", t.elapsed());
        assert!(doc["action"].is_null(), "no scontrol without the node's state: {doc:#}");
        assert!(doc["findings"].as_array().is_some_and(|f| f.iter().any(|f| f["text"].as_str().is_some_and(|t| t.contains("xid 48")))), "{doc:#}");
        c.start_slurmctld().unwrap_or_else(|e| panic!("{e}\n{}", c.log_tails(30)));
        // The node answers again (slurmctld asks it to register).
        let t = Instant::now();
        while node_state(&c).0.ends_with('*') || node_state(&c).0.starts_with("unk") {
            assert!(t.elapsed() < Duration::from_secs(60), "node {:?} after slurmctld's restart", node_state(&c));
            std::thread::sleep(Duration::from_millis(250));
        }
        let (state, reason) = node_state(&c);
        assert!(!state.contains("drain"), "drained while slurmctld was away: {state} ({reason})");
        // The next check acts on what the last one could not.
        let (code, doc) = node.check(&c, "health_h100x8.conf", &dbe);
        assert_eq!((code, doc["verdict"].as_str()), (Some(3), Some("drain")), "{doc:#}");
        let (state, reason) = node_state(&c);
        assert!(state.contains("drain") && reason.starts_with("gres-rs: ") && reason.contains("xid 48"), "{state}: {reason:?}");
        // The admin resumes: reported once, it drains no more.
        resume(&c);
        let (code, doc) = node.check(&c, "health_h100x8.conf", &dbe);
        assert_eq!((code, doc["verdict"].as_str()), (Some(0), Some("nothing")), "{doc:#}");
        assert!(!node_state(&c).0.contains("drain"), "{:?}", node_state(&c));
    }
}
