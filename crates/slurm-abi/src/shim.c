/*
 * See include/gres_rs_shim.h.  Compiled by build.rs against the public
 * headers of the Slurm release the plugins are built for.
 */
#include <slurm/slurm.h>

#include "gres_rs_shim.h"

/* Defined by libslurmfull.so (src/common/read_config.c). */
extern slurm_conf_t slurm_conf;
extern char *slurm_get_extra_conf_path(char *conf_name);

uint64_t gres_rs_debug_flags(void)
{
	return slurm_conf.debug_flags;
}

bool gres_rs_debug_flag_gres(void)
{
	return (slurm_conf.debug_flags & DEBUG_FLAG_GRES) != 0;
}

char *gres_rs_extra_conf_path(const char *name)
{
	return slurm_get_extra_conf_path((char *) name);
}

const char *gres_rs_gpu_freq_def(void)
{
	return slurm_conf.gpu_freq_def;
}

const char *gres_rs_slurmd_params(void)
{
	return slurm_conf.slurmd_params;
}
