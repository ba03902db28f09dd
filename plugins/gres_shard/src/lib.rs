//! `gres_shard.so`, the file slurmd loads from `PluginDir`.
slurm_gpu_gres::declare_gres_plugin!(slurm_gpu_gres::plugins::gres_shard::GresShard);
