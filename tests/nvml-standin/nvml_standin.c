/*
 * A stand-in for NVIDIA's libnvidia-ml.so.1, for tests on machines without
 * an NVIDIA GPU.  It exports, with NVML's names and C signatures, the calls
 * slurm-gpu-gres makes (through nvml-wrapper, which looks each symbol up on
 * its own and only fails a call whose symbol is missing), and answers them
 * from a fixture file describing a node's GPUs.
 *
 * Environment:
 *   GRES_RS_NVML_FIXTURE  the fixture file, read by nvmlInit*; without it
 *                         nvmlInit* fails with NVML_ERROR_DRIVER_NOT_LOADED.
 *   GRES_RS_NVML_CALLS    if set, every call appends a line
 *                         "<function> <device> <arguments>" to this file.
 *
 * Fixture format: one setting per line, '#' starts a comment.
 *   driver <version>            nvml <version>
 *   init_error <code>           count_error <code>
 *   gpu                         starts the next GPU (NVML index order)
 *   mig                         starts the next MIG device of that GPU
 *   then, for the current GPU or MIG device:
 *   name <text...>   uuid <s>   bus_id <dddddddd:bb:dd.f>   pci_device_id <hex>
 *   minor <n>        cpus <machine CPU list, e.g. 0-55,112-167>
 *   nvlink_lanes <n>            lanes that exist (none: NOT_SUPPORTED)
 *   nvlink <lane> <remote bus id>   an active lane
 *   mig_mode <current> <pending>    (none: NOT_SUPPORTED)
 *   mig_max <n>
 *   gi <n>  ci <n>  slices <n>  mem_mb <n>      (MIG attributes)
 *   mem_clocks <a,b,...>        gfx_clocks <mem> <a,b,...>
 *   app_clocks <mem> <gfx>      default and current application clocks
 *                               (and the current clocks while none are
 *                               locked: nvmlDeviceSet*LockedClocks)
 *   energy_mj <n>   power_mw <n>
 *   ci_slices <n>               a MIG device's compute-instance slices
 *                               (default: its `slices`)
 *   proc <compute|graphics> <pid> <MiB>
 *                               a process running on this device, using
 *                               that much memory; <pid> is a number or
 *                               pidfile:<path>, read at each call (a
 *                               test's task writes its own PID there);
 *                               a pidfile that is absent or empty lists
 *                               no process
 *   util <pid> <sm%> <mem%>     a process utilisation sample of <pid> (as
 *                               for proc), stamped with the time of the
 *                               call in microseconds, as the driver
 *                               samples all the time
 *   fail <function> <code>      that call fails on this device
 *                               (nvmlDeviceGetHandleByIndex_v2 included)
 *   delay_us <n>                (anywhere) every call takes n microseconds
 *                               longer: a slow driver
 *   init_delay_ms <n>           (anywhere) nvmlInit* takes n milliseconds
 *                               longer when it loads the fixture
 *
 * The fixture is read again by the first nvmlInit* after the last
 * nvmlShutdown, so a test may change it between two uses of NVML (a GPU
 * that falls off the bus while jobs run).
 */

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct nvml_dev *nvmlDevice_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9

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

#define MAX_GPUS 64
#define MAX_MIGS 256
#define CPU_WORDS 512
#define MAX_LANES 18
#define MAX_FAILS 16
#define MAX_CLOCKS 256
#define MAX_MEM 16
#define MAX_PROCS 2048 /* proc and util entries of all devices */

struct gfx_list {
	unsigned int mem;
	unsigned int n;
	unsigned int f[MAX_CLOCKS];
};

/* A process of `proc` or a sample of `util`. */
struct proc_entry {
	const struct nvml_dev *dev;
	int graphics;		/* proc: 1 graphics, 0 compute; -1 a util sample */
	unsigned int pid;	/* 0: read from pidfile */
	char pidfile[256];
	unsigned long long mib;	/* proc */
	unsigned int sm, mem;	/* util */
};

struct nvml_dev {
	int is_mig;
	int index;	/* NVML index, or MIG index within the parent */
	int parent;	/* MIG: index of the parent GPU */
	char name[96];
	char uuid[96];
	char bus_id[32];
	unsigned int pci_device_id;
	unsigned int minor;
	unsigned long cpus[CPU_WORDS];
	int lanes;
	int active[MAX_LANES];
	char remote[MAX_LANES][32];
	int mig_supported;
	unsigned int mig_cur, mig_pend, mig_max;
	int migs[MAX_MIGS];
	int n_migs;
	unsigned int gi, ci, slices;
	unsigned long long mem_mb;
	unsigned int mem[MAX_MEM];
	int n_mem;
	struct gfx_list gfx[MAX_MEM];
	int n_gfx;
	unsigned int def_mem, def_gfx, app_mem, app_gfx;
	unsigned int lock_mem, lock_gfx;	/* locked clocks, 0: none */
	unsigned long long energy_mj;
	unsigned int power_mw;
	unsigned int ci_slices;
	char fail_fn[MAX_FAILS][64];
	int fail_code[MAX_FAILS];
	int n_fails;
};

static struct nvml_dev gpus[MAX_GPUS];
static struct proc_entry procs[MAX_PROCS];
static int n_procs;
static struct nvml_dev migs[MAX_MIGS];
static int n_gpus, n_migs_total;
static char driver_version[80] = "535.104.05";
static char nvml_version[80] = "12.535.104.05";
static int init_error, count_error;
static int init_count;
static unsigned long delay_us, init_delay_ms;

static void pause_us(unsigned long us)
{
	struct timespec ts = { .tv_sec = (time_t) (us / 1000000),
			       .tv_nsec = (long) (us % 1000000) * 1000 };

	while (us && nanosleep(&ts, &ts))
		;
}

static void record(const char *fmt, ...)
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

static int valid(nvmlDevice_t d)
{
	if (!d)
		return 0;
	if (d >= gpus && d < gpus + n_gpus)
		return 1;
	if (d >= migs && d < migs + n_migs_total)
		return 1;
	return 0;
}

static const char *dev_name(nvmlDevice_t d)
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

static int failure(nvmlDevice_t d, const char *fn)
{
	for (int i = 0; i < d->n_fails; i++)
		if (!strcmp(d->fail_fn[i], fn))
			return d->fail_code[i];
	return 0;
}

/* Common prologue of a device call: log, check state, handle, failures. */
#define DEVICE_CALL(d, fmt, ...)                                             \
	do {                                                                 \
		int _rc;                                                     \
		record("%s %s" fmt, __func__, dev_name(d), ##__VA_ARGS__);   \
		if (!init_count)                                             \
			return NVML_ERROR_UNINITIALIZED;                     \
		if (!valid(d))                                               \
			return NVML_ERROR_INVALID_ARGUMENT;                  \
		if ((_rc = failure(d, __func__)))                            \
			return _rc;                                          \
	} while (0)

static void copy_str(char *dst, unsigned int len, const char *src)
{
	if (!len)
		return;
	snprintf(dst, len, "%s", src);
}

static void set_cpus(unsigned long *words, char *list)
{
	char *save = NULL;

	memset(words, 0, sizeof(unsigned long) * CPU_WORDS);
	for (char *tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		unsigned int lo, hi;
		int n = sscanf(tok, "%u-%u", &lo, &hi);

		if (n < 1)
			continue;
		if (n == 1)
			hi = lo;
		for (unsigned int c = lo; c <= hi && c < CPU_WORDS * 64; c++)
			words[c / 64] |= 1UL << (c % 64);
	}
}

static int parse_list(char *s, unsigned int *out, int max)
{
	int n = 0;
	char *save = NULL;

	for (char *tok = strtok_r(s, ",", &save); tok && n < max;
	     tok = strtok_r(NULL, ",", &save))
		out[n++] = (unsigned int) strtoul(tok, NULL, 10);
	return n;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char) *s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char) e[-1]))
		*--e = '\0';
	return s;
}

static void load_fixture(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	struct nvml_dev *cur = NULL;

	memset(gpus, 0, sizeof(gpus));
	memset(migs, 0, sizeof(migs));
	n_gpus = n_migs_total = n_procs = 0;
	init_error = count_error = 0;
	delay_us = init_delay_ms = 0;
	if (!f) {
		init_error = NVML_ERROR_DRIVER_NOT_LOADED;
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#');
		char *key, *rest;

		if (hash)
			*hash = '\0';
		key = trim(line);
		if (!*key)
			continue;
		rest = key;
		while (*rest && !isspace((unsigned char) *rest))
			rest++;
		if (*rest)
			*rest++ = '\0';
		rest = trim(rest);

		if (!strcmp(key, "driver")) {
			copy_str(driver_version, sizeof(driver_version), rest);
		} else if (!strcmp(key, "nvml")) {
			copy_str(nvml_version, sizeof(nvml_version), rest);
		} else if (!strcmp(key, "init_error")) {
			init_error = atoi(rest);
		} else if (!strcmp(key, "count_error")) {
			count_error = atoi(rest);
		} else if (!strcmp(key, "delay_us")) {
			delay_us = strtoul(rest, NULL, 10);
		} else if (!strcmp(key, "init_delay_ms")) {
			init_delay_ms = strtoul(rest, NULL, 10);
		} else if (!strcmp(key, "gpu")) {
			if (n_gpus >= MAX_GPUS)
				break;
			cur = &gpus[n_gpus];
			cur->index = n_gpus++;
		} else if (!strcmp(key, "mig")) {
			struct nvml_dev *p = cur && cur->is_mig ?
				&gpus[cur->parent] : cur;
			if (!p || n_migs_total >= MAX_MIGS)
				continue;
			cur = &migs[n_migs_total];
			cur->is_mig = 1;
			cur->parent = p->index;
			cur->index = p->n_migs;
			p->migs[p->n_migs++] = n_migs_total++;
		} else if (!cur) {
			continue;
		} else if (!strcmp(key, "name")) {
			copy_str(cur->name, sizeof(cur->name), rest);
		} else if (!strcmp(key, "uuid")) {
			copy_str(cur->uuid, sizeof(cur->uuid), rest);
		} else if (!strcmp(key, "bus_id")) {
			copy_str(cur->bus_id, sizeof(cur->bus_id), rest);
		} else if (!strcmp(key, "pci_device_id")) {
			cur->pci_device_id = (unsigned int) strtoul(rest, NULL, 16);
		} else if (!strcmp(key, "minor")) {
			cur->minor = (unsigned int) strtoul(rest, NULL, 10);
		} else if (!strcmp(key, "cpus")) {
			set_cpus(cur->cpus, rest);
		} else if (!strcmp(key, "nvlink_lanes")) {
			cur->lanes = atoi(rest);
		} else if (!strcmp(key, "nvlink")) {
			int lane;
			char bus[32];
			if (sscanf(rest, "%d %31s", &lane, bus) == 2 &&
			    lane >= 0 && lane < MAX_LANES) {
				cur->active[lane] = 1;
				copy_str(cur->remote[lane], 32, bus);
			}
		} else if (!strcmp(key, "mig_mode")) {
			cur->mig_supported = 1;
			sscanf(rest, "%u %u", &cur->mig_cur, &cur->mig_pend);
		} else if (!strcmp(key, "mig_max")) {
			cur->mig_max = (unsigned int) strtoul(rest, NULL, 10);
		} else if (!strcmp(key, "gi")) {
			cur->gi = (unsigned int) strtoul(rest, NULL, 10);
		} else if (!strcmp(key, "ci")) {
			cur->ci = (unsigned int) strtoul(rest, NULL, 10);
		} else if (!strcmp(key, "slices")) {
			cur->slices = (unsigned int) strtoul(rest, NULL, 10);
		} else if (!strcmp(key, "mem_mb")) {
			cur->mem_mb = strtoull(rest, NULL, 10);
		} else if (!strcmp(key, "mem_clocks")) {
			cur->n_mem = parse_list(rest, cur->mem, MAX_MEM);
		} else if (!strcmp(key, "gfx_clocks")) {
			char *list = rest;
			struct gfx_list *g;
			if (cur->n_gfx >= MAX_MEM)
				continue;
			g = &cur->gfx[cur->n_gfx++];
			g->mem = (unsigned int) strtoul(rest, &list, 10);
			g->n = (unsigned int) parse_list(trim(list), g->f,
							 MAX_CLOCKS);
		} else if (!strcmp(key, "app_clocks")) {
			sscanf(rest, "%u %u", &cur->def_mem, &cur->def_gfx);
			cur->app_mem = cur->def_mem;
			cur->app_gfx = cur->def_gfx;
		} else if (!strcmp(key, "energy_mj")) {
			cur->energy_mj = strtoull(rest, NULL, 10);
		} else if (!strcmp(key, "power_mw")) {
			cur->power_mw = (unsigned int) strtoul(rest, NULL, 10);
		} else if (!strcmp(key, "ci_slices")) {
			cur->ci_slices = (unsigned int) strtoul(rest, NULL, 10);
		} else if (!strcmp(key, "proc") || !strcmp(key, "util")) {
			struct proc_entry *e;
			char kind[16] = "", who[256] = "";
			unsigned long long a = 0, b = 0;
			int util = !strcmp(key, "util");
			int n;

			if (n_procs >= MAX_PROCS)
				continue;
			e = &procs[n_procs];
			memset(e, 0, sizeof(*e));
			e->dev = cur;
			if (util) {
				n = sscanf(rest, "%255s %llu %llu", who, &a, &b);
				if (n != 3)
					continue;
				e->graphics = -1;
				e->sm = (unsigned int) a;
				e->mem = (unsigned int) b;
			} else {
				n = sscanf(rest, "%15s %255s %llu", kind, who, &a);
				if (n != 3 || (strcmp(kind, "compute") &&
					       strcmp(kind, "graphics")))
					continue;
				e->graphics = !strcmp(kind, "graphics");
				e->mib = a;
			}
			if (!strncmp(who, "pidfile:", 8))
				copy_str(e->pidfile, sizeof(e->pidfile), who + 8);
			else
				e->pid = (unsigned int) strtoul(who, NULL, 10);
			n_procs++;
		} else if (!strcmp(key, "fail")) {
			char fn[64];
			int code;
			if (cur->n_fails < MAX_FAILS &&
			    sscanf(rest, "%63s %d", fn, &code) == 2) {
				copy_str(cur->fail_fn[cur->n_fails], 64, fn);
				cur->fail_code[cur->n_fails++] = code;
			}
		}
	}
	fclose(f);
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

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	record("%s", __func__);
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
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
