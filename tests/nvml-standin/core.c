/*
 * The NVML stand-in's state and what every call shares: the call log
 * (GRES_RS_NVML_CALLS), the slow driver (delay_us) and the hanging call
 * (`delay`), failure injection (`fail`, `lost`), init and shutdown (which
 * load the fixture), error strings and versions.  See standin.h.
 */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin.h"

/* The state (standin.h). */
struct nvml_dev gpus[MAX_GPUS];
struct proc_entry procs[MAX_PROCS];
int n_procs;
struct nvml_dev migs[MAX_MIGS];
int n_gpus, n_migs_total;
char driver_version[80] = "535.104.05";
char nvml_version[80] = "12.535.104.05";
int init_error, count_error;
int init_count;
unsigned long delay_us, init_delay_ms;
struct xid_entry xids[MAX_XIDS];
int n_xids;
struct call_delay delays[MAX_DELAYS];
int n_delays;

void pause_us(unsigned long us)
{
	struct timespec ts = { .tv_sec = (time_t) (us / 1000000),
			       .tv_nsec = (long) (us % 1000000) * 1000 };

	while (us && nanosleep(&ts, &ts))
		;
}

void record(const char *fmt, ...)
{
	const char *path = getenv("GRES_RS_NVML_CALLS");
	FILE *f;
	va_list ap;

	pause_us(delay_us);
	if (!path || !*path)
		return;
	if (!(f = fopen(path, "a")))
		return;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}

int valid(nvmlDevice_t d)
{
	if (!d)
		return 0;
	if (d >= gpus && d < gpus + n_gpus)
		return 1;
	if (d >= migs && d < migs + n_migs_total)
		return 1;
	return 0;
}

const char *dev_name(nvmlDevice_t d)
{
	static __thread char buf[64];

	if (!valid(d))
		return "invalid";
	if (d->is_mig)
		snprintf(buf, sizeof(buf), "gpu%d/mig%d", d->parent, d->index);
	else
		snprintf(buf, sizeof(buf), "gpu%d", d->index);
	return buf;
}

/* The `delay`s of call `fn` on `d` (NULL: a call without a device). */
void pause_call(nvmlDevice_t d, const char *fn)
{
	for (int i = 0; i < n_delays; i++)
		if ((!delays[i].dev || delays[i].dev == d) &&
		    !strcmp(delays[i].fn, fn))
			pause_us(delays[i].ms * 1000);
}

/* What call `fn` on `d` fails with (0: nothing), after its delays: a lost
 * GPU (or a MIG device of one) fails every call, as the driver's do after
 * XID 79; else its `fail`s. */
int failure(nvmlDevice_t d, const char *fn)
{
	pause_call(d, fn);
	if (d->lost || (d->is_mig && gpus[d->parent].lost))
		return NVML_ERROR_GPU_IS_LOST;
	for (int i = 0; i < d->n_fails; i++)
		if (!strcmp(d->fail_fn[i], fn))
			return d->fail_code[i];
	return 0;
}

void copy_str(char *dst, unsigned int len, const char *src)
{
	if (!len)
		return;
	snprintf(dst, len, "%s", src);
}

static nvmlReturn_t do_init(const char *fn)
{
	const char *path = getenv("GRES_RS_NVML_FIXTURE");

	record("%s", fn);
	if (!init_count) {
		if (!path || !*path)
			return NVML_ERROR_DRIVER_NOT_LOADED;
		load_fixture(path);
		pause_us(init_delay_ms * 1000);
		pause_call(NULL, fn);
	}
	if (init_error)
		return init_error;
	init_count++;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void)
{
	return do_init(__func__);
}

nvmlReturn_t nvmlInit(void)
{
	return do_init(__func__);
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	(void) flags;
	return do_init(__func__);
}

nvmlReturn_t nvmlShutdown(void)
{
	record("%s", __func__);
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
	init_count--;
	return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case 0: return "Success";
	case 1: return "Uninitialized";
	case 2: return "Invalid Argument";
	case 3: return "Not Supported";
	case 4: return "Insufficient Permissions";
	case 5: return "Already Initialized";
	case 6: return "Not Found";
	case 7: return "Insufficient Size";
	case 8: return "Insufficient External Power";
	case 9: return "Driver Not Loaded";
	case 10: return "Timeout";
	case 11: return "Interrupt request issue";
	case 12: return "NVML Shared Library Not Found";
	case 13: return "Function Not Found";
	case 14: return "Corrupted infoROM";
	case 15: return "GPU is lost";
	case 16: return "GPU requires restart";
	case 17: return "The operating system has blocked the request.";
	case 18: return "RM has detected an NVML/RM version mismatch.";
	case 19: return "In use by another client";
	case 20: return "Insufficient Memory";
	case 21: return "No data";
	case 22: return "The requested vgpu operation is not available on target device, becasue ECC is enabled";
	case 23: return "Insufficient Resources";
	case 24: return "Frequency not supported";
	case 25: return "Argument version mismatch";
	case 26: return "Deprecated";
	case 27: return "Not Ready";
	case 28: return "GPU not found";
	case 29: return "Invalid state";
	case 30: return "Reset type not supported";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
	record("%s", __func__);
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
	copy_str(version, len, driver_version);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int len)
{
	record("%s", __func__);
	copy_str(version, len, nvml_version);
	return NVML_SUCCESS;
}
