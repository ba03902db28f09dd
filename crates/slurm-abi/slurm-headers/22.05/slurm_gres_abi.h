/*
 * The part of Slurm 22.05's internal ABI that the GPU GRES plugins touch.
 *
 * Written for this project from the facts of Slurm's source (struct layouts,
 * symbol names); it is not a copy of Slurm's headers.  Every struct declared
 * here is checked field by field against the real internal headers by
 * tests/layout/main.rs, so a mismatch fails the test suite, not a production
 * slurmd.
 *
 * Opaque types (List, bitstr_t, hostlist_t) are only ever handled
 * through the functions of slurmd's libslurmfull.so declared below.  Only
 * the `slurm_`-prefixed exports are used: several unprefixed names (`info`,
 * `debug`) do not exist in libslurmfull.so and would make dlopen() fail.
 */
#ifndef SLURM_GRES_ABI_22_05_H
#define SLURM_GRES_ABI_22_05_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- opaque handles ------------------------------------------------- */
typedef struct xlist *List;
typedef struct listIterator *ListIterator;
typedef int64_t bitstr_t;           /* always used through a pointer */
typedef int64_t bitoff_t;
typedef struct hostlist *hostlist_t;

typedef void (*ListDelF)(void *x);
typedef int (*ListFindF)(void *x, void *key);
typedef int (*ListForF)(void *x, void *arg);

/* Pack buffer (src/common/pack.h).  Only `size` and `processed` are read,
 * to bound what an unpack may allocate; all access goes through the pack
 * functions below. */
typedef struct {
	uint32_t magic;
	char *head;
	uint32_t size;
	uint32_t processed;
	bool mmaped;
} buf_t;

/* ---- enums and flags (src/common/gres.h) ------------------------------ */
typedef enum {
	GRES_INTERNAL_FLAG_NONE = 0,
	GRES_INTERNAL_FLAG_VERBOSE = 1 << 0,
	GRES_INTERNAL_FLAG_PROTECT_ENV = 1 << 1,
} gres_internal_flags_t;

typedef enum {
	DEV_TYPE_NONE,
	DEV_TYPE_BLOCK,
	DEV_TYPE_CHAR,
} gres_device_type_t;

enum gres_job_data_type {
	GRES_JOB_DATA_COUNT,
	GRES_JOB_DATA_BITMAP,
};

enum gres_step_data_type {
	GRES_STEP_DATA_COUNT,
	GRES_STEP_DATA_BITMAP,
};

#define GRES_CONF_HAS_MULT    (1u << 0)
#define GRES_CONF_HAS_FILE    (1u << 1)
#define GRES_CONF_HAS_TYPE    (1u << 2)
#define GRES_CONF_COUNT_ONLY  (1u << 3)
#define GRES_CONF_LOADED      (1u << 4)
#define GRES_CONF_ENV_NVML    (1u << 5)
#define GRES_CONF_ENV_RSMI    (1u << 6)
#define GRES_CONF_ENV_OPENCL  (1u << 7)
#define GRES_CONF_ENV_DEF     (1u << 8)
#define GRES_CONF_SHARED      (1u << 9)
#define GRES_CONF_ONE_SHARING (1u << 10)
#define GRES_CONF_ENV_ONEAPI  (1u << 11)

#define GRES_AUTODETECT_GPU_NVML   0x1u
#define GRES_AUTODETECT_GPU_RSMI   0x2u
#define GRES_AUTODETECT_GPU_OFF    0x4u
#define GRES_AUTODETECT_GPU_ONEAPI 0x8u

/* log_level_t (src/common/log.h) */
typedef enum {
	LOG_LEVEL_QUIET = 0,
	LOG_LEVEL_FATAL,
	LOG_LEVEL_ERROR,
	LOG_LEVEL_INFO,
	LOG_LEVEL_VERBOSE,
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_DEBUG2,
	LOG_LEVEL_DEBUG3,
	LOG_LEVEL_DEBUG4,
	LOG_LEVEL_DEBUG5,
	LOG_LEVEL_END
} log_level_t;

/* ---- structures shared with slurmd ------------------------------------ */
typedef struct {
	uint32_t major;
	uint32_t minor;
	gres_device_type_t type;
} gres_device_id_t;

/* One device file of a GRES, as handed to the cgroup device constraint. */
typedef struct {
	int index;            /* bit of the GRES bitmap */
	int alloc;
	gres_device_id_t dev_desc;
	int dev_num;          /* number at the end of the file name */
	char *path;
	char *unique_id;      /* MIG unique id, or NULL */
} gres_device_t;

/* One gres.conf record as slurmd parsed it (list element of node_config_load). */
typedef struct gres_slurmd_conf {
	uint32_t config_flags;
	uint64_t count;
	uint32_t cpu_cnt;
	char *cpus;
	bitstr_t *cpus_bitmap;
	char *file;
	char *links;
	char *name;
	char *type_name;
	char *unique_id;
	uint32_t plugin_id;
} gres_slurmd_conf_t;

typedef struct {
	uint32_t cpu_cnt;
	bool in_slurmd;
	int (*xcpuinfo_mac_to_abs)(char *mac, char **abs);
} node_config_load_t;

typedef struct gres_job_state {
	uint32_t type_id;
	char *type_name;
	uint16_t flags;
	uint16_t cpus_per_gres;
	uint64_t gres_per_job;
	uint64_t gres_per_node;
	uint64_t gres_per_socket;
	uint64_t gres_per_task;
	uint64_t mem_per_gres;
	uint16_t ntasks_per_gres;
	uint16_t def_cpus_per_gres;
	uint64_t def_mem_per_gres;
	uint32_t total_node_cnt;
	bitstr_t **gres_bit_select;
	uint64_t *gres_cnt_node_select;
	uint64_t total_gres;
	uint32_t node_cnt;
	bitstr_t **gres_bit_alloc;
	uint64_t *gres_cnt_node_alloc;
	bitstr_t **gres_bit_step_alloc;
	uint64_t *gres_cnt_step_alloc;
} gres_job_state_t;

typedef struct gres_step_state {
	uint32_t type_id;
	char *type_name;
	uint16_t flags;
	uint16_t cpus_per_gres;
	uint64_t gres_per_step;
	uint64_t gres_per_node;
	uint64_t gres_per_socket;
	uint64_t gres_per_task;
	uint64_t mem_per_gres;
	uint16_t ntasks_per_gres;
	uint64_t total_gres;
	uint64_t gross_gres;
	uint64_t *gres_cnt_node_alloc;
	uint32_t node_cnt;
	bitstr_t *node_in_use;
	bitstr_t **gres_bit_alloc;
} gres_step_state_t;

/* Prolog/Epilog record built by a plugin, freed by slurmd. */
typedef struct gres_epilog_info {
	uint32_t plugin_id;
	uint32_t node_cnt;
	char *node_list;
	bitstr_t **gres_bit_alloc;
	uint64_t *gres_cnt_node_alloc;
} gres_epilog_info_t;

/* Energy of one GPU, filled by gpu_p_energy_read (slurm.h, gpu.h). */
typedef struct acct_gather_energy {
	uint32_t ave_watts;
	uint64_t base_consumed_energy;
	uint64_t consumed_energy;
	uint32_t current_watts;
	uint64_t previous_consumed_energy;
	int64_t poll_time;        /* time_t */
} acct_gather_energy_t;

typedef struct {
	uint32_t last_update_watt;
	int64_t last_update_time;     /* time_t */
	int64_t previous_update_time; /* time_t */
	acct_gather_energy_t energy;
} gpu_status_t;

/* ---- functions of libslurmfull.so ------------------------------------- */
/* memory (xmalloc.h: xmalloc/xfree are macros over these) */
void *slurm_xcalloc(size_t cnt, size_t sz, bool clear, bool try_,
		    const char *file, int line, const char *func);
void slurm_xfree(void **p);
char *slurm_xstrdup(const char *s);

/* logging (log.h: info()/debug() are macros over these) */
int slurm_get_log_level(void);
void slurm_log_var(log_level_t level, const char *fmt, ...);

/* lists (list.h) */
List slurm_list_create(ListDelF f);
void slurm_list_destroy(List l);
void *slurm_list_append(List l, void *x);
int slurm_list_count(List l);
ListIterator slurm_list_iterator_create(List l);
void slurm_list_iterator_destroy(ListIterator i);
void *slurm_list_next(ListIterator i);
void *slurm_list_pop(List l);
int slurm_list_flush(List l);

/* bitmaps (bitstring.h) */
bitstr_t *slurm_bit_alloc(bitoff_t nbits);
void slurm_bit_free(bitstr_t **b);
int slurm_bit_test(bitstr_t *b, bitoff_t bit);
void slurm_bit_set(bitstr_t *b, bitoff_t bit);
bitoff_t slurm_bit_size(bitstr_t *b);
bitstr_t *slurm_bit_copy(bitstr_t *b);
char *slurm_bit_fmt_hexmask_trim(bitstr_t *b);
int slurm_bit_unfmt(bitstr_t *b, char *str);

/* pack buffers (pack.h) */
void slurm_pack32(uint32_t val, buf_t *buffer);
int slurm_unpack32(uint32_t *valp, buf_t *buffer);
void slurm_packmem(void *valp, uint32_t size_val, buf_t *buffer);
int slurm_unpackstr_xmalloc_chooser(char **valp, uint32_t *size_valp,
				    buf_t *buffer);

/* environment arrays (env.h): NULL-terminated xmalloc'ed arrays of
 * xmalloc'ed "NAME=value" strings, changed by the plugins themselves to
 * the rules of env.c's env_array_overwrite and unsetenvp (core::env_array)
 * with slurm_xcalloc and slurm_xfree above */

/* GRES helpers of slurmd (gres.h) */
void slurm_destroy_gres_device(void *gres_device_ptr);
void destroy_gres_slurmd_conf(void *x);
bool gres_use_local_device_index(void);
uint32_t gres_get_autodetect_flags(void);
uint32_t gres_build_id(char *name);

/* the gpu plugin interface of slurmd (gpu.h) */
int gpu_plugin_init(void);
int gpu_plugin_fini(void);
List gpu_g_get_system_gpu_list(node_config_load_t *node_conf);
void gpu_g_step_hardware_init(bitstr_t *usable_gpus, char *tres_freq);
void gpu_g_step_hardware_fini(void);
char *gpu_g_test_cpu_conv(char *cpu_range);

#endif /* SLURM_GRES_ABI_22_05_H */
