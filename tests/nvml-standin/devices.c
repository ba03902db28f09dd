/*
 * The devices: count and handles, identity (name, UUID, PCI, minor
 * number), CPU affinity, NVLink, MIG mode and MIG devices.  See standin.h.
 */

#include <stdio.h>
#include <string.h>

#include "standin.h"

typedef struct {
	char busIdLegacy[16];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

typedef struct {
	unsigned int multiprocessorCount;
	unsigned int sharedCopyEngineCount;
	unsigned int sharedDecoderCount;
	unsigned int sharedEncoderCount;
	unsigned int sharedJpegCount;
	unsigned int sharedOfaCount;
	unsigned int gpuInstanceSliceCount;
	unsigned int computeInstanceSliceCount;
	unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	record("%s", __func__);
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
	pause_call(NULL, __func__);
	if (count_error)
		return count_error;
	*count = (unsigned int) n_gpus;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
	return nvmlDeviceGetCount_v2(count);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
					    nvmlDevice_t *device)
{
	int rc;

	record("%s %u", __func__, index);
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
	if (index >= (unsigned int) n_gpus || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((rc = failure(&gpus[index], __func__)))
		return rc;
	*device = &gpus[index];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index,
					 nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
	DEVICE_CALL(d, "");
	copy_str(name, len, d->name);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len)
{
	DEVICE_CALL(d, "");
	copy_str(uuid, len, d->uuid);
	return NVML_SUCCESS;
}

static void fill_pci(nvmlPciInfo_t *p, const char *bus_id, unsigned int id)
{
	unsigned int dom = 0, bus = 0, dev = 0, fn = 0;

	memset(p, 0, sizeof(*p));
	sscanf(bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
	p->domain = dom;
	p->bus = bus;
	p->device = dev;
	p->pciDeviceId = id;
	copy_str(p->busId, sizeof(p->busId), bus_id);
	snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "%04x:%02x:%02x.%x",
		 dom & 0xffff, bus & 0xff, dev & 0xff, fn & 0xf);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
	DEVICE_CALL(d, "");
	fill_pci(pci, d->bus_id, d->pci_device_id);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
	return nvmlDeviceGetPciInfo_v3(d, pci);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor)
{
	DEVICE_CALL(d, "");
	if (d->is_mig)
		return NVML_ERROR_NOT_SUPPORTED;
	*minor = d->minor;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t d, unsigned int size,
				       unsigned long *set)
{
	DEVICE_CALL(d, " %u", size);
	for (unsigned int i = 0; i < size; i++)
		set[i] = i < CPU_WORDS ? d->cpus[i] : 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link,
				       int *active)
{
	DEVICE_CALL(d, " %u", link);
	if (!d->lanes)
		return NVML_ERROR_NOT_SUPPORTED;
	if (link >= (unsigned int) d->lanes || link >= MAX_LANES)
		return NVML_ERROR_INVALID_ARGUMENT;
	*active = d->active[link];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d,
						  unsigned int link,
						  nvmlPciInfo_t *pci)
{
	DEVICE_CALL(d, " %u", link);
	if (!d->lanes)
		return NVML_ERROR_NOT_SUPPORTED;
	if (link >= (unsigned int) d->lanes || link >= MAX_LANES ||
	    !d->active[link])
		return NVML_ERROR_INVALID_ARGUMENT;
	fill_pci(pci, d->remote[link], 0);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current,
				   unsigned int *pending)
{
	DEVICE_CALL(d, "");
	if (!d->mig_supported)
		return NVML_ERROR_NOT_SUPPORTED;
	*current = d->mig_cur;
	*pending = d->mig_pend;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d,
					     unsigned int *count)
{
	DEVICE_CALL(d, "");
	if (!d->mig_supported)
		return NVML_ERROR_NOT_SUPPORTED;
	*count = d->mig_max;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d,
						  unsigned int index,
						  nvmlDevice_t *mig)
{
	DEVICE_CALL(d, " %u", index);
	if (d->is_mig || !d->mig_supported)
		return NVML_ERROR_NOT_SUPPORTED;
	if (index >= d->mig_max)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (index >= (unsigned int) d->n_migs)
		return NVML_ERROR_NOT_FOUND;
	*mig = &migs[d->migs[index]];
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id)
{
	DEVICE_CALL(d, "");
	if (!d->is_mig)
		return NVML_ERROR_NOT_SUPPORTED;
	*id = d->gi;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int *id)
{
	DEVICE_CALL(d, "");
	if (!d->is_mig)
		return NVML_ERROR_NOT_SUPPORTED;
	*id = d->ci;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t d,
					nvmlDeviceAttributes_t *a)
{
	DEVICE_CALL(d, "");
	memset(a, 0, sizeof(*a));
	a->gpuInstanceSliceCount = d->slices;
	a->computeInstanceSliceCount = d->ci_slices ? d->ci_slices : d->slices;
	a->memorySizeMB = d->mem_mb;
	a->multiprocessorCount = 14 * (d->slices ? d->slices : 8);
	return NVML_SUCCESS;
}
