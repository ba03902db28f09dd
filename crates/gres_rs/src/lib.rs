//! `libgres_rs.so`: the code of `gres_gpu.so`, `gres_mps.so`,
//! `gres_shard.so` and `gpu_nvml.so`, which forward every call here (see
//! `gres_slurm_abi::export_macros`).
use gres_plugins::{gpu_nvml::GpuNvml, gres_gpu::GresGpu, gres_mps::GresMps, gres_shard::GresShard};

gres_slurm_abi::export_gres_plugin!(gres_gpu => GresGpu);
gres_slurm_abi::export_gres_plugin!(gres_mps => GresMps);
gres_slurm_abi::export_gres_plugin!(gres_shard => GresShard);
gres_slurm_abi::export_gpu_plugin!(gpu_nvml => GpuNvml);
