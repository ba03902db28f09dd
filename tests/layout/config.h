/*
 * Minimal stand-in for the config.h that Slurm's ./configure generates, used
 * by tests/layout/main.rs to compile a probe program against the internal
 * headers (gres.h, list.h, pack.h, ...) of every Slurm release series the
 * project describes (22.05 .. 26.05; a series that ever needs other values
 * gets a tests/layout/<series>/config.h of its own, which the test then
 * uses).
 *
 * Those headers include "config.h" but only need it for a handful of
 * preprocessor conditionals.  Running the real ./configure in a scratch copy
 * works too (about 15 s on 2 cores), but this file is instant and keeps the
 * probe independent of which build dependencies happen to be installed.
 *
 * Every config.h.in macro that a header included by the probe tests in an
 * #if/#ifdef/#ifndef/#elif must be listed below, either as a #define or as a
 * commented "#undef" line (autoconf's own spelling).  tests/layout/main.rs
 * enforces this: it scans every Slurm header the probe pulled in (from the
 * compiler's dependency output) and fails, naming the macro and the header,
 * if a conditional tests a config.h.in macro not reviewed here.  The values
 * are those of Debian 12's amd64 build of slurm-wlm 22.05 (debian/rules:
 * --enable-multiple-slurmd --disable-debug ..., Linux, glibc 2.36, gcc 12),
 * and hold for an amd64 gcc build of every later series too (a macro that a
 * series' headers do not test is simply unused there).  None of them is
 * inside any struct that a slurm_gres_abi.h declares.
 */
#ifndef GRES_RS_LAYOUT_CONFIG_H
#define GRES_RS_LAYOUT_CONFIG_H

/* configure: --disable-debug -> assertions compiled out (xassert.h) */
#define NDEBUG 1
/* Linux/ELF: slurm_ aliases of libslurm symbols are real strong aliases */
#define USE_ALIAS 1
/* Linux: cgroup support is built (read_config.h) */
#define WITH_CGROUP 1
/* configure's AX_GCC_BUILTIN(__builtin_bswap64): gcc has it.  Tested by
 * src/common/macros.h from 24.11 on (it picks the 64-bit byte swap of the
 * HTON/NTOH macros); 22.05-24.05 have no such config macro. */
#define HAVE___BUILTIN_BSWAP64 1

/* Not defined on Debian's amd64 build: */
/* --enable-front-end (tested by src/common/read_config.h 23.02-24.11;
 * config.h.in has no such macro from 25.05 on) */
/* #undef HAVE_FRONT_END */
/* #undef HAVE_3D */
/* #undef HAVE_NATIVE_CRAY */
/* #undef HAVE_STRLCPY */
/* #undef HAVE_SYSCTLBYNAME */
/* #undef SLURM_BIGENDIAN */
/* #undef SYSTEM_DIMENSIONS */

#endif /* GRES_RS_LAYOUT_CONFIG_H */
