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
 * The fixture file's format is described in fixture.c.  The fixture is
 * read again by the first nvmlInit* after the last nvmlShutdown, so a test
 * may change it between two uses of NVML (a GPU that falls off the bus
 * while jobs run).
 *
 * The files, one concept each (the harness compiles every .c file of this
 * directory, plus stubs for the rest of nvml-functions.txt):
 *   standin.h    this header: the NVML types and return codes the files
 *                share, the fixture model (struct nvml_dev, the state),
 *                DEVICE_CALL and the shared helpers
 *   core.c       the state, the call log, failure injection, init and
 *                shutdown, error strings, versions
 *   fixture.c    the fixture file's format and its reader
 *   devices.c    device count and handles, identity, PCI, CPU affinity,
 *                NVLink, MIG
 *   clocks.c     supported, application and locked clocks; energy, power
 *   processes.c  running processes and their utilisation samples
 *   health.c     GPU faults: ECC error counts, retired pages, row
 *                remapping, clock event (throttle) reasons, the
 *                recovery action (field values), XID events
 */

#ifndef NVML_STANDIN_H
#define NVML_STANDIN_H

typedef int nvmlReturn_t;
typedef struct nvml_dev *nvmlDevice_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_GPU_IS_LOST 15

#define MAX_GPUS 64
#define MAX_MIGS 256
#define CPU_WORDS 512
#define MAX_LANES 18
#define MAX_FAILS 16
#define MAX_CLOCKS 256
#define MAX_MEM 16
#define MAX_PROCS 2048 /* proc and util entries of all devices */
#define MAX_XIDS 256
#define MAX_DELAYS 32

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
	/* `field_fail`: a field value's own nvmlReturn (health.c). */
	unsigned int field_fail_id[MAX_FAILS];
	int field_fail_code[MAX_FAILS];
	int n_field_fails;
	/* Health (health.c); each *_supported 0: the call is NOT_SUPPORTED. */
	int lost;	/* every call on it (and its MIG devices): GPU_IS_LOST */
	int ecc_supported;
	unsigned int ecc_cur, ecc_pend;
	unsigned long long dbe[2], sbe[2];	/* [0] volatile, [1] aggregate */
	int pages_supported;
	unsigned int pages_sbe, pages_dbe, pages_pending;
	int remap_supported;
	unsigned int remap_corr, remap_unc, remap_pending, remap_failure;
	int throttle_supported;
	unsigned long long throttle;
	int recovery_supported;
	unsigned int recovery_action;	/* nvmlDeviceGpuRecoveryAction_t */
};

/* An XID (`xid`): on `dev`, a GPU or a MIG device (delivered as its
 * parent's, with its GPU and compute instance ids). */
struct xid_entry {
	const struct nvml_dev *dev;
	unsigned long long xid;
};

/* A call made slower (`delay`): `fn` on `dev` (NULL: on any device, and
 * the calls without one). */
struct call_delay {
	const struct nvml_dev *dev;
	char fn[64];
	unsigned long ms;
};

/*
 * Shared across the files but not part of the library's interface: hidden,
 * so that the library exports NVML's symbols only (as it did when all of
 * this was static in one file).
 */
#pragma GCC visibility push(hidden)

/* The state a fixture loads (core.c). */
extern struct nvml_dev gpus[MAX_GPUS];
extern struct proc_entry procs[MAX_PROCS];
extern int n_procs;
extern struct nvml_dev migs[MAX_MIGS];
extern int n_gpus, n_migs_total;
extern char driver_version[80];
extern char nvml_version[80];
extern int init_error, count_error;
extern int init_count;
extern unsigned long delay_us, init_delay_ms;
extern struct xid_entry xids[MAX_XIDS];
extern int n_xids;
extern struct call_delay delays[MAX_DELAYS];
extern int n_delays;

/* core.c */
void record(const char *fmt, ...);
int valid(nvmlDevice_t d);
const char *dev_name(nvmlDevice_t d);
int failure(nvmlDevice_t d, const char *fn);
void pause_call(nvmlDevice_t d, const char *fn);
void pause_us(unsigned long us);
void copy_str(char *dst, unsigned int len, const char *src);

/* fixture.c */
void load_fixture(const char *path);

#pragma GCC visibility pop

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

#endif /* NVML_STANDIN_H */
