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
 * Slow clients cannot starve scrapers. Every connection has a deadline for
 * what it is doing, however slowly it trickles bytes: its whole request
 * header within header_timeout_s of being accepted, then the response read
 * within timeout_s, then (keep-alive) its next request within timeout_s.
 * Past it the server closes the connection. And a new connection is never
 * left waiting for a slot: one that makes its address hold more than
 * per_ip_connections, or the server hold max_connections, displaces the
 * oldest connection that has no request being answered (idle keep-alive
 * ones first, then those still sending a header). Displacing rather than
 * refusing matters because a scraper and a slow client often share an
 * address (127.0.0.1 above all): a scraper sends its request at once, so it
 * is never the oldest idle one. A new connection is refused (closed at once)
 * only when its address already has per_ip_connections requests being
 * answered. One poller thread serves all: sockets are non-blocking and a
 * response is rendered in memory, so no client can hold the thread.
 *
 * Thread safety: grt_metrics_server_port, _scrapes and _counters may be called
 * from any thread; grt_metrics_server_stop from one thread, once. The registry must
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
  /* Connections held at once, all addresses together: 2 to 1024; default 32.
   * Filling the last one displaces the oldest waiting connection, so one is
   * always free for the next scraper. */
  unsigned max_connections;
  /* Connections held at once from one IP address: 1 to max_connections - 1,
   * so one address alone never fills the server; default 8. One more
   * displaces that address's oldest waiting connection. */
  unsigned per_ip_connections;
  /* Seconds from accepting a connection to its complete request header,
   * however many bytes trickle in meanwhile: 1 to 60; default 3 (a real
   * scraper sends its header in one packet). */
  unsigned header_timeout_s;
  /* Seconds a client may take to read a response, and a keep-alive
   * connection may stay idle between requests: 1 to 3600; default 5. */
  unsigned timeout_s;
} grt_serve_config;

/* What the server has done with connections since it started. */
typedef struct grt_serve_counters {
  uint64_t scrapes;         /* 200 answers on /metrics */
  uint64_t header_timeouts; /* closed: no complete request header within header_timeout_s */
  uint64_t idle_timeouts;   /* closed: keep-alive idle, or response unread, past timeout_s */
  uint64_t displaced;       /* closed to make room for a newer connection */
  uint64_t refused;         /* closed at once: its address had per_ip_connections requests being answered */
} grt_serve_counters;

GRT_API void grt_serve_config_default(grt_serve_config *cfg);

/* Parses "HOST:PORT", ":PORT" or "PORT" into cfg's address and port (a
 * missing host keeps cfg's address). GRT_ERR_PARSE (cfg unchanged) on bad input. */
GRT_API GRT_MUST_CHECK grt_status grt_serve_config_parse(grt_serve_config *cfg, const char *spec);

/* Starts serving m (borrowed); cfg NULL = the defaults. On failure returns
 * GRT_ERR_IO (address in use, no permission...), GRT_ERR_INVALID_ARG (bad
 * address, a limit out of its range) or GRT_ERR_NOMEM, with a sentence in err
 * (if non-NULL), and nothing is left running. */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_serve(grt_metrics *m, const grt_serve_config *cfg,
                                                    grt_metrics_server **out,
                                                    char *err, size_t err_size);

/* The port actually bound (useful with port 0). */
GRT_API uint16_t grt_metrics_server_port(const grt_metrics_server *s);

/* Requests answered with 200 on /metrics so far. */
GRT_API uint64_t grt_metrics_server_scrapes(const grt_metrics_server *s);

/* A consistent copy of s's counters into *out. GRT_ERR_INVALID_ARG if either is NULL. */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_server_counters(const grt_metrics_server *s, grt_serve_counters *out);

/* Stops accepting, finishes the request in progress, joins the thread, frees
 * the server. NULL is a no-op. */
GRT_API GRT_MUST_CHECK grt_status grt_metrics_server_stop(grt_metrics_server *s);

#ifdef __cplusplus
}
#endif
#endif /* GPURT_SERVE_H */
