//! `gpu_nvml.so`: NVIDIA GPU detection through NVML for `AutoDetect=nvml`,
//! and `--gpu-freq`.  (Detection is being written: see issue 5.)

use super::{GpuPlugin, Host, NodeConfig};
use crate::core::model::{Bitmap, GresRecord};

pub struct GpuNvml;

impl GpuPlugin for GpuNvml {
    const PLUGIN_NAME: &'static str = "GPU NVML plugin";
    const PLUGIN_TYPE: &'static str = "gpu/nvml";

    fn system_gpu_list(_host: &dyn Host, _cfg: NodeConfig) -> Option<Vec<GresRecord>> {
        None
    }
    fn step_hardware_init(_usable: Option<&Bitmap>, _settings: Option<&str>) {}
    fn step_hardware_fini() {}
    fn test_cpu_conv(_mask: &str) -> Option<String> {
        None
    }
    fn device_count() -> Option<u32> {
        None
    }
}
