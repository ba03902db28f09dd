//! `libgres_rs.so`: the code of `gres_gpu.so`, `gres_mps.so`,
//! `gres_shard.so` and `gpu_nvml.so`, which forward every call here (see
//! `slurm_gpu_gres::ffi::export_macros`).
use slurm_gpu_gres::plugins::{gpu_nvml::GpuNvml, gres_gpu::GresGpu, gres_mps::GresMps, gres_shard::GresShard};

slurm_gpu_gres::export_gres_plugin!(gres_gpu => GresGpu);
slurm_gpu_gres::export_gres_plugin!(gres_mps => GresMps);
slurm_gpu_gres::export_gres_plugin!(gres_shard => GresShard);
slurm_gpu_gres::export_gpu_plugin!(gpu_nvml => GpuNvml);
