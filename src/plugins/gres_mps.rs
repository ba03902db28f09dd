//! `gres_mps.so`: GPU sharing through CUDA's Multi-Process Service.  A
//! node's mps count is spread over its GPUs; a job gets part of one GPU and
//! `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` with its share (gres.shtml, "MPS
//! Management").

use super::shared::{self, SharedState};
use super::{EnvTarget, GresPlugin, Host, NodeConfig, SetEnv};
use crate::core::env::{EnvChange, EnvOp};
use crate::core::model::{EpilogInfo, GresDevice, GresRecord, JobAlloc};
use crate::core::shared::SharedKind;
use crate::core::wire::{WireError, WireReader, WireWriter};
use std::sync::Mutex;

static STATE: Mutex<SharedState> = Mutex::new(SharedState::new());
const KIND: SharedKind = SharedKind::Mps;

pub struct GresMps;

impl GresPlugin for GresMps {
    const PLUGIN_NAME: &'static str = "Gres MPS plugin";
    const PLUGIN_TYPE: &'static str = "gres/mps";
    const GRES_NAME: &'static str = "mps";

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
    // No step_hardware_init: jobs using MPS cannot ask for a GPU frequency.
}
