/*
 * Running processes (`proc`) and their utilisation samples (`util`).  See
 * standin.h.
 */

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "standin.h"

/* The PID of a `proc` or `util` entry now; 0 when its pidfile names none. */
static unsigned int entry_pid(const struct proc_entry *e)
{
	FILE *f;
	unsigned int pid = 0;

	if (e->pid || !e->pidfile[0])
		return e->pid;
	if (!(f = fopen(e->pidfile, "r")))
		return 0;
	if (fscanf(f, "%u", &pid) != 1)
		pid = 0;
	fclose(f);
	return pid;
}

/* nvmlProcessInfo_v1_t (the unversioned call) and _v2_t (the _v2 and _v3
 * calls), as nvml.h lays them out. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

/*
 * The running processes of one kind, as the driver answers: with no
 * process, NVML_SUCCESS and a count of 0 whatever the buffer; with a
 * buffer too small (or NULL), NVML_ERROR_INSUFFICIENT_SIZE and the count
 * needed; else the list.  `v` is 1 for the v1 layout, 2 for v2/v3.
 */
static nvmlReturn_t running_procs(nvmlDevice_t d, int graphics,
				  unsigned int *count, void *infos, int v)
{
	static __thread unsigned int pids[MAX_PROCS];
	static __thread unsigned long long mib[MAX_PROCS];
	unsigned int n = 0;

	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < n_procs; i++) {
		const struct proc_entry *e = &procs[i];
		unsigned int pid;

		if (e->dev != d || e->graphics != graphics ||
		    !(pid = entry_pid(e)))
			continue;
		pids[n] = pid;
		mib[n++] = e->mib;
	}
	if (!n) {
		*count = 0;
		return NVML_SUCCESS;
	}
	if (!infos || *count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned int i = 0; i < n; i++) {
		unsigned long long bytes = mib[i] * 1024 * 1024;

		if (v == 1) {
			nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *) infos + i;
			p->pid = pids[i];
			p->usedGpuMemory = bytes;
		} else {
			nvmlProcessInfo_v2_t *p = (nvmlProcessInfo_v2_t *) infos + i;
			p->pid = pids[i];
			p->usedGpuMemory = bytes;
			p->gpuInstanceId = d->is_mig ? d->gi : 0xFFFFFFFF;
			p->computeInstanceId = d->is_mig ? d->ci : 0xFFFFFFFF;
		}
	}
	*count = n;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *count, void *infos)
{
	DEVICE_CALL(d, " %u", count ? *count : 0);
	return running_procs(d, 0, count, infos, 1);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count, void *infos)
{
	DEVICE_CALL(d, " %u", count ? *count : 0);
	return running_procs(d, 0, count, infos, 2);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, void *infos)
{
	DEVICE_CALL(d, " %u", count ? *count : 0);
	return running_procs(d, 0, count, infos, 2);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *count, void *infos)
{
	DEVICE_CALL(d, " %u", count ? *count : 0);
	return running_procs(d, 1, count, infos, 1);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned int *count, void *infos)
{
	DEVICE_CALL(d, " %u", count ? *count : 0);
	return running_procs(d, 1, count, infos, 2);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, void *infos)
{
	DEVICE_CALL(d, " %u", count ? *count : 0);
	return running_procs(d, 1, count, infos, 2);
}

typedef struct {
	unsigned int pid;
	unsigned long long timeStamp;
	unsigned int smUtil;
	unsigned int memUtil;
	unsigned int encUtil;
	unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/*
 * Process utilisation samples newer than `last_seen` (microseconds since
 * the epoch), each stamped with the time of the call: as the driver, a
 * NULL buffer or one too small gives NVML_ERROR_INSUFFICIENT_SIZE and the
 * count; no sample gives NVML_ERROR_NOT_FOUND.
 */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d,
					      nvmlProcessUtilizationSample_t *u,
					      unsigned int *count,
					      unsigned long long last_seen)
{
	struct timespec ts;
	unsigned long long now;
	unsigned int n = 0;

	DEVICE_CALL(d, " %u %llu", count ? *count : 0, last_seen);
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (unsigned long long) ts.tv_sec * 1000000ULL +
	      (unsigned long long) ts.tv_nsec / 1000ULL;
	for (int i = 0; i < n_procs; i++)
		if (procs[i].dev == d && procs[i].graphics == -1 &&
		    entry_pid(&procs[i]) && now > last_seen)
			n++;
	if (!n)
		return NVML_ERROR_NOT_FOUND;
	if (!u || *count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	n = 0;
	for (int i = 0; i < n_procs; i++) {
		const struct proc_entry *e = &procs[i];
		unsigned int pid;

		if (e->dev != d || e->graphics != -1 || !(pid = entry_pid(e)) ||
		    now <= last_seen)
			continue;
		memset(&u[n], 0, sizeof(u[n]));
		u[n].pid = pid;
		u[n].timeStamp = now;
		u[n].smUtil = e->sm;
		u[n].memUtil = e->mem;
		n++;
	}
	*count = n;
	return NVML_SUCCESS;
}
