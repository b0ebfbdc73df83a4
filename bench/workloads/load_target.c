/* load_target.c — see load_target.h. */
#include "workloads/load_target.h"

#include <string.h>

#include "base/status.h"

uint64_t grt_load_target_capacity(const grt_safetensors *st, bool blob) {
  uint64_t two = 2 * GRT_MiB, cap = 64 * GRT_MiB;
  if (blob) return cap + (grt_safetensors_data_size(st) + two - 1) / two * two;
  for (size_t i = 0; i < grt_safetensors_count(st); i++) {
    const grt_st_tensor *t = grt_safetensors_tensor(st, i);
    cap += (t->end - t->begin + two - 1) / two * two;
  }
  return cap;
}

/* Touches every backing page once: one device allocation of the whole device, written, freed. */
static grt_status make_resident(grt_device *dev, uint64_t capacity) {
  grt_devptr p;
  void *host;
  grt_status st = grt_device_malloc(dev, capacity, &p);
  if (st) return st;
  if (!(st = grt_device_host_ptr(dev, p, capacity, &host))) memset(host, 0, (size_t)capacity);
  grt__keep_first(&st, grt_device_free(dev, p));
  return st;
}

grt_status grt_load_target_create(uint64_t capacity, grt_load_target *out) {
  memset(out, 0, sizeof *out);
  grt_exec_config ec;
  grt_exec_config_default(&ec);
  ec.device_capacity = capacity;
  ec.h2d_gbps = 1e9;
  grt_alloc_config ac;
  grt_alloc_config_default(&ac);
  grt_status st = grt_exec_create(&ec, &out->exec);
  if (!st) st = grt_exec_get_device(out->exec, &out->dev);
  if (!st) st = make_resident(out->dev, capacity);
  if (!st) st = grt_alloc_create("caching", out->dev, &ac, &out->alloc);
  if (st) grt__keep_first(&st, grt_load_target_destroy(out));
  return st;
}

grt_status grt_load_target_destroy(grt_load_target *t) {
  grt_status st = GRT_OK;
  if (t->alloc) grt__keep_first(&st, grt_alloc_destroy(t->alloc));
  if (t->exec) grt__keep_first(&st, grt_exec_destroy(t->exec));
  memset(t, 0, sizeof *t);
  return st;
}
