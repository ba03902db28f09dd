/*
 * The bench's `usage` rows: one gpu plugin's gpu_p_usage_read() as
 * slurmstepd's jobacct_gather calls it, once per process of a step at
 * every poll, outside slurmstepd.
 *
 *   usage-read LIBSLURMFULL PLUGIN POLLS FIRST_PID PIDS
 *
 * Built for one release: cc -I crates/slurm-abi/slurm-headers/<series>.
 *
 * Loads LIBSLURMFULL (the release's libslurmfull.so), NVML (as slurmd's
 * gpu interface does before it loads gpu/nvml, which stock's plugin
 * needs) and PLUGIN (stock's or our gpu_nvml.so) into one process, calls
 * the plugin's init(), then POLLS times gpu_p_usage_read(pid, data) for
 * PIDS processes numbered from FIRST_PID, and fini().  It stands in for
 * what slurmstepd gives the plugins: it defines gpu_get_tres_pos()
 * (gres/gpumem at 0, gres/gpuutil at 1, as where both are in
 * AccountingStorageTRES), that this is slurmstepd (the answer of
 * running_in_slurmstepd(), or slurm_daemon from 25.05) and slurmd's
 * `conf`, which the plugins find here first (it is linked with
 * --export-dynamic).
 * Where GRES_RS_NVML_CALLS names the NVML stand-in's call log, that log is
 * emptied after the first poll, so it holds the calls of the other polls.
 * Prints "memory_bytes <sum> util <sum>" of the last poll.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* The release's ABI as the plugins see it (acct_gather_data_t,
 * gpu_get_tres_pos): crates/slurm-abi/slurm-headers/<series>, given with
 * -I by the bench. */
#include "slurm_gres_abi.h"

void gpu_get_tres_pos(int *gpumem_pos, int *gpuutil_pos)
{
	if (gpumem_pos)
		*gpumem_pos = 0;
	if (gpuutil_pos)
		*gpuutil_pos = 1;
}

/*
 * slurmstepd's slurmd_conf_t, which stock gpu/nvml reads (conf->pid, to
 * know whether NVML is initialized in this process): all zeros, larger
 * than the struct of any release.
 */
static char conf_space[1 << 16];
void *conf = conf_space;

/* Which daemon this is, from 25.05 (src/common/run_in_daemon.h: each
 * daemon defines it over libslurmfull's): slurmstepd, IS_SLURMSTEPD. */
uint32_t slurm_daemon = 1u << 5;

/* slurm_xlator.h's name of running_in_slurmstepd(), up to 25.11. */
bool slurm_running_in_slurmstepd(void)
{
	return true;
}

static void *need(void *lib, const char *name)
{
	void *f = dlsym(lib, name);
	if (!f) {
		fprintf(stderr, "usage-read: %s: %s\n", name, dlerror());
		exit(1);
	}
	return f;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s LIBSLURMFULL PLUGIN POLLS FIRST_PID PIDS\n", argv[0]);
		return 2;
	}
	int polls = atoi(argv[3]), first = atoi(argv[4]), pids = atoi(argv[5]);
	if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "usage-read: %s\n", dlerror());
		return 1;
	}
	if (!dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_GLOBAL)) {
		fprintf(stderr, "usage-read: %s\n", dlerror());
		return 1;
	}
	void *plugin = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
	if (!plugin) {
		fprintf(stderr, "usage-read: %s\n", dlerror());
		return 1;
	}
	int (*init)(void) = (int (*)(void)) need(plugin, "init");
	int (*fini)(void) = (int (*)(void)) need(plugin, "fini");
	int (*usage_read)(pid_t, acct_gather_data_t *) =
		(int (*)(pid_t, acct_gather_data_t *)) need(plugin, "gpu_p_usage_read");
	if (init() != 0) {
		fprintf(stderr, "usage-read: init failed\n");
		return 1;
	}
	/* What slurmstepd keeps per process between polls. */
	acct_gather_data_t *data = calloc((size_t) pids * 2, sizeof(*data));
	uint64_t mem = 0, util = 0;
	const char *calls = getenv("GRES_RS_NVML_CALLS");
	for (int p = 0; p < polls; p++) {
		mem = util = 0;
		for (int i = 0; i < pids; i++) {
			acct_gather_data_t *d = &data[i * 2];
			d[0].size_read = d[1].size_read = 0;
			if (usage_read(first + i, d) != 0) {
				fprintf(stderr, "usage-read: gpu_p_usage_read(%d) failed\n", first + i);
				return 1;
			}
			mem += d[0].size_read;
			util += d[1].size_read;
		}
		if (p == 0 && calls && *calls)
			(void) truncate(calls, 0);
	}
	printf("memory_bytes %llu util %llu\n", (unsigned long long) mem, (unsigned long long) util);
	fini();
	free(data);
	return 0;
}
