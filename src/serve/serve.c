/* serve.c — /metrics over HTTP with libmicrohttpd, one internal thread.
 *
 * The listening socket is bound here, not by libmicrohttpd, so a port in use
 * is reported as such (errno) rather than as a bare start failure; the socket
 * is then handed to the daemon, which owns and closes it. Requests are
 * answered on the daemon's thread: each /metrics renders the registry, which
 * copies each allocator's figures under its lock and formats outside it.
 *
 * Invariants: `scrapes` is the only field written after start (atomically);
 * everything else is set before the daemon starts and read-only after. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpurt/serve.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct grt_metrics_server {
  struct MHD_Daemon *daemon;
  grt_metrics *metrics;
  uint16_t port;
  _Atomic uint64_t scrapes;
};

void grt_serve_config_default(grt_serve_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  snprintf(cfg->address, sizeof cfg->address, "127.0.0.1");
  cfg->port = 9400;
  cfg->max_connections = 32;
  cfg->timeout_s = 10;
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
    return MHD_YES;
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

static void set_err(char *err, size_t n, const char *fmt, const char *addr, unsigned port, const char *why) {
  if (err && n) snprintf(err, n, fmt, addr, port, why);
}

/* Binds and listens on addr:port; returns the socket or -1 with err set. */
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
      bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 64)) {
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
  if (!memchr(cfg->address, 0, sizeof cfg->address) || !cfg->max_connections || !cfg->timeout_s)
    return GRT_ERR_INVALID_ARG;
  grt_metrics_server *s = calloc(1, sizeof *s);
  if (!s) return GRT_ERR_NOMEM;
  s->metrics = m;
  atomic_init(&s->scrapes, 0);
  grt_status st = GRT_OK;
  int fd = listen_on(cfg, &s->port, &st, err, err_size);
  if (fd < 0) {
    free(s);
    return st;
  }
  s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, handle, s,
                               MHD_OPTION_EXTERNAL_LOGGER, quiet, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                               MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                               cfg->timeout_s, MHD_OPTION_END);
  if (!s->daemon) {
    set_err(err, err_size, "%s:%u: %s", cfg->address, cfg->port, "libmicrohttpd could not start its thread");
    close(fd);
    free(s);
    return GRT_ERR_IO;
  }
  *out = s;
  return GRT_OK;
}

uint16_t grt_metrics_server_port(const grt_metrics_server *s) { return s ? s->port : 0; }

uint64_t grt_metrics_server_scrapes(const grt_metrics_server *s) {
  return s ? atomic_load(&((grt_metrics_server *)s)->scrapes) : 0;
}

grt_status grt_metrics_server_stop(grt_metrics_server *s) {
  if (!s) return GRT_OK;
  MHD_stop_daemon(s->daemon); /* joins the thread and closes the listening socket */
  free(s);
  return GRT_OK;
}
