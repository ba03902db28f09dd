/*
 * Clocks (supported, application and locked clocks, the current clocks),
 * energy and power.  See standin.h.
 */

#include <string.h>

#include "standin.h"

static nvmlReturn_t give_list(const unsigned int *src, unsigned int n,
			      unsigned int *count, unsigned int *out)
{
	if (*count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	memcpy(out, src, n * sizeof(*src));
	*count = n;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d,
						 unsigned int *count,
						 unsigned int *clocks)
{
	DEVICE_CALL(d, "");
	if (!d->n_mem)
		return NVML_ERROR_NOT_SUPPORTED;
	return give_list(d->mem, (unsigned int) d->n_mem, count, clocks);
}

static struct gfx_list *gfx_for(nvmlDevice_t d, unsigned int mem)
{
	for (int i = 0; i < d->n_gfx; i++)
		if (d->gfx[i].mem == mem)
			return &d->gfx[i];
	return NULL;
}

nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d,
						   unsigned int mem,
						   unsigned int *count,
						   unsigned int *clocks)
{
	struct gfx_list *g;

	DEVICE_CALL(d, " %u", mem);
	if (!(g = gfx_for(d, mem)))
		return NVML_ERROR_NOT_FOUND;
	return give_list(g->f, g->n, count, clocks);
}

nvmlReturn_t nvmlDeviceSetApplicationsClocks(nvmlDevice_t d, unsigned int mem,
					      unsigned int gfx)
{
	struct gfx_list *g;
	int ok = 0;

	DEVICE_CALL(d, " %u %u", mem, gfx);
	if (!(g = gfx_for(d, mem)))
		return NVML_ERROR_INVALID_ARGUMENT;
	for (unsigned int i = 0; i < g->n; i++)
		ok |= g->f[i] == gfx;
	if (!ok)
		return NVML_ERROR_INVALID_ARGUMENT;
	d->app_mem = mem;
	d->app_gfx = gfx;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceResetApplicationsClocks(nvmlDevice_t d)
{
	DEVICE_CALL(d, "");
	d->app_mem = d->def_mem;
	d->app_gfx = d->def_gfx;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t d, int type,
					     unsigned int *mhz)
{
	DEVICE_CALL(d, " %d", type);
	switch (type) {
	case 0: /* graphics */
	case 1: /* SM */
		*mhz = d->app_gfx;
		return NVML_SUCCESS;
	case 2: /* memory */
		*mhz = d->app_mem;
		return NVML_SUCCESS;
	default:
		return NVML_ERROR_NOT_SUPPORTED;
	}
}

/* Locked clocks (driver 465.19.01 on): a range of supported clocks, which
 * nvmlDeviceGetClockInfo then reports (its upper end); the resets give the
 * clocks back to the application clocks. */
nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned int min,
					   unsigned int max)
{
	DEVICE_CALL(d, " %u %u", min, max);
	if (!min || min > max)
		return NVML_ERROR_INVALID_ARGUMENT;
	d->lock_gfx = max;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t d, unsigned int min,
					      unsigned int max)
{
	int ok = 0;

	DEVICE_CALL(d, " %u %u", min, max);
	if (!min || min > max)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < d->n_mem; i++)
		ok |= d->mem[i] == max;
	if (!ok)
		return NVML_ERROR_INVALID_ARGUMENT;
	d->lock_mem = max;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d)
{
	DEVICE_CALL(d, "");
	d->lock_gfx = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t d)
{
	DEVICE_CALL(d, "");
	d->lock_mem = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type,
				     unsigned int *mhz)
{
	DEVICE_CALL(d, " %d", type);
	switch (type) {
	case 0: /* graphics */
	case 1: /* SM */
		*mhz = d->lock_gfx ? d->lock_gfx : d->app_gfx;
		return NVML_SUCCESS;
	case 2: /* memory */
		*mhz = d->lock_mem ? d->lock_mem : d->app_mem;
		return NVML_SUCCESS;
	default:
		return NVML_ERROR_NOT_SUPPORTED;
	}
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d,
						  unsigned long long *mj)
{
	DEVICE_CALL(d, "");
	if (!d->energy_mj)
		return NVML_ERROR_NOT_SUPPORTED;
	*mj = d->energy_mj;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	DEVICE_CALL(d, "");
	if (!d->power_mw)
		return NVML_ERROR_NOT_SUPPORTED;
	*mw = d->power_mw;
	return NVML_SUCCESS;
}
