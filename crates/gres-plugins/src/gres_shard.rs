//! `gres_shard.so`: GPU sharing through shards.  A node's shard count is
//! spread over its GPUs; a job gets shards of one or more GPUs and the same
//! device variables as for a GPU, plus `SLURM_SHARDS_ON_NODE` (gres.shtml,
//! "Sharding").

super::sharing::sharing_gres_plugin!(
    GresShard,
    gres_core::sharing::SharedKind::Shard,
    file: gres_core::plugin_files::GRES_SHARD,
    gres: "shard",
    forward_gpu_freq: true
);
