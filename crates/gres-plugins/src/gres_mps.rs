//! `gres_mps.so`: GPU sharing through CUDA's Multi-Process Service.  A
//! node's mps count is spread over its GPUs; a job gets part of one GPU and
//! `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` with its share (gres.shtml, "MPS
//! Management").

super::sharing::sharing_gres_plugin!(
    GresMps,
    gres_core::sharing::SharedKind::Mps,
    file: gres_core::plugin_files::GRES_MPS,
    gres: "mps",
    forward_gpu_freq: false
);
