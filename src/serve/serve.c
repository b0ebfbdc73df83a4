/* serve.c — /metrics over HTTP with libmicrohttpd, one internal thread.
 *
 * The listening socket is bound here, not by libmicrohttpd, so a port in use
 * is reported as such (errno) rather than as a bare start failure; the socket
 * is then handed to the daemon, which owns and closes it. Requests are
 * answered on the daemon's thread: each /metrics renders the registry, which
 * copies each allocator's figures under its lock and formats outside it.
 *
 * Admission (serve.h says what it guarantees). libmicrohttpd's own limits are
 * not enough: a full server leaves newcomers in the listen queue, its per-IP
 * limit refuses them, and its timeout restarts with every byte received, so
 * a client sending a byte a second holds a slot forever. So every connection
 * gets a slot in `slots`, kept by libmicrohttpd's callbacks, with the
 * deadline of its current phase; the reaper thread shuts down the socket of
 * a connection past it, and so does admit() for the one it displaces.
 * libmicrohttpd then sees the end of the stream and closes the connection
 * itself. The descriptor is never shut down after that close: a slot is
 * freed in the CLOSED notification, which libmicrohttpd sends before it
 * closes the socket, and every shutdown happens under `lock`. In the poll
 * mode used here every STARTED notification is followed by a CLOSED one.
 *
 * Invariants: `scrapes` is written after start atomically, the slots, the
 * counters, `next_wake_ms` and `stopping` under `lock`; everything else is
 * set before the daemon starts and read-only after. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gpurt/serve.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#define MAX_CONNECTIONS 1024u /* each holds a descriptor and libmicrohttpd's 32 KiB buffer */
#define MAX_HEADER_TIMEOUT_S 60u
#define MAX_TIMEOUT_S 3600u

typedef enum conn_phase {
  PHASE_HEADER, /* accepted, its first request header not complete yet */
  PHASE_BUSY,   /* a request is being answered */
  PHASE_IDLE    /* keep-alive: answered, its next request not complete yet */
} conn_phase;

typedef struct conn_slot {
  bool used;
  bool doomed; /* its socket is shut down; libmicrohttpd closes it next */
  conn_phase phase;
  int fd;
  uint32_t ip;          /* IPv4 address, network order */
  uint64_t since_ms;    /* when the phase began: the oldest waiting one is displaced */
  uint64_t deadline_ms; /* when the phase must be over */
} conn_slot;

struct grt_metrics_server {
  struct MHD_Daemon *daemon;
  grt_metrics *metrics;
  uint16_t port;
  _Atomic uint64_t scrapes;
  unsigned nslots, per_ip;
  uint64_t header_ms, idle_ms;
  pthread_mutex_t lock;
  pthread_cond_t wake; /* the reaper waits on it until the earliest deadline */
  pthread_t reaper;
  conn_slot *slots;      /* nslots: libmicrohttpd holds at most max_connections */
  uint64_t next_wake_ms; /* the reaper's next look; a sooner deadline signals `wake` */
  bool stopping;
  grt_serve_counters counters; /* all but scrapes */
};

void grt_serve_config_default(grt_serve_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  snprintf(cfg->address, sizeof cfg->address, "127.0.0.1");
  cfg->port = 9400;
  cfg->max_connections = 32;
  cfg->per_ip_connections = 8;
  cfg->header_timeout_s = 3;
  cfg->timeout_s = 5;
}

grt_status grt_serve_config_parse(grt_serve_config *cfg, const char *spec) {
  if (!cfg || !spec) return GRT_ERR_INVALID_ARG;
  const char *colon = strrchr(spec, ':');
  const char *port_text = colon ? colon + 1 : spec;
  size_t host_len = colon ? (size_t)(colon - spec) : 0;
  if (host_len >= sizeof cfg->address || !*port_text) return GRT_ERR_PARSE;
  char *end;
  errno = 0;
  unsigned long port = strtoul(port_text, &end, 10);
  if (*end || errno || port > 65535 || port_text[0] == '-' || port_text[0] == '+') return GRT_ERR_PARSE;
  if (host_len) {
    memcpy(cfg->address, spec, host_len);
    cfg->address[host_len] = 0;
  }
  cfg->port = (uint16_t)port;
  return GRT_OK;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Caller holds the lock. */
static void set_phase(grt_metrics_server *s, conn_slot *c, conn_phase phase, uint64_t now) {
  c->phase = phase;
  c->since_ms = now;
  c->deadline_ms = now + (phase == PHASE_HEADER ? s->header_ms : s->idle_ms);
  if (c->deadline_ms < s->next_wake_ms) pthread_cond_signal(&s->wake);
}

/* Caller holds the lock, so libmicrohttpd has not closed c->fd yet. */
static void doom(conn_slot *c, uint64_t *counter) {
  c->doomed = true;
  (*counter)++;
  (void)shutdown(c->fd, SHUT_RDWR);
}

/* Lower goes first: an idle keep-alive connection costs its client only a
 * reconnect, one still sending its header costs a request. */
static int victim_rank(const conn_slot *c) { return c->phase == PHASE_IDLE ? 0 : 1; }

/* The waiting connection to displace (of address ip only, if one_ip): the
 * oldest of the lowest rank; never one being answered, nor `except`. */
static conn_slot *victim(grt_metrics_server *s, const conn_slot *except, bool one_ip, uint32_t ip) {
  conn_slot *best = NULL;
  for (unsigned i = 0; i < s->nslots; i++) {
    conn_slot *c = &s->slots[i];
    if (!c->used || c->doomed || c == except || c->phase == PHASE_BUSY || (one_ip && c->ip != ip)) continue;
    if (!best || victim_rank(c) < victim_rank(best) ||
        (victim_rank(c) == victim_rank(best) && c->since_ms < best->since_ms))
      best = c;
  }
  return best;
}

/* Makes room after `fresh` arrived: over its address's limit, that address's
 * oldest waiting connection goes (or fresh itself, if all are being
 * answered); the last free slot taken, the oldest waiting one of any. */
static void admit(grt_metrics_server *s, conn_slot *fresh) {
  unsigned live = 0, same_ip = 0;
  for (unsigned i = 0; i < s->nslots; i++) {
    const conn_slot *c = &s->slots[i];
    if (!c->used || c->doomed) continue;
    live++;
    same_ip += c->ip == fresh->ip;
  }
  if (same_ip > s->per_ip) {
    conn_slot *v = victim(s, fresh, true, fresh->ip);
    doom(v ? v : fresh, v ? &s->counters.displaced : &s->counters.refused);
  } else if (live >= s->nslots) {
    conn_slot *v = victim(s, fresh, false, 0);
    if (v) doom(v, &s->counters.displaced);
  }
}

static uint32_t client_ip(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  struct sockaddr_in sa;
  if (!info || !info->client_addr || info->client_addr->sa_family != AF_INET) return 0;
  memcpy(&sa, info->client_addr, sizeof sa); /* the listening socket is IPv4 */
  return sa.sin_addr.s_addr;
}

/* Caller holds the lock. NULL (the connection goes untracked) cannot happen
 * while libmicrohttpd keeps to max_connections. */
static conn_slot *track(grt_metrics_server *s, struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *fd = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
  conn_slot *c = NULL;
  for (unsigned i = 0; i < s->nslots && !c; i++)
    if (!s->slots[i].used) c = &s->slots[i];
  if (!c || !fd) return NULL;
  memset(c, 0, sizeof *c);
  c->used = true;
  c->fd = fd->connect_fd;
  c->ip = client_ip(mc);
  set_phase(s, c, PHASE_HEADER, now_ms());
  admit(s, c);
  return c;
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **ctx, enum MHD_ConnectionNotificationCode code) {
  grt_metrics_server *s = cls;
  pthread_mutex_lock(&s->lock);
  if (code == MHD_CONNECTION_NOTIFY_STARTED)
    *ctx = track(s, mc);
  else if (*ctx)
    ((conn_slot *)*ctx)->used = false; /* libmicrohttpd closes the socket after this */
  pthread_mutex_unlock(&s->lock);
}

static conn_slot *slot_of(struct MHD_Connection *mc) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info ? info->socket_context : NULL;
}

/* A request header is complete: its response now has timeout_s to be read.
 * false: the connection is already shut down, so nothing is rendered for it. */
static bool request_began(grt_metrics_server *s, struct MHD_Connection *mc) {
  conn_slot *c = slot_of(mc);
  pthread_mutex_lock(&s->lock);
  bool live = !c || !c->doomed;
  if (c && live) set_phase(s, c, PHASE_BUSY, now_ms());
  pthread_mutex_unlock(&s->lock);
  return live;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **req, enum MHD_RequestTerminationCode why) {
  grt_metrics_server *s = cls;
  conn_slot *c = slot_of(mc);
  (void)req;
  (void)why;
  if (!c) return;
  pthread_mutex_lock(&s->lock);
  if (!c->doomed) set_phase(s, c, PHASE_IDLE, now_ms());
  pthread_mutex_unlock(&s->lock);
}

/* Caller holds the lock. Shuts down every connection past its deadline;
 * returns the earliest deadline left (UINT64_MAX: none). */
static uint64_t reap(grt_metrics_server *s, uint64_t now) {
  uint64_t next = UINT64_MAX;
  for (unsigned i = 0; i < s->nslots; i++) {
    conn_slot *c = &s->slots[i];
    if (!c->used || c->doomed) continue;
    if (c->deadline_ms <= now)
      doom(c, c->phase == PHASE_HEADER ? &s->counters.header_timeouts : &s->counters.idle_timeouts);
    else if (c->deadline_ms < next)
      next = c->deadline_ms;
  }
  return next;
}

static void *reaper_main(void *arg) {
  grt_metrics_server *s = arg;
  pthread_mutex_lock(&s->lock);
  while (!s->stopping) {
    s->next_wake_ms = reap(s, now_ms());
    if (s->next_wake_ms == UINT64_MAX) {
      pthread_cond_wait(&s->wake, &s->lock);
    } else {
      struct timespec at = {(time_t)(s->next_wake_ms / 1000u), (long)(s->next_wake_ms % 1000u) * 1000000L};
      pthread_cond_timedwait(&s->wake, &s->lock, &at); /* the wake clock is CLOCK_MONOTONIC */
    }
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static grt_status guard_start(grt_metrics_server *s, const grt_serve_config *cfg) {
  s->nslots = cfg->max_connections;
  s->per_ip = cfg->per_ip_connections;
  s->header_ms = (uint64_t)cfg->header_timeout_s * 1000u;
  s->idle_ms = (uint64_t)cfg->timeout_s * 1000u;
  s->next_wake_ms = UINT64_MAX;
  s->slots = calloc(s->nslots, sizeof *s->slots);
  pthread_condattr_t ca;
  if (!s->slots || pthread_condattr_init(&ca)) goto no_cond;
  bool cond_ok = !pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) && !pthread_cond_init(&s->wake, &ca);
  pthread_condattr_destroy(&ca);
  if (!cond_ok) goto no_cond;
  if (pthread_mutex_init(&s->lock, NULL)) goto no_lock;
  if (!pthread_create(&s->reaper, NULL, reaper_main, s)) return GRT_OK;
  pthread_mutex_destroy(&s->lock);
no_lock:
  pthread_cond_destroy(&s->wake);
no_cond:
  free(s->slots);
  return GRT_ERR_NOMEM;
}

static void guard_stop(grt_metrics_server *s) {
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->reaper, NULL);
  pthread_cond_destroy(&s->wake);
  pthread_mutex_destroy(&s->lock);
  free(s->slots);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *text) {
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
  if (code == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  enum MHD_Result res = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return res;
}

static enum MHD_Result serve_metrics(grt_metrics_server *s, struct MHD_Connection *c) {
  char *text = NULL;
  size_t len = 0;
  if (grt_metrics_render(s->metrics, &text, &len)) return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "render failed\n");
  struct MHD_Response *r = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    grt_report_free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
  enum MHD_Result res = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  if (res == MHD_YES) atomic_fetch_add(&s->scrapes, 1);
  return res;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_size, void **req) {
  static int started;
  (void)version;
  (void)upload_data;
  if (!*req) { /* headers only so far: answer once the request is complete */
    *req = &started;
    return request_began(cls, c) ? MHD_YES : MHD_NO;
  }
  if (*upload_size) { /* a body nobody asked for: read and drop it */
    *upload_size = 0;
    return MHD_YES;
  }
  if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
    return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET\n");
  if (url[0] != '/') return reply(c, MHD_HTTP_BAD_REQUEST, "bad request target\n");
  if (strcmp(url, "/metrics")) return reply(c, MHD_HTTP_NOT_FOUND, "not found: metrics are at /metrics\n");
  return serve_metrics(cls, c);
}

static void quiet(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  (void)fmt;
  (void)ap;
}

__attribute__((format(printf, 3, 4))) static void set_err(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && n) vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

static grt_status check_range(const char *name, unsigned v, unsigned lo, unsigned hi, const char *why, char *err,
                              size_t n) {
  if (v >= lo && v <= hi) return GRT_OK;
  set_err(err, n, "serve config: %s is %u; it must be %u to %u%s", name, v, lo, hi, why);
  return GRT_ERR_INVALID_ARG;
}

static grt_status check_config(const grt_serve_config *cfg, char *err, size_t n) {
  if (!memchr(cfg->address, 0, sizeof cfg->address)) {
    set_err(err, n, "serve config: address is not a NUL-terminated string");
    return GRT_ERR_INVALID_ARG;
  }
  grt_status st = check_range("max_connections", cfg->max_connections, 2, MAX_CONNECTIONS,
                              " (the last free one is kept for the next scraper)", err, n);
  if (!st)
    st = check_range("per_ip_connections", cfg->per_ip_connections, 1, cfg->max_connections - 1,
                     " (below max_connections, so one address cannot fill the server)", err, n);
  if (!st) st = check_range("header_timeout_s", cfg->header_timeout_s, 1, MAX_HEADER_TIMEOUT_S, " seconds", err, n);
  if (!st) st = check_range("timeout_s", cfg->timeout_s, 1, MAX_TIMEOUT_S, " seconds", err, n);
  return st;
}

/* Binds and listens on addr:port; returns the socket or -1 with err set. The
 * backlog is the system's largest: a burst of connections (slow clients
 * reconnecting) must not fill it, or the kernel drops a scraper's SYN and
 * the scraper retries only a second later. */
static int listen_on(const grt_serve_config *cfg, uint16_t *bound, grt_status *st, char *err, size_t n) {
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(cfg->port);
  const char *host = strcmp(cfg->address, "localhost") ? cfg->address : "127.0.0.1";
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
    set_err(err, n, "%s:%u: not an IPv4 address (%s)", cfg->address, cfg->port, "use e.g. 127.0.0.1");
    *st = GRT_ERR_INVALID_ARG;
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
      bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, SOMAXCONN)) {
    int e = errno;
    set_err(err, n, "cannot listen on %s:%u: %s", cfg->address, cfg->port,
            e == EADDRINUSE ? "address already in use (is another server on that port?)" : strerror(e));
    if (fd >= 0) close(fd);
    *st = GRT_ERR_IO;
    return -1;
  }
  socklen_t len = sizeof sa;
  getsockname(fd, (struct sockaddr *)&sa, &len);
  *bound = ntohs(sa.sin_port);
  return fd;
}

/* Starts libmicrohttpd on the listening socket fd (which it then owns). Its
 * own inactivity timeout (whole seconds, restarted by every byte) stays as a
 * backstop, set later than any deadline of the guard's so the guard's
 * counters say why each connection went. */
static grt_status start_daemon(grt_metrics_server *s, const grt_serve_config *cfg, int fd, char *err, size_t n) {
  unsigned backstop_s = (cfg->header_timeout_s > cfg->timeout_s ? cfg->header_timeout_s : cfg->timeout_s) + 2;
  s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, handle, s,
                               MHD_OPTION_EXTERNAL_LOGGER, quiet, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                               MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                               backstop_s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_NOTIFY_COMPLETED,
                               on_completed, s, MHD_OPTION_END);
  if (s->daemon) return GRT_OK;
  set_err(err, n, "%s:%u: %s", cfg->address, cfg->port, "libmicrohttpd could not start its thread");
  close(fd);
  return GRT_ERR_IO;
}

grt_status grt_metrics_serve(grt_metrics *m, const grt_serve_config *cfg, grt_metrics_server **out, char *err,
                             size_t err_size) {
  if (err && err_size) err[0] = 0;
  if (!m || !out) return GRT_ERR_INVALID_ARG;
  *out = NULL;
  grt_serve_config defaults;
  if (!cfg) {
    grt_serve_config_default(&defaults);
    cfg = &defaults;
  }
  grt_status st = check_config(cfg, err, err_size);
  if (st) return st;
  grt_metrics_server *s = calloc(1, sizeof *s);
  if (!s) return GRT_ERR_NOMEM;
  s->metrics = m;
  atomic_init(&s->scrapes, 0);
  int fd = listen_on(cfg, &s->port, &st, err, err_size);
  if (fd >= 0 && (st = guard_start(s, cfg)) != GRT_OK) {
    set_err(err, err_size, "%s:%u: %s", cfg->address, cfg->port, "no memory or thread for the connection guard");
    close(fd);
  }
  if (st) {
    free(s);
    return st;
  }
  st = start_daemon(s, cfg, fd, err, err_size);
  if (st) {
    guard_stop(s);
    free(s);
    return st;
  }
  *out = s;
  return GRT_OK;
}

uint16_t grt_metrics_server_port(const grt_metrics_server *s) { return s ? s->port : 0; }

uint64_t grt_metrics_server_scrapes(const grt_metrics_server *s) {
  return s ? atomic_load(&((grt_metrics_server *)s)->scrapes) : 0;
}

grt_status grt_metrics_server_counters(const grt_metrics_server *s, grt_serve_counters *out) {
  if (!s || !out) return GRT_ERR_INVALID_ARG;
  grt_metrics_server *w = (grt_metrics_server *)s; /* the lock is the only thing written */
  pthread_mutex_lock(&w->lock);
  *out = w->counters;
  pthread_mutex_unlock(&w->lock);
  out->scrapes = atomic_load(&w->scrapes);
  return GRT_OK;
}

grt_status grt_metrics_server_stop(grt_metrics_server *s) {
  if (!s) return GRT_OK;
  MHD_stop_daemon(s->daemon); /* joins its thread, closes every connection and the listening socket */
  guard_stop(s);              /* after: the daemon's callbacks take the lock until it is gone */
  free(s);
  return GRT_OK;
}
