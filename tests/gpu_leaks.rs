//! Memory leaks of our plugins in slurmd: the gres/gpu merging cases of
//! tests/gpu_merge.rs (`slurmd -G` with our plugins and a fake_gpus.conf)
//! run under `valgrind --leak-check=full`; no "definitely lost" or
//! "indirectly lost" block may have been allocated with a stack frame in
//! our plugin files (slurmd itself leaks at exit: those blocks are not
//! ours to judge).
//!
//! Each configuration is first run by the harness (which proves with the
//! dynamic loader's list that our files are the ones loaded) on a cluster
//! of munged alone (what `slurmd -G` of 24.11 and later needs,
//! `Cluster::try_start_munged`); valgrind then runs the same `slurmd -G`
//! in that cluster's directory, while its munged still runs.  On every
//! release of the test bed (`per_release!`, `GRES_RS_SLURM`): in a chroot
//! with the chroot's own valgrind, on the chroot's slurmd.
//! Needs root, the Debian Slurm packages, valgrind and
//! `cargo build --workspace`; without valgrind the test is skipped (or
//! fails when CI=true / GRES_RS_REQUIRE_SLURM=1).

use gres_test_harness as harness;
use gres_test_harness::gpu as gpu_common;

use harness::testbed::TestBed;
use harness::*;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The merging cases run under valgrind (a cross-section: reordering,
/// types, mismatches with error paths, extra and missing GPUs, unique IDs,
/// the shared plugins beside gres/gpu).
const LEAK_CASES: &[&str] = &[
    "out-of-order-device-files",
    "typed-substring-longest-first",
    "typed-mixed-system",
    "cores-mismatch",
    "links-order",
    "extra-system-gpus",
    "missing-system-gpus",
    "unique-ids",
    "mps-and-shard-beside",
];

/// One frame of a valgrind XML stack.
#[derive(Debug, Default, Clone)]
struct Frame {
    obj: String,
    func: String,
    file: String,
}

/// One leak record of a valgrind XML report.
#[derive(Debug, Clone)]
struct Leak {
    kind: String,
    what: String,
    stack: Vec<Frame>,
}

fn tag<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let a = text.find(&open)? + open.len();
    let b = text[a..].find(&close)? + a;
    Some(&text[a..b])
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
}

/// The leak records (any kind) of a valgrind XML report.
fn leaks(xml: &str) -> Vec<Leak> {
    let mut out = Vec::new();
    for chunk in xml.split("<error>").skip(1) {
        let chunk = chunk.split("</error>").next().unwrap_or("");
        let kind = tag(chunk, "kind").unwrap_or("").to_string();
        if !kind.starts_with("Leak_") {
            continue;
        }
        let what = tag(chunk, "xwhat").and_then(|x| tag(x, "text")).or_else(|| tag(chunk, "what")).map(unescape).unwrap_or_default();
        let stack = tag(chunk, "stack")
            .unwrap_or("")
            .split("<frame>")
            .skip(1)
            .map(|f| Frame {
                obj: tag(f, "obj").map(unescape).unwrap_or_default(),
                func: tag(f, "fn").map(unescape).unwrap_or_default(),
                file: match (tag(f, "dir"), tag(f, "file")) {
                    (Some(d), Some(n)) => format!("{}/{}", unescape(d), unescape(n)),
                    (None, Some(n)) => unescape(n),
                    _ => String::new(),
                },
            })
            .collect();
        out.push(Leak { kind, what, stack });
    }
    out
}

/// True for a frame in one of our plugin files (the installed copies in
/// the kept dir, or code of this crate wherever it was linked).
fn ours(frame: &Frame, plugin_dir: &Path) -> bool {
    let manifest = env!("CARGO_MANIFEST_DIR");
    frame.obj.starts_with(&*plugin_dir.to_string_lossy()) || frame.func.contains("slurm_gpu_gres") || frame.file.starts_with(&format!("{manifest}/src/"))
}

/// The release's own valgrind: the chroot's, or the host's.
fn valgrind_available(bed: &TestBed) -> bool {
    match &bed.chroot {
        Some(root) => root.tool("valgrind").is_some(),
        None => Command::new(tool("valgrind")).arg("--version").output().map(|o| o.status.success()).unwrap_or(false),
    }
}

/// Runs `slurmd -G` under valgrind on the (munged-only) cluster `c`, in
/// its chroot if any (the chroot's valgrind and slurmd); returns the XML
/// report.
fn run_valgrind(c: &Cluster) -> String {
    let dir = &c.layout.root;
    let xml = dir.join("valgrind.xml");
    let slurmd = c.config.chroot.as_ref().and_then(|r| r.tool("slurmd")).unwrap_or_else(|| tool("slurmd"));
    // The cluster's environment (SLURM_CONF, PATH, LC_ALL), inside its
    // chroot when it has one.
    let mut cmd = c.command("valgrind");
    cmd.current_dir(dir)
        .arg("--leak-check=full")
        .arg("--show-leak-kinds=all")
        .arg("--errors-for-leak-kinds=definite,indirect")
        .arg("--num-callers=50")
        .arg("--child-silent-after-fork=yes")
        .arg("--xml=yes")
        .arg(format!("--xml-file={}", xml.display()))
        .arg(slurmd)
        .arg("-G")
        .arg("-N")
        .arg(&c.config.node_name);
    let capture = dir.join("capture");
    let _ = fs::create_dir_all(&capture);
    let out = process::run_with_timeout(cmd, Duration::from_secs(240), &capture);
    assert!(!out.timed_out, "valgrind slurmd -G timed out:\n{out}");
    let text = fs::read_to_string(&xml).unwrap_or_default();
    assert!(text.contains("</valgrindoutput>"), "valgrind wrote no complete report:\n{out}");
    assert!(out.combined().contains("Gres Name="), "slurmd -G under valgrind printed no GRES lines:\n{out}");
    text
}

per_release! {
    fn merging_leaks_nothing_of_ours(bed) {
    if !valgrind_available(bed) {
        let why = format!("no valgrind for {} (apt-get install valgrind)", bed.label());
        if strict_mode() {
            panic!("merging_leaks_nothing_of_ours: {why}");
        }
        harness::ledger::skipped("merging_leaks_nothing_of_ours", &why);
        return;
    }
    let start = Instant::now();
    let mut problems = Vec::new();
    let mut total = 0;
    let mut reachable_seen = 0;
    for name in LEAK_CASES {
        let case = gpu_common::merge_cases::MERGE_CASES.iter().find(|c| c.name == *name).unwrap_or_else(|| panic!("no merge case {name}"));
        let mut cfg = case.config();
        cfg.plugins = PluginSet::Ours;
        // Our build for this release (the OursUnavailable skip where none).
        let c = Cluster::try_start_munged(cfg).unwrap_or_else(|e| panic!("{name}: munged: {e}"));
        let g = c.slurmd_g_in();
        g.assert_ours_loaded(&["gres_gpu", "gres_mps", "gres_shard"]);
        assert!(g.output.ok(), "{name}: slurmd -G failed:\n{}", g.output);
        let t = Instant::now();
        let xml = run_valgrind(&c);
        let plugin_dir = c.layout.plugins.clone();
        let all = leaks(&xml);
        let is_ours = |l: &&Leak| l.stack.iter().any(|f| ours(f, &plugin_dir));
        let lost: Vec<&Leak> = all.iter().filter(|l| l.kind != "Leak_StillReachable" && l.kind != "Leak_PossiblyLost").collect();
        let mine: Vec<&Leak> = lost.iter().copied().filter(is_ours).collect();
        let reachable_ours = all.iter().filter(|l| l.kind == "Leak_StillReachable").filter(is_ours).count();
        eprintln!(
            "{name}: valgrind {:.1?}; {} definitely/indirectly lost record(s), {} of ours; \
             {reachable_ours} still-reachable record(s) of ours",
            t.elapsed(),
            lost.len(),
            mine.len()
        );
        total += lost.len();
        // Sanity check of the detector: our plugins' state (device lists,
        // the log subscriber) is alive at exit, so valgrind must have seen
        // allocations made in our files and attributed them to our frames.
        reachable_seen += reachable_ours;
        for l in mine {
            let frames: Vec<String> = l.stack.iter().map(|f| format!("{} ({} {})", f.func, f.file, f.obj)).collect();
            problems.push(format!("[{name}] {}: {}\n      {}", l.kind, l.what, frames.join("\n      ")));
        }
    }
    eprintln!("{} case(s) under valgrind in {:.1?}; {total} definitely/indirectly lost record(s) in all, none of ours", LEAK_CASES.len(), start.elapsed());
    assert!(reachable_seen > 0, "valgrind attributed no allocation at all to our plugin files: the frame filter or the run is broken");
    assert!(problems.is_empty(), "leaks with a frame in our plugins:\n  {}", problems.join("\n  "));
    }
}

#[test]
fn leak_report_parser() {
    let xml = r#"<valgrindoutput><error><unique>0x1</unique><kind>Leak_DefinitelyLost</kind>
<xwhat><text>16 bytes in 1 blocks are definitely lost in loss record 1 of 2</text></xwhat>
<stack><frame><ip>0x1</ip><obj>/usr/lib/x86_64-linux-gnu/valgrind/vgpreload_memcheck-amd64-linux.so</obj><fn>malloc</fn></frame>
<frame><ip>0x2</ip><obj>/tmp/x/plugins/gres_gpu.so</obj><fn>gres_core::merge::f</fn><dir>/work/main/src/core</dir><file>merge.rs</file><line>3</line></frame>
</stack></error>
<error><kind>Leak_StillReachable</kind><stack><frame><obj>/tmp/x/plugins/gres_gpu.so</obj></frame></stack></error>
<error><kind>Leak_IndirectlyLost</kind><xwhat><text>8 bytes &lt;x&gt;</text></xwhat><stack><frame><obj>/usr/sbin/slurmd</obj><fn>main</fn></frame></stack></error>
</valgrindoutput>"#;
    let l = leaks(xml);
    let kinds: Vec<&str> = l.iter().map(|x| x.kind.as_str()).collect();
    assert_eq!(kinds, ["Leak_DefinitelyLost", "Leak_StillReachable", "Leak_IndirectlyLost"]);
    assert!(l[0].what.starts_with("16 bytes"));
    assert!(ours(&l[0].stack[1], Path::new("/tmp/x/plugins")));
    assert!(!ours(&l[0].stack[0], Path::new("/tmp/x/plugins")));
    assert!(ours(&l[1].stack[0], Path::new("/tmp/x/plugins")));
    assert_eq!(l[2].what, "8 bytes <x>");
    assert!(!l[2].stack.iter().any(|f| ours(f, Path::new("/tmp/x/plugins"))));
}
