/*
 * The fixture file: its format and its reader (see standin.h).
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
 *   delay <function> <ms>       that call takes ms milliseconds longer on
 *                               this device; before the first `gpu`, on
 *                               every device and for the calls without one
 *                               (nvmlInit_v2, nvmlDeviceGetCount_v2,
 *                               nvmlEventSetWait_v2): a hanging driver
 *
 * Reuse:
 *   include <file>              read that fixture file here (relative to
 *                               this file's directory, or absolute)
 *   select <n>                  GPU n (NVML index, already defined) is the
 *                               current device again, to add settings to
 *                               an included node
 *
 * Health (health.c); without these keys the calls are NOT_SUPPORTED, as
 * on a GPU without ECC, page retirement or row remapping:
 *   lost                        the GPU fell off the bus (XID 79): every
 *                               call on it or its MIG devices, its handle
 *                               included, fails with GPU_IS_LOST
 *   ecc_mode <current> <pending>    1 enabled, 0 disabled (ECC error
 *                               counts are NOT_SUPPORTED while disabled)
 *   dbe <volatile> <aggregate>  uncorrected (double-bit) ECC error counts
 *   sbe <volatile> <aggregate>  corrected (single-bit) ECC error counts
 *   retired_pages <sbe> <dbe> <pending>     pages retired for multiple
 *                               single-bit / for double-bit errors, and
 *                               1 when some wait for a reboot to retire
 *   remapped_rows <corrected> <uncorrected> <pending> <failure>
 *                               row remapping (Ampere on)
 *   throttle <mask>             clock event (throttle) reasons, NVML's
 *                               bits in hex (0x8 HW slowdown, 0x20 SW
 *                               thermal, 0x40 HW thermal, 0x80 HW power
 *                               brake, 0x4 SW power cap, 0x1 idle)
 *   recovery_action <n>         the driver's recovery action, the field
 *                               NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (0 none,
 *                               1 GPU reset, 2 node reboot, 3 drain P2P,
 *                               4 drain and reset); without it the field is
 *                               NOT_SUPPORTED, as before driver R565
 *   field_fail <fieldId> <code> nvmlDeviceGetFieldValues answers SUCCESS
 *                               and that field value's own nvmlReturn is
 *                               <code> (a driver that does not know the
 *                               field: 2 INVALID_ARGUMENT, 3 NOT_SUPPORTED)
 *   nvlink_down <lane>          that lane is inactive (e.g. after
 *                               `select`, one `nvlink` set up)
 *   xid <n>                     an XID critical error event on this
 *                               device, queued for nvmlEventSetWait_v2 in
 *                               file order (on a MIG device: delivered as
 *                               its GPU's, with its gi and ci)
 */

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

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

/* The settings of the health keys (see the format above); 0: not one. */
static int health_key(struct nvml_dev *cur, const char *key, const char *rest)
{
	if (!strcmp(key, "lost")) {
		cur->lost = 1;
	} else if (!strcmp(key, "ecc_mode")) {
		cur->ecc_supported = 1;
		sscanf(rest, "%u %u", &cur->ecc_cur, &cur->ecc_pend);
	} else if (!strcmp(key, "dbe")) {
		sscanf(rest, "%llu %llu", &cur->dbe[0], &cur->dbe[1]);
	} else if (!strcmp(key, "sbe")) {
		sscanf(rest, "%llu %llu", &cur->sbe[0], &cur->sbe[1]);
	} else if (!strcmp(key, "retired_pages")) {
		cur->pages_supported = 1;
		sscanf(rest, "%u %u %u", &cur->pages_sbe, &cur->pages_dbe,
		       &cur->pages_pending);
	} else if (!strcmp(key, "remapped_rows")) {
		cur->remap_supported = 1;
		sscanf(rest, "%u %u %u %u", &cur->remap_corr, &cur->remap_unc,
		       &cur->remap_pending, &cur->remap_failure);
	} else if (!strcmp(key, "throttle")) {
		cur->throttle_supported = 1;
		cur->throttle = strtoull(rest, NULL, 16);
	} else if (!strcmp(key, "recovery_action")) {
		cur->recovery_supported = 1;
		cur->recovery_action = (unsigned int) strtoul(rest, NULL, 10);
	} else if (!strcmp(key, "field_fail")) {
		unsigned int id;
		int code;
		if (cur->n_field_fails < MAX_FAILS &&
		    sscanf(rest, "%u %d", &id, &code) == 2) {
			cur->field_fail_id[cur->n_field_fails] = id;
			cur->field_fail_code[cur->n_field_fails++] = code;
		}
	} else if (!strcmp(key, "nvlink_down")) {
		int lane = atoi(rest);
		if (lane >= 0 && lane < MAX_LANES)
			cur->active[lane] = 0;
	} else if (!strcmp(key, "xid")) {
		if (n_xids < MAX_XIDS) {
			xids[n_xids].dev = cur;
			xids[n_xids++].xid = strtoull(rest, NULL, 10);
		}
	} else {
		return 0;
	}
	return 1;
}

static void add_delay(const struct nvml_dev *cur, const char *rest)
{
	char fn[64];
	unsigned long ms;

	if (n_delays < MAX_DELAYS && sscanf(rest, "%63s %lu", fn, &ms) == 2) {
		delays[n_delays].dev = cur;
		copy_str(delays[n_delays].fn, 64, fn);
		delays[n_delays++].ms = ms;
	}
}

/* The device the settings go to: kept across `include`s. */
static struct nvml_dev *cur;

static void read_fixture(const char *path, int depth);

static void include(const char *from, const char *name, int depth)
{
	char path[4096];
	const char *slash = strrchr(from, '/');

	if (name[0] == '/' || !slash)
		copy_str(path, sizeof(path), name);
	else
		snprintf(path, sizeof(path), "%.*s/%s", (int) (slash - from),
			 from, name);
	read_fixture(path, depth + 1);
}

void load_fixture(const char *path)
{
	memset(gpus, 0, sizeof(gpus));
	memset(migs, 0, sizeof(migs));
	n_gpus = n_migs_total = n_procs = n_xids = n_delays = 0;
	init_error = count_error = 0;
	delay_us = init_delay_ms = 0;
	cur = NULL;
	read_fixture(path, 0);
}

static void read_fixture(const char *path, int depth)
{
	FILE *f = depth < 8 ? fopen(path, "r") : NULL;
	char line[4096];

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
		} else if (!strcmp(key, "delay")) {
			add_delay(cur, rest);
		} else if (!strcmp(key, "include")) {
			include(path, rest, depth);
		} else if (!strcmp(key, "select")) {
			int n = atoi(rest);
			if (n >= 0 && n < n_gpus)
				cur = &gpus[n];
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
		} else if (health_key(cur, key, rest)) {
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
