/* exec.c — the executor object: configuration, lifetime, the device it runs on,
 * the default streams, device-wide synchronization and the sticky error.
 *
 * Invariants: exec->legacy exists from creation to destruction; every stream,
 * event and user event ever created stays on the exec's lists until the exec is
 * destroyed (destroyed ones as zombies); live_* count the user-created objects
 * not yet destroyed (the "children" that make destroy return GRT_ERR_BUSY).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "exec/exec_impl.h"

uint64_t grt__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t grt__exec_now(grt_exec *exec) {
  return exec->cfg.clock == GRT_CLOCK_VIRTUAL ? exec->now_ns : grt__mono_ns() - exec->t0_ns;
}

void grt_exec_config_default(grt_exec_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->clock = GRT_CLOCK_THREADS;
  cfg->device_capacity = 256 * GRT_MiB;
  cfg->compute_slots = 4;
  cfg->host_slots = 2;
  cfg->h2d_gbps = 16.0;
  cfg->d2h_gbps = 16.0;
  cfg->device_gbps = 500.0;
  cfg->spin_ns = 20000;
  cfg->op_times_keep = GRT__OP_TIMES_KEEP;
}

grt__op *grt__current_op(grt_exec *exec) {
  pthread_t self = pthread_self();
  if (exec->cfg.clock == GRT_CLOCK_VIRTUAL)
    return exec->cb_depth && pthread_equal(exec->driver, self) ? exec->cb_op : NULL;
  for (unsigned i = 0; i < exec->n_workers; i++)
    if (pthread_equal(exec->workers[i].thread, self)) return exec->workers[i].current;
  return exec->helper && pthread_equal(exec->helper->thread, self) ? exec->helper->current : NULL;
}

bool grt__in_body(grt_exec *exec) {
  pthread_t self = pthread_self();
  if (exec->cfg.clock == GRT_CLOCK_VIRTUAL) return exec->cb_depth && pthread_equal(exec->driver, self);
  /* Worker threads exist only to run bodies. */
  for (unsigned i = 0; i < exec->n_workers; i++)
    if (pthread_equal(exec->workers[i].thread, self)) return true;
  return exec->helper && pthread_equal(exec->helper->thread, self); /* a host thread lending a hand */
}

void grt__set_error(grt_exec *exec, grt_status st, const char *msg) {
  if (exec->error) return; /* the first error is the one reported */
  exec->error = st;
  snprintf(exec->error_msg, sizeof exec->error_msg, "%s", msg ? msg : grt_status_str(st));
  grt__cancel_all(exec);
  pthread_cond_broadcast(&exec->done_cv);
}

static grt_status validate(const grt_exec_config *cfg) {
  if (cfg->clock != GRT_CLOCK_THREADS && cfg->clock != GRT_CLOCK_VIRTUAL) return GRT_ERR_INVALID_ARG;
  if (cfg->compute_slots < 1 || cfg->compute_slots > 64 || cfg->host_slots < 1 || cfg->host_slots > 64)
    return GRT_ERR_INVALID_ARG;
  if (!(cfg->h2d_gbps > 0) || !(cfg->d2h_gbps > 0) || !(cfg->device_gbps > 0)) return GRT_ERR_INVALID_ARG;
  if (!cfg->device && cfg->device_capacity == 0) return GRT_ERR_INVALID_ARG;
  if (cfg->op_times_keep > GRT__OP_TIMES_KEEP_MAX) return GRT_ERR_INVALID_ARG;
  return GRT_OK;
}

static grt_stream *new_stream(grt_exec *exec, uint8_t kind, unsigned flags, int priority) {
  grt_stream *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->magic = GRT__STREAM_MAGIC;
  s->kind = kind;
  s->exec = exec;
  s->flags = flags;
  s->priority = priority;
  s->id = kind == GRT__STREAM_LEGACY ? 0 : ++exec->next_stream_id;
  if (!grt__u64map_put(&exec->by_id, s->id, s)) {
    free(s);
    return NULL;
  }
  snprintf(s->name, sizeof s->name, "%s%llu",
           kind == GRT__STREAM_LEGACY ? "legacy" : kind == GRT__STREAM_PER_THREAD ? "per-thread-" : "stream-",
           kind == GRT__STREAM_LEGACY ? 0ull : (unsigned long long)s->id);
  if (kind == GRT__STREAM_LEGACY) s->name[6] = '\0';
  s->all_next = exec->streams;
  exec->streams = s;
  return s;
}

grt_stream *grt__stream_new(grt_exec *exec, uint8_t kind, unsigned flags, int priority) {
  return new_stream(exec, kind, flags, priority);
}

static grt_status make_device(grt_exec *exec) {
  if (exec->cfg.device) {
    void *p;
    grt_devptr probe;
    /* A borrowed device must hold real bytes: probe with a tiny segment. */
    grt_status st = grt_device_malloc(exec->cfg.device, 1, &probe);
    if (st) return st;
    st = grt_device_host_ptr(exec->cfg.device, probe, 1, &p);
    grt_status fst = grt_device_free(exec->cfg.device, probe);
    if (fst) return fst;
    if (st) return GRT_ERR_INVALID_ARG;
    exec->device = exec->cfg.device;
    return GRT_OK;
  }
  grt_device_config dc;
  grt_device_config_default(&dc);
  dc.capacity = exec->cfg.device_capacity;
  dc.host_backing = 1;
  exec->own_device = true;
  return grt_device_create(&dc, &exec->device);
}

grt_status grt_exec_create(const grt_exec_config *cfg, grt_exec **out) {
  if (!out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  if (!cfg) return GRT_ERR_INVALID_ARG;
  grt_status st = validate(cfg);
  if (st) return st;
  grt_exec *exec = calloc(1, sizeof *exec);
  if (!exec) return GRT_ERR_NOMEM;
  exec->magic = GRT__EXEC_MAGIC;
  exec->cfg = *cfg;
  if (exec->cfg.clock == GRT_CLOCK_VIRTUAL) exec->cfg.spin_ns = 0;
  if (!exec->cfg.op_times_keep) exec->cfg.op_times_keep = GRT__OP_TIMES_KEEP;
  grt__fault_arm_from_config(exec);
  st = make_device(exec);
  if (st) goto fail_device;
  pthread_mutex_init(&exec->lock, NULL);
  grt__cond_init_monotonic(&exec->done_cv);
  grt__observers_init(exec);
  exec->engines[GRT_ENGINE_COMPUTE].slots = cfg->compute_slots;
  exec->engines[GRT_ENGINE_COPY_H2D].slots = 1;
  exec->engines[GRT_ENGINE_COPY_D2H].slots = 1;
  exec->engines[GRT_ENGINE_HOST].slots = cfg->host_slots;
  for (int e = 0; e < GRT_ENGINE_COUNT; e++) pthread_cond_init(&exec->engines[e].cv, NULL);
  grt__u64map_init(&exec->per_thread);
  grt__u64map_init(&exec->by_id);
  grt__rng_seed(&exec->rng, cfg->schedule_seed);
  exec->t0_ns = grt__mono_ns();
  st = GRT_ERR_NOMEM;
  exec->legacy = new_stream(exec, GRT__STREAM_LEGACY, GRT_STREAM_DEFAULT, 0);
  if (!exec->legacy) goto fail;
  if (cfg->clock == GRT_CLOCK_THREADS && (st = grt__threads_start(exec)) != GRT_OK) goto fail;
  *out = exec;
  return GRT_OK;
fail:
  free(exec->legacy);
  grt__u64map_free(&exec->per_thread);
  grt__u64map_free(&exec->by_id);
  for (int e = 0; e < GRT_ENGINE_COUNT; e++) pthread_cond_destroy(&exec->engines[e].cv);
  grt__observers_free(exec);
  pthread_cond_destroy(&exec->done_cv);
  pthread_mutex_destroy(&exec->lock);
  if (exec->own_device) grt__keep_first(&st, grt_device_destroy(exec->device));
fail_device:
  free(exec);
  return st;
}

static bool all_done(grt_exec *exec, void *ctx) {
  (void)ctx;
  return exec->pending_ops == 0;
}

static void free_objects(grt_exec *exec) {
  for (grt_stream *s = exec->streams, *n; s; s = n) {
    n = s->all_next;
    for (grt__op *op = s->head; op; op = op->next)
      if (op->deps != &op->inline_dep) free(op->deps);
    free(s);
  }
  for (grt_event *e = exec->events, *n; e; e = n) {
    n = e->all_next;
    free(e);
  }
  for (grt_user_event *u = exec->uevs, *n; u; u = n) {
    n = u->all_next;
    free(u);
  }
  for (grt__op_slab *sl = exec->slabs, *n; sl; sl = n) {
    n = sl->next;
    free(sl);
  }
}

grt_status grt_exec_destroy(grt_exec *exec) {
  if (!exec) return GRT_OK;
  if (exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  grt_status st = GRT_OK;
  if (grt__in_body(exec)) st = GRT_ERR_NOT_PERMITTED;
  else if (exec->live_streams || exec->live_events || exec->live_uevs || exec->live_graphs || exec->live_gexecs ||
           grt__observers_live(exec)) /* a pool still watches its syncs */
    st = GRT_ERR_BUSY;
  if (!st && exec->own_device) {
    grt_device_stats ds;
    pthread_mutex_unlock(&exec->lock); /* never hold the exec lock into the device lock */
    st = grt_device_get_stats(exec->device, &ds);
    pthread_mutex_lock(&exec->lock);
    /* Graph memory still allocated (unfreed or freed after its graphs went) goes with the exec. */
    if (!st && ds.segments > grt__graph_mem_segments(exec)) st = GRT_ERR_BUSY;
  }
  if (st) {
    pthread_mutex_unlock(&exec->lock);
    return st;
  }
  /* Pending work completes first; after a sticky error only running bodies remain. */
  /* The wait ends when the work is done or a sticky error (a fault, a
   * deadlock) stops it; the call that met the error reported it, and the
   * teardown goes on either way. Only a timed-out wait stops the teardown:
   * the work is still pending and nothing has changed yet. */
  if (!exec->error && (st = grt__wait(exec, all_done, NULL, false, false)) == GRT_ERR_NOT_READY) {
    pthread_mutex_unlock(&exec->lock);
    return st;
  }
  if (exec->cfg.clock == GRT_CLOCK_THREADS) grt__wait_idle(exec); /* host workers run what callbacks are left */
  else grt__virtual_run_orphans(exec);
  pthread_mutex_unlock(&exec->lock);
  if (exec->cfg.clock == GRT_CLOCK_THREADS) grt__threads_stop(exec);
  else grt__virtual_free(exec);
  grt__graph_free_all(exec); /* before the events and streams it unhooks */
  grt__capture_modes_free(exec);
  free_objects(exec);
  grt__timeline_free(exec);
  grt__u64map_free(&exec->per_thread);
  grt__u64map_free(&exec->by_id);
  for (int e = 0; e < GRT_ENGINE_COUNT; e++) pthread_cond_destroy(&exec->engines[e].cv);
  grt__observers_free(exec);
  pthread_cond_destroy(&exec->done_cv);
  pthread_mutex_destroy(&exec->lock);
  /* Its segments were checked above: the exec's own device is empty. */
  grt_status dst = exec->own_device ? grt_device_destroy(exec->device) : GRT_OK;
  exec->magic = 0;
  free(exec);
  return dst;
}

grt_status grt_exec_get_device(grt_exec *exec, grt_device **out) {
  if (!exec || !out || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  *out = exec->device;
  return GRT_OK;
}

grt_status grt_exec_get_clock(grt_exec *exec, grt_clock_kind *out) {
  if (!exec || !out || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  *out = exec->cfg.clock;
  return GRT_OK;
}

grt_status grt_exec_synchronize(grt_exec *exec) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  grt_status st = grt__in_body(exec) ? GRT_ERR_NOT_PERMITTED : grt__graph_device_sync_check(exec);
  if (!st) st = grt__wait(exec, all_done, NULL, true, false);
  pthread_mutex_unlock(&exec->lock);
  if (!st) grt__sync_notify(exec, GRT__SYNC_DEVICE, NULL);
  return st;
}

grt_status grt_exec_now_ns(grt_exec *exec, uint64_t *out) {
  if (!exec || !out || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  *out = grt__exec_now(exec);
  pthread_mutex_unlock(&exec->lock);
  return GRT_OK;
}

/* Host time, on either clock; the device keeps working meanwhile. Threads:
 * the caller sleeps without the lock. Virtual: sched_virtual.c runs the
 * simulation through the delay (a sticky error ends it at once). */
grt_status grt_exec_host_delay(grt_exec *exec, uint64_t ns) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  bool virt = exec->cfg.clock != GRT_CLOCK_THREADS;
  pthread_mutex_lock(&exec->lock);
  grt_status st = grt__in_body(exec) ? GRT_ERR_NOT_PERMITTED : virt ? exec->error : GRT_OK;
  if (!st && virt) st = grt__virtual_host_delay(exec, ns);
  pthread_mutex_unlock(&exec->lock);
  if (st || virt || !ns) return st;
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
  return GRT_OK;
}

grt_status grt_exec_get_error(grt_exec *exec, char *msg, size_t msg_size) {
  if (!exec || exec->magic != GRT__EXEC_MAGIC || (msg && !msg_size)) return GRT_ERR_INVALID_ARG;
  pthread_mutex_lock(&exec->lock);
  grt_status st = exec->error;
  if (msg) snprintf(msg, msg_size, "%s", st ? exec->error_msg : "");
  pthread_mutex_unlock(&exec->lock);
  return st;
}

uint64_t grt__copy_ns(const grt_exec_config *cfg, unsigned engine, uint64_t bytes) {
  double gbps = engine == GRT_ENGINE_COPY_H2D   ? cfg->h2d_gbps
                : engine == GRT_ENGINE_COPY_D2H ? cfg->d2h_gbps
                                                : cfg->device_gbps;
  double ns = (double)bytes / gbps; /* GB/s == bytes per ns */
  uint64_t whole = (uint64_t)ns;
  if ((double)whole < ns) whole++;
  return cfg->copy_latency_ns + whole;
}

grt_status grt_exec_copy_duration_ns(grt_exec *exec, grt_engine_class engine, uint64_t bytes, uint64_t *out_ns) {
  if (!exec || !out_ns || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  if (engine != GRT_ENGINE_COMPUTE && engine != GRT_ENGINE_COPY_H2D && engine != GRT_ENGINE_COPY_D2H)
    return GRT_ERR_INVALID_ARG;
  *out_ns = grt__copy_ns(&exec->cfg, engine, bytes);
  return GRT_OK;
}

grt_status grt_exec_stream_priority_range(grt_exec *exec, int *least, int *greatest) {
  if (!exec || !least || !greatest || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  *least = GRT__PRIO_LEAST;
  *greatest = GRT__PRIO_GREATEST;
  return GRT_OK;
}

grt_status grt_exec_legacy_stream(grt_exec *exec, grt_stream **out) {
  if (!exec || !out || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  *out = exec->legacy;
  return GRT_OK;
}

grt_status grt_exec_per_thread_stream(grt_exec *exec, grt_stream **out) {
  if (!exec || !out || exec->magic != GRT__EXEC_MAGIC) return GRT_ERR_INVALID_ARG;
  uint64_t key = (uint64_t)pthread_self();
  grt_status st = GRT_OK;
  pthread_mutex_lock(&exec->lock);
  grt_stream *s = grt__u64map_get(&exec->per_thread, key);
  if (!s && (st = grt__fault_take(exec, GRT_EXEC_FAULT_STREAM_CREATE)) == GRT_OK) {
    s = new_stream(exec, GRT__STREAM_PER_THREAD, GRT_STREAM_DEFAULT, 0);
    if (s && !grt__u64map_put(&exec->per_thread, key, s)) {
      grt__u64map_del(&exec->by_id, s->id);
      exec->streams = s->all_next;
      free(s);
      s = NULL;
    }
    if (!s) st = GRT_ERR_NOMEM;
  }
  pthread_mutex_unlock(&exec->lock);
  if (!st) *out = s;
  return st;
}
