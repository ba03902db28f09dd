//! Tests of gres.conf reading and evaluation.

use super::*;
use crate::syntax::{ErrorKind, MemReader};

const ENV_DEFAULT: u32 = ConfFlags::ENV_SET | ConfFlags::ENV_DEF;

fn conf(text: &str) -> GresConf {
    GresConf::parse_str(text, Path::new("/etc/slurm/gres.conf"), &MemReader::new()).unwrap()
}

fn parse_err(text: &str) -> ConfErrors {
    GresConf::parse_str(text, Path::new("/etc/slurm/gres.conf"), &MemReader::new()).unwrap_err()
}

fn node(text: &str, node: &str) -> NodeGresConf {
    conf(text).node_config(&NodeContext::new(node, 16)).unwrap()
}

fn node_err(text: &str, node: &str) -> ConfError {
    conf(text).node_config(&NodeContext::new(node, 16)).unwrap_err()
}

fn has_diag(n: &NodeGresConf, level: LogLevel, text: &str) -> bool {
    n.diagnostics.iter().any(|d| d.level == level && d.message.contains(text))
}

#[test]
fn typed_gpu_line_with_files_and_cores() {
    let n = node("Name=gpu Type=a100 File=/dev/nvidia[0-3] Cores=0-7\n", "tux0");
    assert_eq!(n.records.len(), 1);
    let r = &n.records[0].record;
    assert_eq!(r.name, "gpu");
    assert_eq!(r.count, 4);
    assert_eq!(r.type_name.as_deref(), Some("a100"));
    assert_eq!(r.file.as_deref(), Some("/dev/nvidia[0-3]"));
    assert_eq!(r.cpu_cnt, 16);
    assert_eq!(r.cpus.as_deref(), Some("0-7"));
    assert_eq!(r.cpus_bitmap, Some(Bitmap::from_indices(16, &[0, 1, 2, 3, 4, 5, 6, 7])));
    assert_eq!(r.flags, ConfFlags(ConfFlags::HAS_FILE | ConfFlags::HAS_TYPE | ENV_DEFAULT));
    assert_eq!(r.plugin_id, gres_build_id("gpu"));
    assert_eq!(r.links, None);
    assert_eq!(n.autodetect, AutoDetect::Unset);
    assert_eq!(n.records[0].location.line, 1);
}

#[test]
fn keys_any_case_and_continuation() {
    let n = node("name=gpu \\\n  TYPE=v100 \\\n  fIlEs=/dev/nvidia0,/dev/nvidia2\n", "n");
    let r = &n.records[0].record;
    assert_eq!(r.count, 2);
    assert_eq!(r.type_name.as_deref(), Some("v100"));
    assert_eq!(r.flags, ConfFlags(ConfFlags::HAS_FILE | ConfFlags::HAS_TYPE | ENV_DEFAULT));
}

#[test]
fn nodename_lines_apply_to_listed_nodes_and_follow_name_lines() {
    let text = "NodeName=tux[0-1] Name=gpu Type=a File=/dev/nvidia0\n\
                Name=nic Count=2\n\
                NodeName=tux[2-3] Name=gpu Type=b File=/dev/nvidia1\n\
                NodeName=tux1,tux3 Name=gpu Type=c File=/dev/nvidia2\n";
    let types = |n: &NodeGresConf| n.records.iter().map(|r| r.record.type_name.clone().unwrap_or_else(|| r.record.name.clone())).collect::<Vec<_>>();
    assert_eq!(types(&node(text, "tux1")), ["nic", "a", "c"]);
    assert_eq!(types(&node(text, "tux2")), ["nic", "b"]);
    assert_eq!(types(&node(text, "other")), ["nic"]);
    let n = node(text, "other");
    assert!(has_diag(&n, LogLevel::Debug, "skipping GRES for NodeName=tux[0-1]"));
    assert_eq!(conf(text).node_names().iter().map(|s| s.value.as_str()).collect::<Vec<_>>(), ["tux[0-1]", "tux[2-3]", "tux1,tux3"]);
}

#[test]
fn bad_nodename_hostlist_skips_the_line() {
    let n = node("NodeName=tux[3-1] Name=gpu File=/dev/nvidia0\nName=nic\n", "tux1");
    assert_eq!(n.records.len(), 1);
    assert!(has_diag(&n, LogLevel::Error, "skipping GRES for NodeName=tux[3-1]"));
}

#[test]
fn counts_default_to_files_or_one_and_take_suffixes() {
    let n = node("Name=nic\nName=bandwidth Count=4G\nName=tmp Count=0\n", "n");
    let counts: Vec<u64> = n.records.iter().map(|r| r.record.count).collect();
    assert_eq!(counts, [1, 4 << 30, 0]);
    assert_eq!(n.records[0].record.flags, ConfFlags(0));
}

#[test]
fn count_errors() {
    let e = node_err("Name=gpu File=/dev/nvidia[0-1] Count=3\n", "n");
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert_eq!(e.message, "Invalid GRES record for gpu, count does not match File value");
    assert_eq!((e.location.line, e.location.column), (1, 38));
    assert_eq!(node_err("Name=nic Count=abc\n", "n").message, "Invalid GRES record for nic, invalid count abc");
    assert_eq!(node_err("Name=nic Count=-2\n", "n").message, "Invalid GRES record for nic, invalid count -2");
    assert_eq!(node_err("Name=nic Count=4X\n", "n").message, "Invalid GRES record for nic, invalid count 4X");
    assert_eq!(node_err("Name=nic Count=18446744073709551614\n", "n").message, "GRES nic has invalid count value 18446744073709551614");
    assert!(node("Name=gpu File=/dev/nvidia[0-1] Count=2\n", "n").records[0].record.count == 2);
}

#[test]
fn shared_gres_count_may_differ_from_files() {
    let n = node("Name=gpu File=/dev/nvidia0\nName=mps Count=100 File=/dev/nvidia0\nName=shard Count=8 File=/dev/nvidia0\n", "n");
    let mps = &n.records[1].record;
    assert_eq!(mps.count, 100);
    assert_eq!(mps.flags, ConfFlags(ConfFlags::HAS_FILE | ConfFlags::SHARED | ConfFlags::ONE_SHARING));
    let shard = &n.records[2].record;
    assert_eq!(shard.count, 8);
    assert_eq!(shard.flags, ConfFlags(ConfFlags::HAS_FILE | ConfFlags::SHARED));
    // Upper case is not a shared name for Slurm, so the count check applies.
    assert!(node_err("Name=MPS Count=100 File=/dev/nvidia0\n", "n").message.contains("count does not match File value"));
}

#[test]
fn mps_sharing_flags() {
    let n = node("Name=mps Type=a Count=100 Flags=all_sharing\nName=mps Type=b Count=100 Flags=CountOnly\n", "n");
    let t = ConfFlags::HAS_TYPE | ConfFlags::SHARED;
    assert_eq!(n.records[0].record.flags, ConfFlags(t));
    assert_eq!(n.records[1].record.flags, ConfFlags(t | ConfFlags::COUNT_ONLY | ConfFlags::ONE_SHARING));
}

#[test]
fn multiple_files() {
    let n = node("Name=gpu MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21\n", "n");
    let r = &n.records[0].record;
    assert_eq!(r.count, 1);
    assert_eq!(r.file.as_deref(), Some("/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21"));
    assert_eq!(r.flags, ConfFlags(ConfFlags::HAS_FILE | ConfFlags::HAS_MULT | ENV_DEFAULT));
    assert_eq!(node_err("Name=gpu MultipleFiles=/dev/nvidia0\n", "n").message, "MultipleFiles does not contain multiple files. Use File instead");
    assert_eq!(node_err("Name=gpu File=/dev/nvidia0 MultipleFiles=/dev/nvidia[1-2]\n", "n").message, "File and MultipleFiles options are mutually exclusive");
    assert!(node_err("Name=gpu File=/dev/nvidia[0-\n", "n").message.starts_with("can't parse File=/dev/nvidia[0-"));
}

#[test]
fn explicit_env_flags_replace_the_defaults_and_are_inherited() {
    let text = "Name=gpu Type=a File=/dev/nvidia0 Flags=nvidia_gpu_env\nName=gpu Type=a File=/dev/nvidia1\nName=nic Count=1\n";
    let n = node(text, "n");
    let flags: Vec<u32> = n.records.iter().map(|r| r.record.flags.0).collect();
    let base = ConfFlags::HAS_FILE | ConfFlags::HAS_TYPE;
    assert_eq!(flags, [base | ConfFlags::ENV_NVML, base | ConfFlags::ENV_NVML, 0]);
}

#[test]
fn default_env_flags_are_inherited_too() {
    let n = node("Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\n", "n");
    assert!(n.records.iter().all(|r| r.record.flags.0 == ConfFlags::HAS_FILE | ENV_DEFAULT));
}

#[test]
fn env_flag_conflicts_are_fatal() {
    let e = node_err("Name=gpu Type=a File=/dev/nvidia0 Flags=nvidia_gpu_env\nName=gpu Type=a File=/dev/nvidia1 Flags=amd_gpu_env\n", "n");
    assert_eq!(e.message, "Invalid GRES record name=gpu type=a: Flags (amd_gpu_env) does not match env flags for previous GRES of same node and name");
    assert_eq!(e.location.line, 2);
    // As in Slurm, a line with the defaults followed by one with explicit
    // env flags is a mismatch too.
    assert!(node_err("Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1 Flags=opencl_env\n", "n").message.contains("does not match env flags"));
    let e = node_err("Name=gpu File=/dev/nvidia0 Flags=no_gpu_env,nvidia_gpu_env\n", "n");
    assert_eq!(
        e.message,
        "Invalid GRES record name=gpu type=(null): Flags (no_gpu_env,nvidia_gpu_env) contains \"no_gpu_env\", which must be mutually exclusive to all other GRES env flags of same node and name"
    );
}

#[test]
fn no_gpu_env_clears_and_is_inherited() {
    let n = node("Name=gpu File=/dev/nvidia0 Flags=no_gpu_env\nName=gpu File=/dev/nvidia1\n", "n");
    assert!(n.records.iter().all(|r| r.record.flags.0 == ConfFlags::HAS_FILE));
}

#[test]
fn env_flags_on_other_nodes_lines_are_not_seen() {
    let text = "NodeName=a Name=gpu File=/dev/nvidia0 Flags=amd_gpu_env\nNodeName=b Name=gpu File=/dev/nvidia0 Flags=nvidia_gpu_env\n";
    assert_eq!(node(text, "b").records[0].record.flags.0, ConfFlags::HAS_FILE | ConfFlags::ENV_NVML);
}

#[test]
fn links_are_checked() {
    let n = node("Name=gpu File=/dev/nvidia0 Links=-1,2\nName=gpu File=/dev/nvidia1 Link=0,0\n", "n");
    assert_eq!(n.records[0].record.links.as_deref(), Some("-1,2"));
    assert_eq!(n.records[1].record.links, None);
    assert!(has_diag(&n, LogLevel::Error, "gres.conf: Ignoring invalid Links=0,0 for Name=gpu"));
    assert!(has_diag(&n, LogLevel::Error, "-1 wasn't found in links string '0,0'"));
}

#[test]
fn cores_and_cpus() {
    let n = node("Name=gpu File=/dev/nvidia0 CPUs=2-3\nName=gpu File=/dev/nvidia1 Cores=4 CPUs=5\n", "n");
    assert_eq!(n.records[0].record.cpus.as_deref(), Some("2-3"));
    assert_eq!(n.records[1].record.cpus_bitmap, Some(Bitmap::from_indices(16, &[4])));
    assert!(has_diag(&n, LogLevel::Debug, "CPUs=2-3 is not being converted to machine-local format"));
    let e = node_err("Name=gpu File=/dev/nvidia0 Cores=0-31\n", "n");
    assert_eq!(e.message, "Invalid GRES data for gpu, Cores=0-31 (only 16 CPUs are available)");
    assert_eq!(e.location.column, 34);
    let zero = conf("Name=gpu File=/dev/nvidia0 Cores=0\n").node_config(&NodeContext::new("n", 0)).unwrap_err();
    assert_eq!(zero.message, "Invalid GRES data for gpu, Cores=0 (only 0 CPUs are available)");
}

#[test]
fn cores_go_through_the_machine_conversion() {
    let convert = |abs: &str| -> Result<String, String> {
        match abs {
            "0-1" => Ok("0,8".to_string()),
            _ => Err("no".to_string()),
        }
    };
    let c = conf("Name=gpu File=/dev/nvidia0 Cores=0-1\nName=gpu File=/dev/nvidia1 Cores=9\n");
    let ctx = NodeContext { abs_to_mac: Some(&convert), ..NodeContext::new("n", 16) };
    let n = c.node_config(&ctx).unwrap();
    assert_eq!(n.records[0].record.cpus.as_deref(), Some("0-1"));
    assert_eq!(n.records[0].record.cpus_bitmap, Some(Bitmap::from_indices(16, &[0, 8])));
    assert_eq!(n.records[1].record.cpus.as_deref(), Some("9"));
    assert_eq!(n.records[1].record.cpus_bitmap, None);
    assert!(has_diag(&n, LogLevel::Error, "Invalid GRES data for gpu, Cores=9"));
}

#[test]
fn gres_types_filter_names_and_give_plugin_ids() {
    let types = vec!["gpu".to_string(), "mps".to_string()];
    let c = conf("Name=GPU File=/dev/nvidia0\nName=nic Count=1\n");
    let ctx = NodeContext { gres_types: Some(&types), ..NodeContext::new("n", 4) };
    let n = c.node_config(&ctx).unwrap();
    assert_eq!(n.records.len(), 1);
    assert_eq!(n.records[0].record.name, "GPU");
    assert_eq!(n.records[0].record.plugin_id, gres_build_id("gpu"));
    // "GPU" still gets the GPU env defaults (compared without case).
    assert_eq!(n.records[0].record.flags.0, ConfFlags::HAS_FILE | ENV_DEFAULT);
    assert!(has_diag(&n, LogLevel::Error, "Ignoring gres.conf record, invalid name: nic"));
}

#[test]
fn autodetect_global_local_and_off() {
    let text = "AutoDetect=nvml\nNodeName=tux3 AutoDetect=off Name=gpu File=/dev/nvidia[0-3]\nNodeName=tux4 AutoDetect=rsmi\n";
    let c = conf(text);
    assert_eq!(node(text, "tux1").autodetect, AutoDetect::Nvml);
    assert_eq!(node(text, "tux3").autodetect, AutoDetect::Off);
    assert_eq!(node(text, "tux3").records.len(), 1);
    let n4 = node(text, "tux4");
    assert_eq!(n4.autodetect, AutoDetect::Rsmi);
    // AutoDetect alone on a NodeName line makes no record and no error.
    assert!(n4.records.is_empty());
    assert!(!n4.diagnostics.iter().any(|d| d.level == LogLevel::Error));
    assert_eq!(c.autodetect_for_node("tux3").unwrap(), AutoDetect::Off);
    assert_eq!(c.autodetect_for_node("tux9").unwrap(), AutoDetect::Nvml);
    assert_eq!(node("Name=nic\n", "x").autodetect, AutoDetect::Unset);
    assert_eq!(node("AutoDetect=OneAPI\n", "x").autodetect, AutoDetect::OneApi);
    assert_eq!(node("AutoDetect=OFF\n", "x").autodetect, AutoDetect::Off);
}

#[test]
fn autodetect_problems() {
    let e = node_err("NodeName=t AutoDetect=nvml\nNodeName=t AutoDetect=rsmi\n", "t");
    assert_eq!(e.message, "gres.conf: duplicate node-local AutoDetect specification does not match the first");
    assert_eq!(e.location.line, 2);
    assert_eq!(conf("NodeName=t AutoDetect=nvml\nNodeName=t AutoDetect=rsmi\n").autodetect_for_node("t").unwrap_err().kind, ErrorKind::Invalid);
    assert_eq!(node("NodeName=t AutoDetect=nvml\nNodeName=t AutoDetect=NVML\n", "t").autodetect, AutoDetect::Nvml);
    let n = node("AutoDetect=cuda\n", "x");
    assert_eq!(n.autodetect, AutoDetect::Unset);
    assert!(has_diag(&n, LogLevel::Error, "unknown autodetect flag 'cuda'"));
    let n = node("Name=gpu AutoDetect=nvml File=/dev/nvidia0\n", "x");
    assert_eq!(n.autodetect, AutoDetect::Unset);
    assert!(has_diag(&n, LogLevel::Error, "In-line AutoDetect requires NodeName to take effect"));
    let n = node("AutoDetect=nvml\nAutoDetect=rsmi\n", "x");
    assert_eq!(n.autodetect, AutoDetect::Rsmi);
    assert!(has_diag(&n, LogLevel::Error, "AutoDetect specified more than once"));
}

#[test]
fn nodename_line_without_name() {
    let n = node("NodeName=x File=/dev/nvidia0\n", "x");
    assert!(n.records.is_empty());
    assert!(has_diag(&n, LogLevel::Error, "Invalid GRES data, no type name (NodeName=x File=/dev/nvidia0)"));
}

#[test]
fn consistency_checks() {
    let e = node_err("Name=gpu Type=a File=/dev/nvidia0\nName=gpu Type=b\n", "n");
    assert_eq!(e.message, "gres.conf for gpu, some records have \"File\" specification while others do not");
    assert_eq!(e.location.line, 2);
    let e = node_err("Name=gpu Type=a File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\n", "n");
    assert_eq!(e.message, "gres.conf for gpu, some records have \"Type=\" specification while others do not");
    assert_eq!(node_err("Name=nic Count=1\nName=nic Count=2\n", "n").message, "gres.conf duplicate records for nic");
    // Different names are checked apart.
    assert_eq!(node("Name=gpu File=/dev/nvidia0\nName=nic Count=2\n", "n").records.len(), 2);
}

#[test]
fn repeated_keys_keep_the_last_value() {
    let n = node("Name=gpu File=/dev/nvidia0 File=/dev/nvidia1\n", "n");
    assert_eq!(n.records[0].record.file.as_deref(), Some("/dev/nvidia1"));
    assert!(has_diag(&n, LogLevel::Error, "File specified more than once, latest value used"));
    // File wins over Files, Link over Links, as in Slurm.
    let n = node("Name=gpu Files=/dev/nvidia1 File=/dev/nvidia0 Links=0,-1 Link=-1,0\n", "n");
    assert_eq!(n.records[0].record.file.as_deref(), Some("/dev/nvidia0"));
    assert_eq!(n.records[0].record.links.as_deref(), Some("-1,0"));
}

#[test]
fn syntax_errors_are_located_with_suggestions() {
    let errs = parse_err("Name=gpu Fil=/dev/nvidia0\nNme=gpu\nFile=/dev/x\nName=gpu NodeName=x\nAutoDetect=nvml Name=gpu\nName=gpu what\n").0;
    assert_eq!(errs.len(), 6);
    assert_eq!(errs[0].kind, ErrorKind::UnknownKey);
    assert_eq!((errs[0].location.line, errs[0].location.column, errs[0].location.len), (1, 10, 3));
    assert_eq!(errs[0].suggestion.as_deref(), Some("File"));
    assert_eq!(errs[0].to_string(), "/etc/slurm/gres.conf:1:10: Parsing error at unrecognized key: Fil (did you mean \"File\"?)");
    assert_eq!(errs[1].suggestion.as_deref(), Some("Name"));
    assert!(errs[2].message.contains("must start with Name= or NodeName= before File"));
    assert!(errs[3].message.contains("NodeName must be the first key"));
    assert_eq!(errs[4].kind, ErrorKind::Syntax);
    assert_eq!(errs[5].kind, ErrorKind::Syntax);
    assert_eq!(errs[5].message, "Parse error: \"what\"");
    assert_eq!((errs[5].location.line, errs[5].location.column), (6, 10));
}

#[test]
fn includes_and_error_places() {
    let reader = MemReader::new()
        .with("/etc/slurm/gres.conf", "Name=gpu File=/dev/nvidia0\ninclude gres.d/more.conf\n")
        .with("/etc/slurm/gres.d/more.conf", "# more\nName=nic\nName=mps Count=x\n");
    let c = GresConf::load_with(&reader, Path::new("/etc/slurm/gres.conf")).unwrap();
    let e = c.node_config(&NodeContext::new("n", 4)).unwrap_err();
    assert_eq!(e.location.path, Path::new("/etc/slurm/gres.d/more.conf"));
    assert_eq!(e.location.line, 3);
    let reader = MemReader::new().with("/g.conf", "Name=gpu File=/dev/nvidia0\ninclude /h.conf\n").with("/h.conf", "Name=nic\n");
    let n = GresConf::load_with(&reader, Path::new("/g.conf")).unwrap().node_config(&NodeContext::new("n", 4)).unwrap();
    assert_eq!(n.records.iter().map(|r| r.record.name.as_str()).collect::<Vec<_>>(), ["gpu", "nic"]);
    assert_eq!(n.records[1].location.path, Path::new("/h.conf"));
}

#[test]
fn empty_and_comment_only_files() {
    assert!(node("", "n").records.is_empty());
    assert!(node("# nothing\n\n   \n", "n").records.is_empty());
}

#[test]
fn records_for_node_convenience() {
    let records = conf("NodeName=a Name=gpu File=/dev/nvidia[0-1]\n").records_for_node("a", 8).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].count, 2);
    assert_eq!(records[0].cpu_cnt, 8);
}

#[test]
fn suggest_key_knows_nodename() {
    assert_eq!(suggest_key("NodeNme"), Some("NodeName"));
    assert_eq!(suggest_key("Multiplefile"), Some("MultipleFiles"));
}

#[test]
fn arbitrary_input_never_panics() {
    let samples = [
        "Name=gpu Count=99999999999999999999999999999",
        "NodeName=[ Name=gpu",
        "Name=gpu Cores=-",
        "Name=gpu Cores=5-1",
        "Name=gpu Links=,,,",
        "Name=gpu File=\"\"",
        "Name=\"\" File=/dev/x",
        "NodeName=n AutoDetect=\"\"",
        "Name=gpu Flags=\"\" Type=\"\"",
        "Name=gpu MultipleFiles=a[0-99999999999]",
    ];
    for s in samples {
        if let Ok(c) = GresConf::parse_str(s, Path::new("f"), &MemReader::new()) {
            let _ = c.node_config(&NodeContext::new("n", 4));
            let _ = c.autodetect_for_node("n");
        }
    }
}

/// gres.conf read as a release that behaves as `behaviour`.
fn node_as(text: &str, node: &str, behaviour: &gres_core::behaviour::Behaviour) -> NodeGresConf {
    conf(text).node_config(&NodeContext { behaviour, ..NodeContext::new(node, 16) }).unwrap()
}

#[test]
fn autodetect_values_follow_the_behaviour() {
    use gres_core::behaviour::{Behaviour, Feature};
    let old = Behaviour::BASELINE;
    let nrt = Behaviour { autodetect_nrt: true, ..old };
    let nvidia = Behaviour { autodetect_nvidia: true, ..nrt };
    let full = Behaviour { autodetect_full: true, ..nvidia };
    for (value, first, mode) in
        [("nrt", &nrt, AutoDetect::Nrt), ("NVIDIA", &nvidia, AutoDetect::Nvidia), ("full", &full, AutoDetect::Full), ("full,nvml", &full, AutoDetect::Full)]
    {
        let text = format!("AutoDetect={value}\n");
        assert_eq!(node_as(&text, "x", first).autodetect, mode, "{value}");
        assert!(!node_as(&text, "x", first).diagnostics.iter().any(|d| d.level == LogLevel::Error), "{value}");
    }
    // Before its release: unknown, as slurmd says, with the feature.
    let n = node_as("NodeName=x AutoDetect=full\n", "x", &nvidia);
    assert_eq!(n.autodetect, AutoDetect::Unset);
    let d = n.diagnostics.iter().find(|d| d.level == LogLevel::Error).unwrap();
    assert_eq!((d.message.as_str(), d.feature), ("unknown autodetect flag 'full'", Some(Feature::AutoDetectFull)));
    assert_eq!((d.location.as_ref().unwrap().line, d.location.as_ref().unwrap().column), (1, 23));
    // A release without `full` reads `full,nvml` as nvml; with it, as full.
    assert_eq!(node_as("AutoDetect=full,nvml\n", "x", &old).autodetect, AutoDetect::Nvml);
    assert_eq!(AutoDetect::later_feature("nvidia", &old), Some(Feature::AutoDetectNvidia));
    assert_eq!(AutoDetect::later_feature("nvidia", &nvidia), None);
    assert_eq!(AutoDetect::later_feature("cuda", &old), None);
    let n = node_as("AutoDetect=nrt\n", "x", &old);
    assert_eq!(n.diagnostics.iter().find(|d| d.level == LogLevel::Error).unwrap().feature, Some(Feature::AutoDetectNrt));
}

#[test]
fn flag_words_follow_the_behaviour() {
    use gres_core::behaviour::{Behaviour, ConfBit14, Feature};
    let text = "Name=gpu File=/dev/nvidia0 Flags=nvidia_gpu_env,env_uuid,Explicit\n";
    let old = node_as(text, "x", &Behaviour::BASELINE);
    assert_eq!(old.records[0].record.flags.0, ConfFlags::HAS_FILE | ConfFlags::ENV_NVML);
    let warnings: Vec<_> = old.diagnostics.iter().filter(|d| d.feature.is_some()).collect();
    assert_eq!(warnings.len(), 2);
    assert_eq!(warnings[0].message, "WARNING: Flags word \"explicit\" is unknown to this Slurm release, which ignores it");
    assert_eq!((warnings[0].location.as_ref().unwrap().column, warnings[0].location.as_ref().unwrap().len), (58, 8));
    assert_eq!(warnings[1].feature, Some(Feature::FlagEnvUuid));
    assert_eq!((warnings[1].location.as_ref().unwrap().column, warnings[1].location.as_ref().unwrap().len), (49, 8));
    let explicit = Behaviour { flag_explicit: true, ..Behaviour::BASELINE };
    let n = node_as(text, "x", &explicit);
    assert_eq!(n.records[0].record.flags.0, ConfFlags::HAS_FILE | ConfFlags::ENV_NVML | ConfFlags::EXPLICIT);
    assert_eq!(n.diagnostics.iter().filter(|d| d.feature.is_some()).count(), 1);
    let uuid = Behaviour { flag_env_uuid: true, conf_bit14: ConfBit14::Uuid, ..explicit };
    let n = node_as(text, "x", &uuid);
    assert_eq!(n.records[0].record.flags.0, ConfFlags::HAS_FILE | ConfFlags::ENV_NVML | ConfFlags::EXPLICIT | ConfFlags::BIT14);
    assert!(n.diagnostics.iter().all(|d| d.feature.is_none()));
    // env_uuid alone is a modifier: the default env flags stay.
    let n = node_as("Name=gpu File=/dev/nvidia0 Flags=env_uuid\n", "x", &uuid);
    assert_eq!(n.records[0].record.flags.0, ConfFlags::HAS_FILE | ENV_DEFAULT | ConfFlags::BIT14);
}

#[test]
fn flag_words_slurm_does_not_know_are_warned_with_the_closest_one() {
    let text = "Name=gpu File=/dev/nvidia0 Flags=nvida_gpu_env,CountOnly,bogus\n";
    let n = node(text, "x");
    let unknown: Vec<_> = n.diagnostics.iter().filter(|d| d.message.contains("is not a flag Slurm knows")).collect();
    assert_eq!(unknown.len(), 2, "{:?}", n.diagnostics);
    assert_eq!(unknown[0].message, "WARNING: Flags word \"nvida_gpu_env\" is not a flag Slurm knows: slurmd ignores it without a word");
    assert_eq!(unknown[0].suggestion.as_deref(), Some("nvidia_gpu_env"));
    let loc = unknown[0].location.as_ref().unwrap();
    assert_eq!((loc.line, loc.column, loc.len), (1, 34, 13));
    assert_eq!(unknown[1].suggestion, None);
    assert_eq!(unknown[1].location.as_ref().unwrap().column, 58);
    // Slurm finds its words anywhere: these are known, and quiet.
    for quiet in ["Flags=xCountOnlyx", "Flags=NVIDIA_GPU_ENV", "Flags=no_gpu_env", "Flags=explicit", "Flags=all_sharing"] {
        let n = node(&format!("Name=gpu File=/dev/nvidia0 {quiet}\n"), "x");
        assert!(n.diagnostics.iter().all(|d| !d.message.contains("is not a flag")), "{quiet}: {:?}", n.diagnostics);
    }
}

#[test]
fn other_flags_drop_default_env_from_23_02_to_25_11() {
    use gres_core::behaviour::Behaviour;
    let text = "Name=gpu File=/dev/nvidia[0-1] Flags=CountOnly\n";
    let flags = |b: &Behaviour| node_as(text, "n", b).records[0].record.flags;
    // 22.05 and 26.05: a Flags= without env flags keeps the defaults.
    assert!(flags(&Behaviour::BASELINE).has(ConfFlags::ENV_DEF));
    // 23.02 - 25.11: any Flags= drops them.
    let b = Behaviour { any_flags_drop_default_env: true, ..Behaviour::BASELINE };
    let f = flags(&b);
    assert!(f.has(ConfFlags::COUNT_ONLY) && !f.has(ConfFlags::ENV_DEF) && f.0 & ConfFlags::ENV_SET == 0, "{f:?}");
}
