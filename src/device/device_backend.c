/* device_backend.c — backend-neutral extras of grt_device: the backend's name,
 * its last error message, choosing a backend from GRT_DEVICE, device-wide
 * synchronization. (The virtual-memory calls live in device.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_impl.h"
#include "gpurt/cuda.h"

const char *grt_device_backend(const grt_device *dev) { return dev ? dev->ops->name : ""; }

grt_status grt_device_last_error(grt_device *dev, char *buf, size_t buf_size) {
  if (!dev || !buf || buf_size == 0) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&dev->lock);
  snprintf(buf, buf_size, "%s", dev->last_error);
  pthread_mutex_unlock(&dev->lock);
  return GRT_OK;
}

/* "cuda" -> 0, "cuda:3" -> 3; -1 when text is not of that form. */
static int parse_cuda_ordinal(const char *text) {
  if (strncmp(text, "cuda", 4) != 0) return -1;
  if (text[4] == '\0') return 0;
  if (text[4] != ':' || text[5] < '0' || text[5] > '9') return -1;
  char *end = NULL;
  long n = strtol(text + 5, &end, 10);
  return (*end == '\0' && n >= 0 && n < 1024) ? (int)n : -1;
}

grt_status grt_device_create_from_env(const grt_device_config *sim_cfg, grt_device **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  const char *choice = getenv("GRT_DEVICE");
  if (!choice || !*choice || strcmp(choice, "sim") == 0 || strcmp(choice, "simulated") == 0) {
    grt_device_config def;
    grt_device_config_default(&def);
    return grt_device_create(sim_cfg ? sim_cfg : &def, out);
  }
  int ordinal = parse_cuda_ordinal(choice);
  if (ordinal < 0) return GRT_ERR_INVALID_ARG;
  return grt_device_create_cuda(ordinal, out);
}

grt_status grt_device_synchronize(grt_device *dev) {
  if (!dev) return GRT_ERR_INVALID_ARG;
  if (!dev->ops->synchronize) return GRT_OK;
  /* Not under the device lock: a long wait must not stall other threads' mallocs. */
  return dev->ops->synchronize(dev->impl);
}

