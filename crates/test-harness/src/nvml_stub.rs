//! A stub `libnvidia-ml.so` for machines without an NVIDIA driver.
//!
//! Debian's slurmd picks the gpu/* plugin by dlopen()ing the vendor library
//! (`libnvidia-ml.so` for `AutoDetect=nvml`, see src/common/gpu.c). With
//! this stub on LD_LIBRARY_PATH slurmd selects gpu/nvml and therefore loads
//! gpu_nvml.so (Debian ships none, so only ours can be found). Every init
//! entry point fails with NVML_ERROR_DRIVER_NOT_LOADED (9), which the plugin
//! must handle like the stock one does: log an error, report no GPUs, and
//! let gres.conf decide.
//!
//! TODO(lead): a richer stub (device count, names, UUIDs, minor numbers,
//! PCI ids, NVLink) would allow testing autodetection end to end.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub const STUB_C: &str = r#"
/* Stub NVML for the slurm-gpu-gres test harness. */
typedef int nvmlReturn_t;
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_DRIVER_NOT_LOADED 9
nvmlReturn_t nvmlInit(void) { return NVML_ERROR_DRIVER_NOT_LOADED; }
nvmlReturn_t nvmlInit_v2(void) { return NVML_ERROR_DRIVER_NOT_LOADED; }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return NVML_ERROR_DRIVER_NOT_LOADED; }
nvmlReturn_t nvmlShutdown(void) { return NVML_ERROR_UNINITIALIZED; }
nvmlReturn_t nvmlDeviceGetCount(unsigned int *n) { if (n) *n = 0; return NVML_ERROR_UNINITIALIZED; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { if (n) *n = 0; return NVML_ERROR_UNINITIALIZED; }
const char *nvmlErrorString(nvmlReturn_t r)
{
	return r == NVML_ERROR_DRIVER_NOT_LOADED ? "Driver Not Loaded (gres-rs test stub)"
						 : "Uninitialized (gres-rs test stub)";
}
"#;

/// Compiles the stub into `<dir>/libnvidia-ml.so` (+ `.so.1` symlink) with
/// `cc`; returns `dir` (to put on LD_LIBRARY_PATH).
pub fn build(dir: &Path) -> Result<PathBuf, String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join("nvml_stub.c");
    fs::write(&src, STUB_C).map_err(|e| format!("{}: {e}", src.display()))?;
    let lib = dir.join("libnvidia-ml.so");
    let out = Command::new(super::tool("cc"))
        .args(["-shared", "-fPIC", "-O0", "-Wl,-soname,libnvidia-ml.so.1", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .map_err(|e| format!("running cc for the NVML stub (install build-essential): {e}"))?;
    if !out.status.success() {
        return Err(format!("cc failed building the NVML stub:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    let _ = std::os::unix::fs::symlink("libnvidia-ml.so", dir.join("libnvidia-ml.so.1"));
    Ok(dir.to_path_buf())
}
