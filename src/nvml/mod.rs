//! GPU detection through NVML (being written).
