//! gres.conf as this crate parses it, then merged with what detection
//! found as gres/gpu merges it in slurmd (`gres_core::merge`): the two
//! halves of a node's GPU records, end to end.

use std::path::Path;

use gres_core::fake_gpus::{parse_fake_gpus, to_parsable, CpuConv};
use gres_core::merge::{merge_system_gres_conf, MergeOutcome};
use gres_core::model::{ConfFlags, GresRecord, LogLevel};
use gres_core::record_rules::add_gres_record;

use crate::gres_conf::{GresConf, NodeContext};
use crate::syntax::MemReader;

/// Keep every log line.
const ALL: LogLevel = LogLevel::Debug3;

fn system(text: &str) -> Vec<GresRecord> {
    parse_fake_gpus(text, Path::new("fake_gpus.conf"), CpuConv::Nvml).unwrap().records
}

/// The record slurmd makes from slurm.conf's `Gres=gpu:a100:<count>` for
/// GPUs gres.conf does not name.
fn leftover_gpus(count: u64) -> GresRecord {
    let flags = ConfFlags(ConfFlags::ENV_SET | ConfFlags::ENV_DEF);
    add_gres_record(GresRecord { name: "gpu".into(), count, cpu_cnt: 4, type_name: Some("a100".into()), flags, ..Default::default() }).unwrap()
}

fn parsable(out: &MergeOutcome) -> Vec<String> {
    out.records.iter().map(to_parsable).collect()
}

/// gres.conf records as slurmd hands them over when slurm.conf's
/// counts equal gres.conf's (node tux0, 4 CPUs).
fn gres_conf_records(text: &str) -> Vec<GresRecord> {
    GresConf::parse_str(text, Path::new("gres.conf"), &MemReader::new()).unwrap().node_config(&NodeContext::new("tux0", 4)).unwrap().records()
}

#[test]
fn end_to_end_cores_and_links_mismatches() {
    let conf = gres_conf_records(
        "Name=gpu Type=ti File=/dev/nvidia0 COREs=0\n\
         Name=gpu Type=ti File=/dev/nvidia[1-2] COREs=0-1\n\
         Name=gpu Type=gtx File=/dev/nvidia[3-5] COREs=0-1 Links=-1,0,0,0,0,0\n",
    );
    let sys = system(
        "1080ti|4|0-1|(null)|/dev/nvidia0\n1080ti|4|0-1|(null)|/dev/nvidia1\n1080ti|4|0-1|(null)|/dev/nvidia2\n\
         gtx560|4|0-1|0,0,0,-1,0,0|/dev/nvidia3\ngtx560|4|0-1|0,0,0,0,-1,0|/dev/nvidia4\ngtx560|4|0-1|-1,0,0,0,0,0|/dev/nvidia5\n",
    );
    let out = merge_system_gres_conf(conf, sys, ALL).unwrap();
    assert_eq!(
        parsable(&out),
        [
            "GRES_PARSABLE[gpu](1):gtx|4|0-1|-1,0,0,0,0,0|/dev/nvidia5|HAS_FILE,HAS_TYPE",
            "GRES_PARSABLE[gpu](1):ti|4|0-1|(null)|/dev/nvidia1|HAS_FILE,HAS_TYPE",
            "GRES_PARSABLE[gpu](1):ti|4|0-1|(null)|/dev/nvidia2|HAS_FILE,HAS_TYPE",
        ]
    );
    assert_eq!(out.log.iter().filter(|l| l.level == LogLevel::Error && l.message.contains("has mismatching Cores or Links")).count(), 3);
}

#[test]
fn end_to_end_links_order_then_files() {
    let conf = gres_conf_records(
        "Name=gpu Type=a100 File=/dev/nvidia0 COREs=0-1 Links=0,0,0,-1\n\
         Name=gpu Type=a100 File=/dev/nvidia1 COREs=0-1 Links=0,0,-1,0\n\
         Name=gpu Type=a100 File=/dev/nvidia2 COREs=0-1 Links=0,-1,0,0\n\
         Name=gpu Type=a100 File=/dev/nvidia3 COREs=0-1 Links=-1,0,0,0\n\
         Name=gpu Type=a100 File=/dev/nvidia[4-7] COREs=2-3\n",
    );
    let sys = system(
        "a100|4|0-1|-1,0,0,0|/dev/nvidia3\na100|4|0-1|0,-1,0,0|/dev/nvidia2\na100|4|0-1|0,0,-1,0|/dev/nvidia1\na100|4|0-1|0,0,0,-1|/dev/nvidia0\n\
         a100|4|2-3|(null)|/dev/nvidia7\na100|4|2-3|(null)|/dev/nvidia6\na100|4|2-3|(null)|/dev/nvidia5\na100|4|2-3|(null)|/dev/nvidia4\n",
    );
    let out = merge_system_gres_conf(conf, sys, ALL).unwrap();
    let files: Vec<_> = out.records.iter().map(|r| r.file.clone().unwrap()).collect();
    assert_eq!(files, ["/dev/nvidia3", "/dev/nvidia2", "/dev/nvidia1", "/dev/nvidia0", "/dev/nvidia4", "/dev/nvidia5", "/dev/nvidia6", "/dev/nvidia7"]);
    assert!(out.records.iter().all(|r| r.flags.0 == ConfFlags::HAS_FILE | ConfFlags::HAS_TYPE));
}

#[test]
fn end_to_end_config_only_gpus() {
    let conf =
        gres_conf_records("Name=gpu File=/dev/nvidia[0-1] Cores=0,1\nName=gpu File=/dev/nvidia[2-3] Cores=0,1 Links=-1\nName=gpu File=/dev/nvidia4 Cores=0\n");
    let out = merge_system_gres_conf(conf, Vec::new(), ALL).unwrap();
    let d = "HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT";
    assert_eq!(
        parsable(&out),
        [
            format!("GRES_PARSABLE[gpu](1):(null)|4|0,1|-1|/dev/nvidia2|{d}"),
            format!("GRES_PARSABLE[gpu](1):(null)|4|0,1|-1|/dev/nvidia3|{d}"),
            format!("GRES_PARSABLE[gpu](1):(null)|4|0,1|(null)|/dev/nvidia0|{d}"),
            format!("GRES_PARSABLE[gpu](1):(null)|4|0,1|(null)|/dev/nvidia1|{d}"),
            format!("GRES_PARSABLE[gpu](1):(null)|4|0|(null)|/dev/nvidia4|{d}"),
        ]
    );
}

#[test]
fn end_to_end_env_flags() {
    // `leftover`: GPUs slurm.conf has beyond gres.conf's, which slurmd
    // adds as one typed record without File.
    let flags = |gres_conf: &str, leftover: u64, fake: &str| -> Vec<String> {
        let mut conf = gres_conf_records(gres_conf);
        if leftover > 0 {
            conf.push(leftover_gpus(leftover));
        }
        let out = merge_system_gres_conf(conf, system(fake), ALL).unwrap();
        out.records.iter().map(flags_of).collect()
    };
    fn flags_of(r: &GresRecord) -> String {
        gres_core::model::flags_to_string(r.flags)
    }
    let fake = "a100|4|0-1|(null)|/dev/nvidia0|(null)|nvidia_gpu_env\n";
    // no_gpu_env in gres.conf wins over what detection says.
    let no_env = flags(
        "Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-1 Flags=no_gpu_env\nName=gpu Type=a100 File=/dev/nvidia[1-3] Cores=0-1 Flags=no_gpu_env\n",
        0,
        fake,
    );
    assert_eq!(no_env, vec!["HAS_FILE,HAS_TYPE"; 4]);
    // Detected GPU keeps its flags; config-only ones keep the configured ones.
    let mixed = flags("Name=gpu Type=a100 File=/dev/nvidia[1-3] Cores=0-1 Flags=amd_gpu_env\n", 1, fake);
    assert_eq!(mixed, ["HAS_FILE,HAS_TYPE,ENV_NVML", "HAS_FILE,HAS_TYPE,ENV_RSMI", "HAS_FILE,HAS_TYPE,ENV_RSMI", "HAS_FILE,HAS_TYPE,ENV_RSMI"]);
    // Flags are inherited by the following lines, across types.
    let inherited =
        flags("Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-1 Flags=amd_gpu_env,nvidia_gpu_env\nName=gpu Type=b100 File=/dev/nvidia1 Cores=0-1\n", 0, "");
    assert_eq!(inherited, vec!["HAS_FILE,HAS_TYPE,ENV_NVML,ENV_RSMI"; 2]);
}
