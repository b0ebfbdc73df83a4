/* cuda_driver.c — loading the CUDA driver at run time (see cuda_driver.h).
 *
 * Lookup order per symbol: cuGetProcAddress_v2 (CUDA 12+: symbol status),
 * then cuGetProcAddress (11.3+), then plain dlsym of "<name>_v2" and "<name>"
 * (older drivers export the versioned ABI under the _v2 name). cuInit(0) runs
 * inside the once-routine; the result is kept for every later caller.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda_driver.h"

typedef CUresult (*get_proc_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*get_proc_v1_fn)(const char *, void **, int, cuuint64_t);

/* Written only by load_once (under pthread_once), read-only afterwards. */
static struct {
  grt__cu_api api;
  grt_status status;
  char msg[512];
} g_driver;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

typedef struct lookup {
  void *lib;
  get_proc_v2_fn v2;
  get_proc_v1_fn v1;
} lookup;

static void *find_symbol(const lookup *l, const char *name) {
  void *fn = NULL;
  if (l->v2) {
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (l->v2(name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &q) == CUDA_SUCCESS &&
        q == CU_GET_PROC_ADDRESS_SUCCESS)
      return fn;
    return NULL;
  }
  if (l->v1) {
    if (l->v1(name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM) == CUDA_SUCCESS) return fn;
    return NULL;
  }
  char versioned[128];
  snprintf(versioned, sizeof versioned, "%s_v2", name);
  fn = dlsym(l->lib, versioned);
  return fn ? fn : dlsym(l->lib, name);
}

static void set_failure(grt_status st, const char *fmt, const char *a, const char *b) {
  g_driver.status = st;
  snprintf(g_driver.msg, sizeof g_driver.msg, fmt, a, b);
}

static void load_once(void) {
  const char *path = getenv("GRT_CUDA_LIBRARY");
  if (!path || !*path) path = "libcuda.so.1";
  lookup l = {0};
  l.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!l.lib) {
    const char *why = dlerror();
    set_failure(GRT_ERR_NO_DEVICE, "no CUDA driver: %s (%s)", path, why ? why : "dlopen failed");
    return;
  }
  *(void **)&l.v2 = dlsym(l.lib, "cuGetProcAddress_v2");
  if (!l.v2) *(void **)&l.v1 = dlsym(l.lib, "cuGetProcAddress");
  /* The table's fields are function pointers; storing through void ** is the
     POSIX dlsym idiom (object and function pointers share a representation). */
#define GRT__CU_LOAD(field, sym, req, ret, params)                                                    \
  *(void **)&g_driver.api.field = find_symbol(&l, sym);                                               \
  if (req && !g_driver.api.field) {                                                                   \
    set_failure(GRT_ERR_UNSUPPORTED, "the CUDA driver (%s) lacks the entry point %s", path, sym);     \
    return;                                                                                           \
  }
  GRT__CU_FUNCS(GRT__CU_LOAD)
#undef GRT__CU_LOAD
  CUresult r = g_driver.api.Init(0);
  if (r != CUDA_SUCCESS) {
    /* no GPU, a stub library or a too-old kernel driver map to GRT_ERR_NO_DEVICE */
    g_driver.status = grt__cu_status(&g_driver.api, r, "cuInit", g_driver.msg, sizeof g_driver.msg);
    return;
  }
  if (g_driver.api.DriverGetVersion(&g_driver.api.driver_version) != CUDA_SUCCESS) g_driver.api.driver_version = 0;
  g_driver.status = GRT_OK;
  snprintf(g_driver.msg, sizeof g_driver.msg, "CUDA driver %d.%d (%s)", g_driver.api.driver_version / 1000,
           (g_driver.api.driver_version % 1000) / 10, path);
  /* The library stays loaded for the life of the process: the table points into it. */
}

grt_status grt__cu_load(const grt__cu_api **api, char *msg, size_t msg_size) {
  pthread_once(&g_once, load_once);
  if (msg && msg_size) snprintf(msg, msg_size, "%s", g_driver.msg);
  *api = g_driver.status == GRT_OK ? &g_driver.api : NULL;
  return g_driver.status;
}

grt_status grt__cu_status(const grt__cu_api *cu, CUresult r, const char *what, char *msg, size_t msg_size) {
  if (r == CUDA_SUCCESS) return GRT_OK;
  grt_status st = grt_status_from_cuda((int)r); /* one table for the whole library */
  if (msg && msg_size) {
    const char *name = NULL, *text = NULL;
    if (!cu || cu->GetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_UNKNOWN";
    if (!cu || cu->GetErrorString(r, &text) != CUDA_SUCCESS || !text) text = "no description";
    snprintf(msg, msg_size, "%s: %s (%d: %s)", what, name, (int)r, text);
  }
  return st;
}

grt_status grt__cu_missing(const char *symbol, char *msg, size_t msg_size) {
  if (msg && msg_size) snprintf(msg, msg_size, "the CUDA driver lacks the entry point %s", symbol);
  return GRT_ERR_UNSUPPORTED;
}
