//! `gres_shard.so`: GPU sharing through shard.  Loads and keeps the node's
//! shard device files; the sharing environment is being written (issue 4).

use super::gres_gpu::report_device_problems;
use super::{EnvTarget, GresPlugin, Host, NodeConfig, SetEnv};
use crate::core::devices;
use crate::core::env::{EnvChange, EnvOp};
use crate::core::model::{EpilogInfo, GresDevice, GresRecord, JobAlloc};
use crate::core::wire::{self, WireError, WireReader, WireWriter};
use std::sync::Mutex;

static STATE: Mutex<(Vec<GresDevice>, u64)> = Mutex::new((Vec::new(), 0));

pub struct GresShard;

impl GresPlugin for GresShard {
    const PLUGIN_NAME: &'static str = "Gres Shard plugin";
    const PLUGIN_TYPE: &'static str = "gres/shard";
    const GRES_NAME: &'static str = "shard";

    fn node_config_load(_host: &dyn Host, cfg: NodeConfig, records: &mut Vec<GresRecord>) -> Result<(), String> {
        let list = devices::build_device_list(records, Self::GRES_NAME, cfg.in_slurmd, &devices::stat_device);
        let result = report_device_problems(&list, Self::PLUGIN_NAME);
        let mut st = STATE.lock().unwrap_or_else(|p| p.into_inner());
        st.0 = list.devices;
        st.1 += 1;
        result
    }
    fn devices() -> Vec<GresDevice> {
        STATE.lock().unwrap_or_else(|p| p.into_inner()).0.clone()
    }
    fn devices_generation() -> u64 {
        STATE.lock().unwrap_or_else(|p| p.into_inner()).1
    }
    fn set_env(_host: &dyn Host, _target: EnvTarget<'_>, _req: &SetEnv<'_>) -> EnvChange {
        EnvChange::default()
    }
    fn send_stepd(w: &mut dyn WireWriter) {
        wire::write_devices(w, &Self::devices());
    }
    fn recv_stepd(r: &mut dyn WireReader) -> Result<(), WireError> {
        let devices = wire::read_devices(r);
        let mut st = STATE.lock().unwrap_or_else(|p| p.into_inner());
        st.1 += 1;
        match devices {
            Ok(d) => {
                st.0 = d;
                Ok(())
            }
            Err(e) => {
                st.0.clear();
                Err(e)
            }
        }
    }
    fn epilog_build_env(_job: &JobAlloc) -> Option<EpilogInfo> {
        None
    }
    fn epilog_set_env(_info: &EpilogInfo, _node_inx: usize) -> Vec<EnvOp> {
        Vec::new()
    }
}
