/*
 * C shim between the Rust plugins and slurmd: the few things Slurm offers
 * only as C macros or through the layout of its public slurm.h.
 */
#ifndef GRES_RS_SHIM_H
#define GRES_RS_SHIM_H

#include <stdbool.h>
#include <stdint.h>

/* slurm_conf.debug_flags of the running daemon. */
uint64_t gres_rs_debug_flags(void);
/* True when DebugFlags=Gres is set (log_flag(GRES, ...) in Slurm). */
bool gres_rs_debug_flag_gres(void);
/* slurm.conf GpuFreqDef (NULL when unset); owned by slurmd. */
const char *gres_rs_gpu_freq_def(void);
/* slurm.conf SlurmdParameters (NULL when unset); owned by the daemon. */
const char *gres_rs_slurmd_params(void);
/* Path of a file in slurmd's configuration directory (fake_gpus.conf);
 * the result is xmalloc'd and must be xfree'd. */
char *gres_rs_extra_conf_path(const char *name);

#endif
