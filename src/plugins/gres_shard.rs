//! `gres_shard.so`: GPU sharing through shards.  A node's shard count is
//! spread over its GPUs; a job gets shards of one or more GPUs and the same
//! device variables as for a GPU, plus `SLURM_SHARDS_ON_NODE` (gres.shtml,
//! "Sharding").

use super::shared::{self, SharedState};
use super::{EnvTarget, GresPlugin, Host, NodeConfig, SetEnv};
use crate::core::env::{EnvChange, EnvOp};
use crate::core::model::{Bitmap, EpilogInfo, GresDevice, GresRecord, JobAlloc};
use crate::core::shared::SharedKind;
use crate::core::wire::{WireError, WireReader, WireWriter};
use std::sync::Mutex;

static STATE: Mutex<SharedState> = Mutex::new(SharedState::new());
const KIND: SharedKind = SharedKind::Shard;

pub struct GresShard;

impl GresPlugin for GresShard {
    const PLUGIN_NAME: &'static str = "Gres SHARD plugin";
    const PLUGIN_TYPE: &'static str = "gres/shard";
    const GRES_NAME: &'static str = "shard";

    fn init() -> Result<(), String> {
        tracing::debug!("loaded");
        Ok(())
    }
    fn fini() {
        tracing::debug!("unloading");
    }
    fn node_config_load(host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>) -> Result<(), String> {
        shared::node_config_load(KIND, &STATE, host, cfg, records)
    }
    fn devices() -> Vec<GresDevice> {
        shared::devices(&STATE)
    }
    fn devices_generation() -> u64 {
        shared::devices_generation(&STATE)
    }
    fn set_env(host: &dyn Host, target: EnvTarget<'_>, req: &SetEnv<'_>) -> EnvChange {
        shared::set_env(KIND, &STATE, host, target, req)
    }
    fn send_stepd(w: &mut dyn WireWriter) {
        shared::send_stepd(KIND, &STATE, w)
    }
    fn recv_stepd(r: &mut dyn WireReader) -> Result<(), WireError> {
        shared::recv_stepd(KIND, &STATE, r)
    }
    fn epilog_build_env(job: &JobAlloc) -> Option<EpilogInfo> {
        shared::epilog_build_env(job)
    }
    fn epilog_set_env(info: &EpilogInfo, node_inx: usize) -> Vec<EnvOp> {
        shared::epilog_set_env(KIND, &STATE, info, node_inx)
    }
    fn step_hardware_init(host: &dyn Host, usable: Option<&Bitmap>, settings: Option<&str>) {
        host.gpu_step_hardware_init(usable, settings);
    }
    fn step_hardware_fini(host: &dyn Host) {
        host.gpu_step_hardware_fini();
    }
}
