//! `gpu_nvml.so`, the file slurmd loads from `PluginDir`.
slurm_gpu_gres::declare_gpu_plugin!(slurm_gpu_gres::plugins::gpu_nvml::GpuNvml);
