//! Tests of the node configuration sequence.  The expected GRES lines of the
//! `predict` tests are what `slurmd -G` of Slurm 22.05.8 printed for the
//! same files.

use std::path::Path;

use crate::slurm_conf::{NodeLine, SlurmConf};
use crate::*;
use gres_config::gres_conf::{GresConf, NodeContext};
use gres_config::syntax::MemReader;
use gres_config::syntax::{ConfError, Location};
use gres_core::devices::{self, DevStat};
use gres_core::model::{gres_build_id, Bitmap, ConfFlags, DevType, GresRecord, LogLevel};

const ENV_DEFAULT: u32 = ConfFlags::ENV_SET | ConfFlags::ENV_DEF;

fn types(list: &str) -> Vec<String> {
    list.split(',').map(str::to_string).collect()
}

fn node_line(text: &str) -> NodeLine {
    let conf = SlurmConf::parse_str(text, Path::new("/etc/slurm/slurm.conf"), &MemReader::new()).unwrap();
    conf.nodes()[0].clone()
}

fn record(name: &str, type_name: Option<&str>, count: u64, file: Option<&str>) -> GresRecord {
    let mut flags = ConfFlags::default();
    if file.is_some() {
        flags.set(ConfFlags::HAS_FILE);
    }
    if type_name.is_some() {
        flags.set(ConfFlags::HAS_TYPE);
    }
    GresRecord {
        name: name.into(),
        type_name: type_name.map(str::to_string),
        count,
        file: file.map(str::to_string),
        flags,
        cpu_cnt: 8,
        plugin_id: gres_build_id(name),
        ..Default::default()
    }
}

#[test]
fn node_cpu_layouts() {
    let (hw, p) = node_hw(&node_line("NodeName=n1 CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1\n"));
    assert_eq!((hw.cpus, hw.sockets, hw.cores(), hw.threads_per_core), (4, 1, 4, 1));
    assert!(p.is_empty(), "{p:?}");
    let (hw, _) = node_hw(&node_line("NodeName=n1 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2\n"));
    assert_eq!((hw.cpus, hw.cores()), (32, 16));
    let (hw, _) = node_hw(&node_line("NodeName=n1 CPUs=16 CoresPerSocket=4\n"));
    assert_eq!((hw.cpus, hw.sockets), (16, 4));
    let (hw, _) = node_hw(&node_line("NodeName=n1\n"));
    assert_eq!(hw, NodeHw::default());
    let (hw, p) = node_hw(&node_line("NodeName=n1 CPUs=6 Sockets=2 CoresPerSocket=2\n"));
    assert_eq!(hw.cpus, 4);
    assert!(p[0].message.contains("Resetting CPUs"), "{p:?}");
    let (hw, p) = node_hw(&node_line("NodeName=DEFAULT CoresPerSocket=0\nNodeName=n1 Procs=2\n"));
    assert_eq!((hw.cpus, hw.cores_per_socket), (2, 1));
    assert!(p.iter().any(|p| p.message.contains("CoresPerSocket=0 is invalid")), "{p:?}");
    let (_, p) = node_hw(&node_line("NodeName=n1 CPUs=lots\n"));
    assert_eq!(p[0].severity, Severity::Fatal);
}

#[test]
fn gres_names_filtered_by_gres_types() {
    let t = types("gpu,mps");
    assert_eq!(gres_name_filter("gpu:2,mps:100,nic:1", &t), (Some("gpu:2,mps:100".into()), vec!["nic:1".to_string()]));
    assert_eq!(gres_name_filter("GPU:2", &t), (None, vec!["GPU:2".to_string()]));
    assert_eq!(gres_name_filter("", &t), (None, vec![]));
    assert_eq!(gres_name_filter("gpu:1", &[]), (None, vec![]));
    let loc = Location::line(Path::new("/s"), 3);
    let (g, p) = node_slurm_gres("n1", Some(("gpu:2,gpx:1", &loc)), &t);
    assert_eq!(g.len(), 2);
    assert_eq!((g[0].count, g[1].count), (2, 0));
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].suggestion.as_deref(), Some("gpu"));
    assert!(p[0].message.starts_with("Invalid GRES configured on node n1: gpx:1"));
}

#[test]
fn slurm_conf_counts() {
    let (g, e) = gres_cnt("gpu:tesla:2,gpu:kepler:2,mps:400,bandwidth:lustre:no_consume:4G", "gpu");
    assert!(e.is_empty());
    assert_eq!(g.count, 4);
    assert_eq!(g.types, vec![("tesla".to_string(), 2), ("kepler".to_string(), 2)]);
    assert_eq!(gres_cnt("gpu:tesla:2,gpu:TESLA:1", "gpu").0.types.len(), 2);
    let (g, _) = gres_cnt("bandwidth:lustre:no_consume:4G", "bandwidth");
    assert_eq!((g.count, g.no_consume), (4 << 30, true));
    assert_eq!(g.types, vec![("lustre".to_string(), 4 << 30)]);
    // A name alone counts 1 and ends the count.
    assert_eq!(gres_cnt("gpu:2,gpu,gpu:3", "gpu").0.count, 1);
    // A type without a count is one.
    let (g, _) = gres_cnt("gpu:a100(S:0-1)", "gpu");
    assert_eq!((g.count, g.types.clone()), (1, vec![("a100".to_string(), 1)]));
    assert_eq!(gres_cnt("gpu:4(S:0)", "gpu").0.count, 4);
    let (g, e) = gres_cnt("gpu:2,gpu:3x,gpu:5", "gpu");
    assert_eq!(g.count, 2);
    assert_eq!(e, vec!["Bad GRES configuration: gpu:3x".to_string()]);
    assert_eq!(gres_cnt("mpsx:4", "mps").0.count, 0);
    assert!(validate_slurm_conf(&gres_cnt("gpu:a:2,gpu:2", "gpu").0).unwrap_err().contains("Some gpu GRES in slurm.conf have a type"));
    assert!(validate_slurm_conf(&gres_cnt("gpu:a:2,gpu:b:2", "gpu").0).is_ok());
    assert!(validate_slurm_conf(&gres_cnt("gpu:4", "gpu").0).is_ok());
}

#[test]
fn contexts_flags() {
    let mut r = record("gpu", None, 1, None);
    r.flags.set(ConfFlags::COUNT_ONLY);
    let c = contexts(&types("gpu,mps,bandwidth"), &[r]);
    assert_eq!(c.iter().map(|c| (c.has_plugin, c.count_only)).collect::<Vec<_>>(), vec![(true, true), (true, false), (false, true)]);
}

#[test]
fn mismatch_counts() {
    let records =
        vec![record("gpu", Some("a"), 2, Some("/dev/nvidia[0-1]")), record("gpu", Some("b"), 2, Some("/dev/nvidia[2-3]")), record("mps", None, 100, None)];
    let slurm = gres_cnt("gpu:a:1,gpu:b:2", "gpu").0;
    assert_eq!(check_conf_mismatch(&records, &slurm), vec![(0, 1)]);
    // Untyped slurm.conf counts use only untyped records.
    let slurm = gres_cnt("gpu:4", "gpu").0;
    assert_eq!(check_conf_mismatch(&records, &slurm), vec![(0, 2), (1, 2)]);
    let slurm = gres_cnt("mps:60", "mps").0;
    assert_eq!(check_conf_mismatch(&records, &slurm), vec![(2, 40)]);
}

fn ctxs(list: &str) -> Vec<GresContext> {
    contexts(&types(list), &[])
}

#[test]
fn merge_within_slurm_conf() {
    let mut log = Vec::new();
    let conf = vec![record("gpu", Some("a"), 4, Some("/dev/nvidia[0-3]")), record("gpu", Some("b"), 1, Some("/dev/nvidia4")), record("mps", None, 100, None)];
    // Typed: cut down to the count, File too; a missing type is a record
    // without File.
    let slurm = [gres_cnt("gpu:a:2,gpu:c:1", "gpu").0, gres_cnt("", "mps").0];
    let out = merge_config(conf.clone(), Some(&slurm), &ctxs("gpu,mps"), 8, &mut log);
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].count, out[0].file.as_deref()), (2, Some("/dev/nvidia[0-1]")));
    assert_eq!(out[1].type_name.as_deref(), Some("c"));
    assert_eq!((out[1].count, out[1].file.as_deref(), out[1].cpu_cnt), (1, None, 8));
    assert_eq!(out[1].flags, ConfFlags(ConfFlags::HAS_TYPE | ENV_DEFAULT));
    assert!(log.iter().any(|l| l.message.contains("Truncating gpu:a File from (4) /dev/nvidia[0-3] to (2) /dev/nvidia[0-1]")));
    // Untyped: any record, its type dropped.
    let slurm = [gres_cnt("gpu:5", "gpu").0, gres_cnt("mps:100", "mps").0];
    let out = merge_config(conf.clone(), Some(&slurm), &ctxs("gpu,mps"), 8, &mut log);
    assert_eq!(out.iter().map(|r| (r.type_name.clone(), r.count)).collect::<Vec<_>>(), vec![(None, 4), (None, 1), (None, 100)]);
    assert!(!out[0].flags.has(ConfFlags::HAS_TYPE));
    // No slurm.conf GRES at all: an empty record per GRES.
    let out = merge_config(conf, None, &ctxs("gpu,mps"), 8, &mut log);
    assert_eq!(out.iter().map(|r| (r.name.as_str(), r.count)).collect::<Vec<_>>(), vec![("gpu", 0), ("mps", 0)]);
}

#[test]
fn leftover_overwrites_an_empty_first_record() {
    let mut log = Vec::new();
    let mut zero = record("gpu", None, 0, None);
    zero.cpus_bitmap = Some(Bitmap::from_indices(8, &[1]));
    let slurm = [gres_cnt("gpu:2", "gpu").0];
    let out = merge_config(vec![zero], Some(&slurm), &ctxs("gpu"), 8, &mut log);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].count, 2);
    assert_eq!(out[0].cpus_bitmap, Some(Bitmap::from_indices(8, &[1])));
    let mut c = ctxs("gpu");
    c[0].count_only = true;
    let out = merge_config(vec![], Some(&slurm), &c, 8, &mut log);
    assert!(out[0].flags.has(ConfFlags::COUNT_ONLY));
}

#[test]
fn fileless_gpus_go() {
    let mut r = vec![record("gpu", Some("a"), 2, None), record("gpu", None, 1, Some("/dev/nvidia0")), record("mps", None, 10, None)];
    assert!(remove_fileless_gpus(&mut r.clone(), None).is_empty());
    assert_eq!(remove_fileless_gpus(&mut r, Some(gres_build_id("gpu"))), vec!["gpu:a".to_string()]);
    assert_eq!(r.len(), 2);
}

#[test]
fn slurmd_lines() {
    let mut r = record("gpu", Some("a100"), 1, Some("/dev/nvidia12"));
    assert_eq!(slurmd_line(&r), "Gres Name=gpu Type=a100 Count=1 Index=12 ID=7696487 File=/dev/nvidia12 (null)");
    r.cpus = Some("0-3".into());
    r.links = Some("-1,0".into());
    assert_eq!(slurmd_line(&r), "Gres Name=gpu Type=a100 Count=1 Index=12 ID=7696487 File=/dev/nvidia12 Cores=0-3 CoreCnt=8 Links=-1,0");
    let r = record("mps", None, 100, None);
    assert_eq!(slurmd_line(&r), "Gres Name=mps Type=(null) Count=100 ID=7565421 (null)");
    let r = record("gpu", None, 1, Some("/dev/nvidia-caps/cap"));
    assert!(slurmd_line(&r).contains(" Index=0 "));
    let r = record("gpu", None, 1, Some("/dev/a,/dev/b3"));
    assert!(slurmd_line(&r).contains(" Index=3 "));
}

#[test]
fn cores_to_machine_cpus() {
    let conf = NodeHw { cpus: 4, boards: 1, sockets: 1, cores_per_socket: 4, threads_per_core: 1 };
    // Configured for 4, running on 2: ids wrap around.
    let m = CpuMap::for_node(&conf, Some((2, 2)), true);
    assert_eq!(m.abs_to_mac("2-3"), Ok("0-1".into()));
    assert!(m.abs_to_mac("4-5").is_err());
    // Without config_overrides the machine's own layout counts.
    let m = CpuMap::for_node(&conf, Some((2, 2)), false);
    assert!(m.abs_to_mac("2").is_err());
    let ht = NodeHw { cpus: 8, boards: 1, sockets: 1, cores_per_socket: 4, threads_per_core: 2 };
    let m = CpuMap::for_node(&ht, None, false);
    assert_eq!(m.abs_to_mac("1"), Ok("2-3".into()));
}

// ---------------------------------------------------------------------------
// The whole sequence
// ---------------------------------------------------------------------------

fn dev_stat(path: &str) -> Result<DevStat, String> {
    match path {
        p if p.starts_with("/dev/nvidia") && !p.ends_with('9') => Ok(DevStat::device(DevType::Char, 195, devices::trailing_number(p).unwrap_or(0) as u32)),
        p if p.starts_with("/etc/") => {
            Ok(DevStat { dev_type: DevType::None, major: 0, minor: 0, inode: (1, p.bytes().fold(0, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))) })
        }
        p => Err(format!("stat({p}): No such file or directory (os error 2)")),
    }
}

struct Case {
    gres_types: &'static str,
    gres: &'static str,
    gres_conf: &'static str,
    system: Option<Vec<GresRecord>>,
}

fn run(case: Case) -> Prediction {
    let t = types(case.gres_types);
    let conf = GresConf::parse_str(case.gres_conf, Path::new("/etc/slurm/gres.conf"), &MemReader::new()).unwrap();
    let ctx = NodeContext { gres_types: Some(&t), ..NodeContext::new("n1", 4) };
    let node = conf.node_config(&ctx);
    let node = match node {
        Ok(n) => n,
        Err(e) => {
            return Prediction { problems: vec![Problem::from_conf_error(&e)], ..Default::default() };
        }
    };
    let loc = Location::line(Path::new("/etc/slurm/slurm.conf"), 9);
    let (slurm, mut problems) = node_slurm_gres("n1", Some((case.gres, &loc)), &t);
    let mut p = predict(NodeInput {
        gres_types: &t,
        slurm: Some(&slurm),
        cpu_cnt: 4,
        gres_conf: Some(&node),
        system_gpus: case.system,
        fake_gpus: false,
        stat: Some(&dev_stat),
    });
    if p.fatal().is_none() {
        problems.extend(registration_problems(&slurm, &p.records, Some(&loc), false));
    }
    p.problems.extend(problems);
    p
}

fn has(p: &Prediction, severity: Severity, text: &str) -> bool {
    p.problems.iter().any(|x| x.severity == severity && x.message.contains(text))
}

#[test]
fn typed_gpus_with_mps_and_shard() {
    let p = run(Case {
        gres_types: "gpu,mps,shard",
        gres: "gpu:tesla:2,gpu:k80:2,mps:100",
        gres_conf: "Name=gpu Type=tesla File=/dev/nvidia[0-1] Cores=0-1\nName=gpu Type=k80 File=/dev/nvidia[2-3]\nName=mps Count=100\n",
        system: None,
    });
    assert_eq!(
        p.lines,
        vec![
            "Gres Name=mps Type=tesla Count=25 Index=0 ID=7565421 File=/dev/nvidia0 Cores=0-1 CoreCnt=4 (null)",
            "Gres Name=mps Type=tesla Count=25 Index=1 ID=7565421 File=/dev/nvidia1 Cores=0-1 CoreCnt=4 (null)",
            "Gres Name=mps Type=k80 Count=25 Index=2 ID=7565421 File=/dev/nvidia2 (null)",
            "Gres Name=mps Type=k80 Count=25 Index=3 ID=7565421 File=/dev/nvidia3 (null)",
            "Gres Name=shard Type=tesla Count=0 Index=0 ID=1918986455 File=/dev/nvidia0 Cores=0-1 CoreCnt=4 (null)",
            "Gres Name=gpu Type=tesla Count=1 Index=0 ID=7696487 File=/dev/nvidia0 Cores=0-1 CoreCnt=4 (null)",
            "Gres Name=shard Type=tesla Count=0 Index=1 ID=1918986455 File=/dev/nvidia1 Cores=0-1 CoreCnt=4 (null)",
            "Gres Name=gpu Type=tesla Count=1 Index=1 ID=7696487 File=/dev/nvidia1 Cores=0-1 CoreCnt=4 (null)",
            "Gres Name=shard Type=k80 Count=0 Index=2 ID=1918986455 File=/dev/nvidia2 (null)",
            "Gres Name=gpu Type=k80 Count=1 Index=2 ID=7696487 File=/dev/nvidia2 (null)",
            "Gres Name=shard Type=k80 Count=0 Index=3 ID=1918986455 File=/dev/nvidia3 (null)",
            "Gres Name=gpu Type=k80 Count=1 Index=3 ID=7696487 File=/dev/nvidia3 (null)",
        ]
    );
    assert!(p.problems.iter().all(|x| x.severity > Severity::Error), "{:?}", p.problems);
}

#[test]
fn slurm_conf_limits_gres_conf() {
    let p = run(Case { gres_types: "gpu", gres: "gpu:2", gres_conf: "Name=gpu File=/dev/nvidia[0-3]\n", system: None });
    assert_eq!(p.lines, vec!["Gres Name=gpu Type=(null) Count=2 Index=0 ID=7696487 File=/dev/nvidia[0-1] (null)"]);
    assert!(has(&p, Severity::Warning, "A line in gres.conf for GRES gpu has 2 more configured than expected"));
    let p = run(Case {
        gres_types: "gpu",
        gres: "gpu:3",
        gres_conf: "Name=gpu Type=a File=/dev/nvidia[0-1]\nName=gpu Type=b File=/dev/nvidia[2-3]\n",
        system: None,
    });
    assert_eq!(
        p.lines,
        vec![
            "Gres Name=gpu Type=(null) Count=2 Index=0 ID=7696487 File=/dev/nvidia[0-1] (null)",
            "Gres Name=gpu Type=(null) Count=1 Index=2 ID=7696487 File=/dev/nvidia2 (null)",
        ]
    );
    assert!(p.problems.iter().any(|x| x.help.as_deref().is_some_and(|h| h.contains("without a type"))));
}

#[test]
fn gpus_without_file_drain_the_node() {
    let p = run(Case { gres_types: "gpu,mps,shard", gres: "gpu:4", gres_conf: "", system: None });
    assert!(p.lines.is_empty());
    assert!(has(&p, Severity::Error, "gres/gpu count reported lower than configured (0 < 4)"));
    assert!(has(&p, Severity::Error, "SHARING configuration lacks \"File\" specification"));
    assert_eq!(p.problems.iter().filter(|x| x.message.contains("SHARING")).count(), 1, "repeats removed");
}

#[test]
fn fatal_configurations() {
    let p = run(Case { gres_types: "gpu", gres: "gpu:a:2,gpu:2", gres_conf: "", system: None });
    assert!(has(&p, Severity::Fatal, "Some gpu GRES in slurm.conf have a type while others do not"));
    let p = run(Case { gres_types: "gpu", gres: "gpu:3", gres_conf: "Name=gpu File=/dev/nvidia[0-1]\nName=gpu File=/dev/nvidia1\n", system: None });
    assert!(has(&p, Severity::Fatal, "gpu duplicate device file name (/dev/nvidia1)"));
    assert!(has(&p, Severity::Fatal, "Gres GPU plugin failed to load configuration"));
    assert!(p.lines.is_empty());
    let p = run(Case { gres_types: "gpu", gres: "gpu:1", gres_conf: "Name=gpu File=/dev/nvidia9\n", system: None });
    assert!(has(&p, Severity::Fatal, "can't stat gres.conf file /dev/nvidia9"));
    let p = run(Case { gres_types: "gpu,mps", gres: "mps:100", gres_conf: "Name=mps Count=100\n", system: None });
    assert!(has(&p, Severity::Fatal, "gres/mps:"), "{:?}", p.problems);
}

#[test]
fn device_problems_are_errors() {
    let p = run(Case { gres_types: "gpu,mps", gres: "gpu:2", gres_conf: "Name=gpu File=/etc/slurm.conf\nName=gpu File=/dev/nvidia1\n", system: None });
    assert_eq!(p.lines.len(), 2);
    let bad: Vec<_> = p.problems.iter().filter(|x| x.message.contains("is not a valid character or block device")).collect();
    assert_eq!(bad.len(), 1, "{:?}", p.problems);
    assert_eq!(bad[0].severity, Severity::Error);
    assert_eq!(bad[0].location.as_ref().map(|l| l.line), Some(1));
}

#[test]
fn shared_counts_that_do_not_divide() {
    let p = run(Case {
        gres_types: "gpu,mps,shard",
        gres: "gpu:3,mps:10,shard:7",
        gres_conf: "Name=gpu File=/dev/nvidia[0-2]\nName=mps Count=10\nName=shard Count=7 File=/dev/nvidia[0-1]\n",
        system: None,
    });
    assert!(has(&p, Severity::Warning, "mps Count=10 does not divide over the node's 3 GPUs: some get 3, others 4"));
    assert!(has(&p, Severity::Warning, "shard Count=7 does not divide over the 2 files of its File=: each gets 3"));
    assert!(has(&p, Severity::Error, "gres/shard count reported lower than configured (6 < 7)"));
}

#[test]
fn env_flags_that_differ() {
    let p = run(Case {
        gres_types: "gpu,shard",
        gres: "gpu:2,shard:4",
        gres_conf: "Name=gpu File=/dev/nvidia[0-1] Flags=nvidia_gpu_env\nName=shard Count=4 Flags=amd_gpu_env\n",
        system: None,
    });
    assert!(has(&p, Severity::Warning, "ask for different environment variables"), "{:?}", p.problems);
}

fn fake(type_name: &str, file: &str, cpus: &str, links: &str) -> GresRecord {
    gres_core::record_rules::add_gres_record(GresRecord {
        name: "gpu".into(),
        count: 1,
        cpu_cnt: 4,
        cpus: Some(cpus.into()),
        cpus_bitmap: Some(Bitmap::from_ranges(4, cpus).unwrap()),
        file: Some(file.into()),
        links: Some(links.into()),
        type_name: Some(type_name.into()),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn merge_with_detected_gpus() {
    let system = vec![
        fake("tesla_v100", "/dev/nvidia0", "0-1", "-1,0,0"),
        fake("nvidia_a100", "/dev/nvidia1", "2-3", "0,-1,0"),
        fake("h100", "/dev/nvidia2", "2-3", "0,0,-1"),
    ];
    let p = run(Case { gres_types: "gpu,mps,shard", gres: "gpu:a100:1,gpu:v100:1", gres_conf: "", system: Some(system.clone()) });
    assert_eq!(
        p.lines,
        vec![
            "Gres Name=gpu Type=v100 Count=1 Index=0 ID=7696487 File=/dev/nvidia0 Cores=0-1 CoreCnt=4 Links=-1,0,0",
            "Gres Name=gpu Type=a100 Count=1 Index=1 ID=7696487 File=/dev/nvidia1 Cores=2-3 CoreCnt=4 Links=0,-1,0",
        ]
    );
    assert!(has(&p, Severity::Warning, "The following autodetected GPUs are being ignored:\n  GRES[gpu] Type:h100"));
    let p = run(Case {
        gres_types: "gpu",
        gres: "gpu:k80:1,gpu:a1:1",
        gres_conf: "Name=gpu Type=k80 File=/dev/nvidia0\nName=gpu Type=a1 File=/dev/nvidia1\n",
        system: Some(system),
    });
    let k80 = p.problems.iter().find(|x| x.message.starts_with("Type=k80 matches no detected GPU")).unwrap();
    assert_eq!(k80.location.as_ref().map(|l| l.line), Some(1));
    assert_eq!(k80.suggestion, None);
    assert!(!has(&p, Severity::Error, "Type=a1 "), "a1 is part of nvidia_a100");
}

#[test]
fn registration_by_type() {
    let slurm = [gres_cnt("gpu:a:2,gpu:b:1", "gpu").0];
    let records = vec![record("gpu", Some("a"), 1, Some("/dev/nvidia0")), record("gpu", Some("B"), 1, Some("/dev/nvidia1"))];
    let p = registration_problems(&slurm, &records, None, false);
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(p[0].message.starts_with("gres/gpu count reported lower than configured (2 < 3)"));
    assert!(p[1].message.starts_with("gres/gpu:a count too low (1 < 2)"));
    // Type ids are case-sensitive (slurmctld compares them).
    assert!(p[2].message.starts_with("gres/gpu:b count too low (0 < 1)"));
    let p = registration_problems(&slurm, &[], None, true);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].severity, Severity::Note);
}

#[test]
fn problems_from_logs() {
    let p = Problem::from_log(LogLevel::Info, None, "WARNING: x");
    assert_eq!((p.severity, p.message.as_str()), (Severity::Warning, "x"));
    assert_eq!(Problem::from_log(LogLevel::Info, None, "y").severity, Severity::Note);
    assert_eq!(Problem::from_log(LogLevel::Error, None, "z").severity, Severity::Error);
    assert_eq!(Severity::Fatal.as_str(), "fatal");
    let e = ConfError {
        kind: gres_config::syntax::ErrorKind::UnknownKey,
        location: Location::line(Path::new("/g"), 2),
        message: "m".into(),
        suggestion: Some("Type".into()),
    };
    let p = Problem::from_conf_error(&e);
    assert_eq!((p.severity, p.suggestion.as_deref()), (Severity::Fatal, Some("Type")));
}

#[test]
fn one_device_as_two_gpus_is_a_warning_at_the_second() {
    // mps records name the same files: only the GPUs count, and each
    // place is the gres.conf line of that GPU's record.
    let p = run(Case {
        gres_types: "mps,gpu",
        gres: "gpu:3,mps:30",
        gres_conf: "Name=mps Count=30 File=/dev/nvidia[0-2]\nName=gpu MultipleFiles=/dev/nvidia[0-1]\nName=gpu File=/dev/nvidia2\nName=gpu MultipleFiles=/dev/nvidia1,/dev/nvidia0\n",
        system: None,
    });
    let warnings: Vec<&Problem> = p.problems.iter().filter(|x| x.severity == Severity::Warning).collect();
    assert_eq!(warnings.len(), 1, "{:?}", p.problems);
    let w = warnings[0];
    assert_eq!(w.message, "/dev/nvidia1 is the same device as /dev/nvidia1 (GPU 0, line 2): two jobs could be given one GPU");
    assert_eq!(w.location.as_ref().map(|l| l.line), Some(4));
    let related = w.related.as_ref().unwrap();
    assert_eq!((related.location.line, related.label.as_str()), (2, "GPU 0 uses /dev/nvidia1"));
    assert!(p.fatal().is_none());
    // Different devices: nothing.
    let p = run(Case { gres_types: "gpu", gres: "gpu:2", gres_conf: "Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\n", system: None });
    assert!(!has(&p, Severity::Warning, "same device"), "{:?}", p.problems);
}

#[test]
fn mps_and_shard_on_one_node_and_counts_slurmctld_cannot_place() {
    let both = run(Case {
        gres_types: "gpu,mps,shard",
        gres: "gpu:2,mps:200,shard:4",
        gres_conf: "Name=gpu File=/dev/nvidia[0-1]\nName=mps Count=200\nName=shard Count=4\n",
        system: None,
    });
    let w: Vec<_> = both.problems.iter().filter(|x| x.message.starts_with("gres/mps and gres/shard are both configured on this node")).collect();
    assert_eq!(w.len(), 1, "{:?}", both.problems);
    assert_eq!(w[0].severity, Severity::Warning);
    assert_eq!(w[0].location.as_ref().map(|l| l.line), Some(3));
    assert_eq!(w[0].related.as_ref().map(|r| r.location.line), Some(2));
    // One sharing GRES: quiet.
    let one = run(Case { gres_types: "gpu,mps,shard", gres: "gpu:2,mps:200", gres_conf: "Name=gpu File=/dev/nvidia[0-1]\nName=mps Count=200\n", system: None });
    assert!(!one.problems.iter().any(|x| x.message.contains("both configured")), "{:?}", one.problems);

    // Per-GPU counts that differ, on GPUs without Type or Cores.
    let spread = run(Case {
        gres_types: "gpu,mps",
        gres: "gpu:2,mps:400",
        gres_conf: "Name=gpu File=/dev/nvidia[0-1]\nName=mps Count=100 File=/dev/nvidia0\nName=mps Count=300 File=/dev/nvidia1\n",
        system: None,
    });
    assert!(has(&spread, Severity::Warning, "mps counts differ per GPU (100, 300) on GPUs without Type or Cores: slurmctld cannot tell the GPUs apart and spreads the node's mps count evenly over them"), "{:?}", spread.problems);
    // With Type= the GPUs are told apart.
    let typed = run(Case {
        gres_types: "gpu,mps",
        gres: "gpu:a:1,gpu:b:1,mps:400",
        gres_conf:
            "Name=gpu Type=a File=/dev/nvidia0\nName=gpu Type=b File=/dev/nvidia1\nName=mps Count=100 File=/dev/nvidia0\nName=mps Count=300 File=/dev/nvidia1\n",
        system: None,
    });
    assert!(!typed.problems.iter().any(|x| x.message.contains("counts differ per GPU")), "{:?}", typed.problems);
}

#[test]
fn a_duplicate_file_points_at_its_second_use() {
    let p = run(Case { gres_types: "gpu", gres: "gpu:2", gres_conf: "Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia0\n", system: None });
    let dup = p.problems.iter().find(|x| x.message == "gpu duplicate device file name (/dev/nvidia0)").unwrap_or_else(|| panic!("{:?}", p.problems));
    assert_eq!(dup.severity, Severity::Fatal);
    assert_eq!(dup.location.as_ref().map(|l| l.line), Some(2));
    let first = dup.related.as_ref().expect("a note naming the first use");
    assert_eq!((first.location.line, first.label.as_str()), (1, "first named here"));
}

#[test]
fn sharing_lacks_file_blames_the_gpus_on_a_node_without_sharing() {
    let p = run(Case { gres_types: "gpu,mps", gres: "gpu:2", gres_conf: "Name=gpu Count=2\n", system: None });
    let lacks = p.problems.iter().find(|x| x.message.contains("SHARING configuration lacks")).unwrap_or_else(|| panic!("{:?}", p.problems));
    assert_eq!(
        lacks.help.as_deref(),
        Some("the cause is the node's GPUs, not mps or shard (this node has none; GresTypes loads their plugins on every node): the GPUs have no File= in gres.conf: give them File= (or AutoDetect)")
    );
    let with_mps = run(Case { gres_types: "gpu,mps", gres: "gpu:2,mps:100", gres_conf: "Name=gpu Count=2\nName=mps Count=100\n", system: None });
    let lacks = with_mps.problems.iter().find(|x| x.message.contains("SHARING configuration lacks")).unwrap_or_else(|| panic!("{:?}", with_mps.problems));
    assert!(lacks.help.as_deref().unwrap().starts_with("gres/mps and gres/shard need the GPUs' device files"));
}

#[test]
fn slurmd_line_per_release() {
    use gres_core::behaviour::{Behaviour, ConfBit14};
    use gres_core::model::ConfFlags;
    let mut r = GresRecord { name: "gpu".into(), count: 1, plugin_id: 7696487, file: Some("/dev/nvidia3".into()), ..Default::default() };
    r.flags = ConfFlags(ConfFlags::HAS_FILE | ConfFlags::ENV_NVML | ConfFlags::EXPLICIT | ConfFlags::BIT14);
    // 22.05: no flags, a bare (null) for no links.
    assert_eq!(slurmd_line_as(&r, &Behaviour::BASELINE), "Gres Name=gpu Type=(null) Count=1 Index=3 ID=7696487 File=/dev/nvidia3 (null)");
    let b2411 = Behaviour { record_line_flags: true, flag_explicit: true, conf_bit14: ConfBit14::GlobalIndex, ..Behaviour::BASELINE };
    assert_eq!(
        slurmd_line_as(&r, &b2411),
        "Gres Name=gpu Type=(null) Count=1 Index=3 ID=7696487 File=/dev/nvidia3 Links=(null) Flags=Explicit,HAS_FILE,ENV_NVML"
    );
    let b2605 = Behaviour { conf_bit14: ConfBit14::Uuid, mig_conf_flag: true, ..b2411 };
    r.links = Some("-1,0".into());
    r.cpus = Some("0-1".into());
    r.cpu_cnt = 4;
    assert_eq!(
        slurmd_line_as(&r, &b2605),
        "Gres Name=gpu Type=(null) Count=1 Index=3 ID=7696487 File=/dev/nvidia3 Cores=0-1 CoreCnt=4 Links=-1,0 Flags=Explicit,HAS_FILE,ENV_NVML,UUID"
    );
}
