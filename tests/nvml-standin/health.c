/*
 * GPU faults, as a health check reads them: ECC mode and error counts,
 * retired pages, row remapping, clock event (throttle) reasons, the
 * driver's recovery action (a field value), and XID critical errors
 * through NVML's event API.  A lost GPU (`lost`) fails
 * every call in DEVICE_CALL (core.c's failure()).  The fixture keys are in
 * fixture.c; the types and constants are nvml.h's.  See standin.h.
 */

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin.h"

/* nvmlMemoryErrorType_t, nvmlEccCounterType_t, nvmlPageRetirementCause_t */
#define NVML_MEMORY_ERROR_TYPE_CORRECTED 0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_AGGREGATE_ECC 1
#define NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS 0
#define NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERRORS 1

/* nvmlEventType* bits */
#define nvmlEventTypeSingleBitEccError 0x0000000000000001LL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002LL
#define nvmlEventTypePState 0x0000000000000004LL
#define nvmlEventTypeXidCriticalError 0x0000000000000008LL
#define nvmlEventTypeClock 0x0000000000000010LL
#define SUPPORTED_EVENTS                                                     \
	(nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError |    \
	 nvmlEventTypePState | nvmlEventTypeXidCriticalError |                \
	 nvmlEventTypeClock)
/* gpuInstanceId / computeInstanceId of an event no MIG device caused */
#define NO_INSTANCE 0xFFFFFFFFu

typedef int nvmlEnableState_t;

/* nvmlFieldValue_t and its union nvmlValue_t, as nvml.h lays them out;
 * the field id and nvmlValueType_t value the stand-in answers. */
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230
#define NVML_VALUE_TYPE_UNSIGNED_INT 1

typedef union {
	double dVal;
	int siVal;
	unsigned int uiVal;
	unsigned long ulVal;
	unsigned long long ullVal;
	signed long long sllVal;
	unsigned short usVal;
} nvmlValue_t;

typedef struct {
	unsigned int fieldId;
	unsigned int scopeId;
	long long timestamp;
	long long latencyUsec;
	int valueType;
	nvmlReturn_t nvmlReturn;
	nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType;
	unsigned long long eventData;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlEventData_t;

/* An event set: the event types each GPU is registered for, and the next
 * queued XID it delivers (every set sees the whole queue). */
#define MAX_SETS 16
struct event_set {
	int used;
	unsigned long long types[MAX_GPUS];
	int next;
};
typedef struct event_set *nvmlEventSet_t;

static struct event_set sets[MAX_SETS];

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, nvmlEnableState_t *current,
				  nvmlEnableState_t *pending)
{
	DEVICE_CALL(d, "");
	if (d->is_mig || !d->ecc_supported)
		return NVML_ERROR_NOT_SUPPORTED;
	if (!current || !pending)
		return NVML_ERROR_INVALID_ARGUMENT;
	*current = (nvmlEnableState_t) d->ecc_cur;
	*pending = (nvmlEnableState_t) d->ecc_pend;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int error_type,
					 int counter_type,
					 unsigned long long *count)
{
	DEVICE_CALL(d, " %d %d", error_type, counter_type);
	if (d->is_mig || !d->ecc_supported || !d->ecc_cur)
		return NVML_ERROR_NOT_SUPPORTED;
	if (!count || counter_type < NVML_VOLATILE_ECC ||
	    counter_type > NVML_AGGREGATE_ECC)
		return NVML_ERROR_INVALID_ARGUMENT;
	switch (error_type) {
	case NVML_MEMORY_ERROR_TYPE_CORRECTED:
		*count = d->sbe[counter_type];
		return NVML_SUCCESS;
	case NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
		*count = d->dbe[counter_type];
		return NVML_SUCCESS;
	default:
		return NVML_ERROR_INVALID_ARGUMENT;
	}
}

static nvmlReturn_t pages(nvmlDevice_t d, int cause, unsigned int *count,
			  unsigned long long *addresses,
			  unsigned long long *timestamps)
{
	unsigned int n;

	if (d->is_mig || !d->pages_supported)
		return NVML_ERROR_NOT_SUPPORTED;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	switch (cause) {
	case NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS:
		n = d->pages_sbe;
		break;
	case NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERRORS:
		n = d->pages_dbe;
		break;
	default:
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	/* A count of 0 asks for the number of pages only. */
	if (!*count) {
		*count = n;
		return NVML_SUCCESS;
	}
	if (*count < n) {
		*count = n;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	for (unsigned int i = 0; i < n; i++) {
		if (addresses)
			addresses[i] = 0x100000ULL * (cause + 1) + i;
		if (timestamps)
			timestamps[i] = 1700000000ULL + i;
	}
	*count = n;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause,
				       unsigned int *count,
				       unsigned long long *addresses)
{
	DEVICE_CALL(d, " %d %u", cause, count ? *count : 0);
	return pages(d, cause, count, addresses, NULL);
}

nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t d, int cause,
					  unsigned int *count,
					  unsigned long long *addresses,
					  unsigned long long *timestamps)
{
	DEVICE_CALL(d, " %d %u", cause, count ? *count : 0);
	return pages(d, cause, count, addresses, timestamps);
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d,
						    nvmlEnableState_t *pending)
{
	DEVICE_CALL(d, "");
	if (d->is_mig || !d->pages_supported)
		return NVML_ERROR_NOT_SUPPORTED;
	if (!pending)
		return NVML_ERROR_INVALID_ARGUMENT;
	*pending = d->pages_pending ? 1 : 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corr,
				       unsigned int *unc,
				       unsigned int *pending,
				       unsigned int *failed)
{
	DEVICE_CALL(d, "");
	if (d->is_mig || !d->remap_supported)
		return NVML_ERROR_NOT_SUPPORTED;
	if (!corr || !unc || !pending || !failed)
		return NVML_ERROR_INVALID_ARGUMENT;
	*corr = d->remap_corr;
	*unc = d->remap_unc;
	*pending = d->remap_pending ? 1 : 0;
	*failed = d->remap_failure ? 1 : 0;
	return NVML_SUCCESS;
}

/* Both names of the clock event (throttle) reasons: the bits of `throttle`. */
static nvmlReturn_t clock_reasons(nvmlDevice_t d, unsigned long long *mask)
{
	if (!d->throttle_supported)
		return NVML_ERROR_NOT_SUPPORTED;
	if (!mask)
		return NVML_ERROR_INVALID_ARGUMENT;
	*mask = d->throttle;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d,
						     unsigned long long *mask)
{
	DEVICE_CALL(d, "");
	return clock_reasons(d, mask);
}

/* The name before driver 535 (same call, same bits). */
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d,
							unsigned long long *mask)
{
	DEVICE_CALL(d, "");
	return clock_reasons(d, mask);
}

/* The value's own nvmlReturn that `field_fail` sets for field `id` on
 * `d`; 0: none. */
static int field_failure(nvmlDevice_t d, unsigned int id)
{
	for (int i = 0; i < d->n_field_fails; i++)
		if (d->field_fail_id[i] == id)
			return d->field_fail_code[i];
	return 0;
}

/* Each value answered on its own: its `field_fail` code if it has one,
 * else the recovery action where the fixture sets one
 * (`recovery_action`), NOT_SUPPORTED for it otherwise (a driver before
 * R565) and for every other field. */
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int valuesCount,
				      nvmlFieldValue_t *values)
{
	struct timespec ts;

	DEVICE_CALL(d, " %d", valuesCount);
	if (valuesCount <= 0 || !values)
		return NVML_ERROR_INVALID_ARGUMENT;
	clock_gettime(CLOCK_REALTIME, &ts);
	for (int i = 0; i < valuesCount; i++) {
		nvmlFieldValue_t *v = &values[i];

		v->timestamp = (long long) ts.tv_sec * 1000000 +
			ts.tv_nsec / 1000;
		v->latencyUsec = 0;
		if ((v->nvmlReturn = field_failure(d, v->fieldId)))
			continue;
		if (v->fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION &&
		    !d->is_mig && d->recovery_supported) {
			v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
			v->value.uiVal = d->recovery_action;
			v->nvmlReturn = NVML_SUCCESS;
		} else {
			v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
		}
	}
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d,
					      unsigned long long *types)
{
	DEVICE_CALL(d, "");
	if (d->is_mig)
		return NVML_ERROR_NOT_SUPPORTED;
	if (!types)
		return NVML_ERROR_INVALID_ARGUMENT;
	*types = SUPPORTED_EVENTS;
	return NVML_SUCCESS;
}

static int valid_set(nvmlEventSet_t set)
{
	return set && set >= sets && set < sets + MAX_SETS && set->used;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	record("%s", __func__);
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
	if (!set)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < MAX_SETS; i++) {
		if (!sets[i].used) {
			memset(&sets[i], 0, sizeof(sets[i]));
			sets[i].used = 1;
			*set = &sets[i];
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_INSUFFICIENT_SIZE;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d,
				      unsigned long long types,
				      nvmlEventSet_t set)
{
	DEVICE_CALL(d, " 0x%llx", types);
	if (d->is_mig || (types & ~SUPPORTED_EVENTS))
		return NVML_ERROR_NOT_SUPPORTED;
	if (!valid_set(set))
		return NVML_ERROR_INVALID_ARGUMENT;
	set->types[d->index] |= types;
	return NVML_SUCCESS;
}

/* The next queued XID for `set` (skipping those of GPUs it does not
 * watch); NULL when none is left. */
static const struct xid_entry *next_xid(nvmlEventSet_t set)
{
	while (set->next < n_xids) {
		const struct xid_entry *x = &xids[set->next++];
		const struct nvml_dev *g =
			x->dev->is_mig ? &gpus[x->dev->parent] : x->dev;

		if (set->types[g->index] & nvmlEventTypeXidCriticalError)
			return x;
	}
	return NULL;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
				 unsigned int timeout_ms)
{
	const struct xid_entry *x;

	record("%s %u", __func__, timeout_ms);
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
	if (!valid_set(set) || !data)
		return NVML_ERROR_INVALID_ARGUMENT;
	pause_call(NULL, __func__);
	if (!(x = next_xid(set))) {
		pause_us(timeout_ms * 1000UL);
		return NVML_ERROR_TIMEOUT;
	}
	memset(data, 0, sizeof(*data));
	data->device = x->dev->is_mig ? &gpus[x->dev->parent] :
		(nvmlDevice_t) x->dev;
	data->eventType = nvmlEventTypeXidCriticalError;
	data->eventData = x->xid;
	data->gpuInstanceId = x->dev->is_mig ? x->dev->gi : NO_INSTANCE;
	data->computeInstanceId = x->dev->is_mig ? x->dev->ci : NO_INSTANCE;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	record("%s", __func__);
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
	if (!valid_set(set))
		return NVML_ERROR_INVALID_ARGUMENT;
	set->used = 0;
	return NVML_SUCCESS;
}
