/* gpurt/serve.h — an optional HTTP endpoint serving a metrics registry at
 * /metrics (Prometheus text format), from a background thread.
 *
 * Built as the separate library gpurt_serve (libmicrohttpd) only when
 * libmicrohttpd is found; libgpurt itself stays dependency-free. Off unless a
 * program calls grt_metrics_serve. Binds to 127.0.0.1 by default.
 *
 * Each request renders the registry afresh (grt_metrics_render): allocator
 * locks are held only while their figures are copied, never while text is
 * written or sent, so a slow scraper cannot stall an allocator.
 * Responses: GET/HEAD /metrics -> 200; other paths -> 404; other methods ->
 * 405 (with Allow); requests libmicrohttpd cannot parse -> 400.
 *
 * Thread safety: grt_metrics_server_port and _requests may be called from any
 * thread; grt_metrics_server_stop from one thread, once. The registry must
 * outlive the server.
 */
#ifndef GPURT_SERVE_H
#define GPURT_SERVE_H

#include "gpurt/report.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct grt_metrics_server grt_metrics_server;

typedef struct grt_serve_config {
  char address[64];    /* IPv4 literal or "localhost"; default "127.0.0.1" (loopback only) */
  uint16_t port;       /* default 9400; 0 = any free port (see grt_metrics_server_port) */
  unsigned max_connections; /* default 32 */
  unsigned timeout_s;       /* idle connection timeout, seconds; default 10 */
} grt_serve_config;

GRT_API void grt_serve_config_default(grt_serve_config *cfg);

/* Parses "HOST:PORT", ":PORT" or "PORT" into cfg's address and port (a
 * missing host keeps cfg's address). GRT_ERR_PARSE (cfg unchanged) on bad input. */
GRT_API GRT_MUST_CHECK grt_status grt_serve_config_parse(grt_serve_config *cfg, const char *spec);

/* Starts serving m (borrowed). On failure returns GRT_ERR_IO (address in use,
 * no permission...), GRT_ERR_INVALID_ARG (bad address) or GRT_ERR_NOMEM, with
 * a sentence in err (if non-NULL), and nothing is left running. */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_serve(grt_metrics *m, const grt_serve_config *cfg,
                                                    grt_metrics_server **out,
                                                    char *err, size_t err_size);

/* The port actually bound (useful with port 0). */
GRT_API uint16_t grt_metrics_server_port(const grt_metrics_server *s);

/* Requests answered with 200 on /metrics so far. */
GRT_API uint64_t grt_metrics_server_scrapes(const grt_metrics_server *s);

/* Stops accepting, finishes the request in progress, joins the thread, frees
 * the server. NULL is a no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_server_stop(grt_metrics_server *s);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_SERVE_H */
