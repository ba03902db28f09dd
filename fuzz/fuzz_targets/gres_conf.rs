//! gres.conf: `GresConf::parse_str` (with `Include`s read from memory),
//! then `node_config` for a few nodes as slurmd evaluates the file.
//!
//! Input: the gres.conf text; after the first NUL byte, the contents of
//! `/etc/slurm/inc.conf` (for `Include inc.conf`).  Invalid UTF-8 is read
//! lossily, as the parser does with files.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slurm_gpu_gres::config::syntax::MemReader;
use slurm_gpu_gres::config::gres_conf::{GresConf, NodeContext};
use std::path::Path;

const PATH: &str = "/etc/slurm/gres.conf";

fuzz_target!(|data: &[u8]| {
    let (main, inc) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let text = String::from_utf8_lossy(main);
    // The file itself is readable too, so that `Include gres.conf` is a cycle.
    let reader = MemReader::new().with(PATH, main.to_vec()).with("/etc/slurm/inc.conf", inc.to_vec());
    let conf = match GresConf::parse_str(&text, Path::new(PATH), &reader) {
        Ok(conf) => conf,
        Err(errors) => {
            assert!(!errors.0.is_empty(), "an error result without an error");
            let _ = errors.to_string();
            return;
        }
    };
    for d in conf.diagnostics() {
        let _ = d.to_log_line();
    }
    let _ = conf.global_autodetect();
    // Nodes to evaluate for: a fixed name, and the first names the file
    // gives (plain names only: expanding a fuzzed hostlist is the
    // hostlist target's job).
    let mut nodes: Vec<String> = vec!["node0".into()];
    nodes.extend(conf.node_names().iter().take(2).map(|s| s.value.clone()).filter(|n| !n.contains('[') && n.len() < 64));
    let types: Vec<String> = ["gpu", "mps", "shard", "nic"].iter().map(|s| s.to_string()).collect();
    let abs_to_mac = |cores: &str| -> Result<String, String> {
        if cores.len() % 7 == 3 {
            Err("conversion refused".into())
        } else {
            Ok(cores.to_string())
        }
    };
    for (i, node) in nodes.iter().enumerate() {
        // Any GRES name and Cores as written; then slurmd's context.
        let _ = conf.records_for_node(node, 4);
        let cpus = if i % 2 == 0 { 64 } else { 1 };
        let mut ctx = NodeContext::new(node, cpus);
        ctx.gres_types = Some(&types);
        ctx.abs_to_mac = Some(&abs_to_mac);
        if let Ok(nc) = conf.node_config(&ctx) {
            for r in &nc.records {
                assert_eq!(r.record.cpu_cnt, cpus, "a record's CPU count differs from the node's: {r:?}");
            }
            for d in &nc.diagnostics {
                let _ = d.to_log_line();
            }
        }
        let _ = conf.autodetect_for_node(node);
    }
});
