/*
 * gpu-hold: holds GPU memory on GPU 0 through the CUDA driver API, for
 * tests/device/check.sh (ours' usage path against a real process).
 *
 *   gpu-hold [MIB]      (default 1024)
 *
 * libcuda.so.1 (the driver's, no CUDA toolkit) is loaded at run time:
 * cuInit, cuDeviceGet, cuCtxCreate_v2, cuMemAlloc_v2.  Prints
 * "ready <pid>" once the memory is allocated, then waits until its
 * standard input ends (or 300 s) and exits; the driver frees the memory
 * with the process.  Exit status 2 when the driver cannot be used.
 *
 * Build: cc -O2 -o gpu-hold gpu-hold.c -ldl
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int cu_result;
typedef int cu_device;
typedef void *cu_context;
typedef unsigned long long cu_deviceptr;

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "gpu-hold: libcuda.so.1 has no %s\n", name);
		exit(2);
	}
	return p;
}

static void check(cu_result rc, const char *what)
{
	if (rc != 0) {
		fprintf(stderr, "gpu-hold: %s failed: CUresult %d\n", what, rc);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	unsigned long mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	cu_result (*init)(unsigned int);
	cu_result (*device_get)(cu_device *, int);
	cu_result (*ctx_create)(cu_context *, unsigned int, cu_device);
	cu_result (*mem_alloc)(cu_deviceptr *, size_t);
	cu_device dev;
	cu_context ctx;
	cu_deviceptr ptr;
	char buf[64];

	if (!lib) {
		fprintf(stderr, "gpu-hold: %s\n", dlerror());
		return 2;
	}
	*(void **) &init = sym(lib, "cuInit");
	*(void **) &device_get = sym(lib, "cuDeviceGet");
	*(void **) &ctx_create = sym(lib, "cuCtxCreate_v2");
	*(void **) &mem_alloc = sym(lib, "cuMemAlloc_v2");
	check(init(0), "cuInit");
	check(device_get(&dev, 0), "cuDeviceGet");
	check(ctx_create(&ctx, 0, dev), "cuCtxCreate");
	check(mem_alloc(&ptr, (size_t) mib << 20), "cuMemAlloc");
	printf("ready %d\n", (int) getpid());
	fflush(stdout);
	alarm(300);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}
