/* test_report_serve_thread.c — the /metrics endpoint over real loopback
 * sockets: 200 with the exposition, 404 elsewhere, 405 for other methods,
 * 400 for garbage, a clear error for a port in use, live figures while
 * another thread drives the allocator, and a clean stop. Runs under TSan. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "alloc_fixture.h"
#include "gpurt/serve.h"

/* Sends req to 127.0.0.1:port, reads the whole reply into a malloc'ed string. */
static char *http(uint16_t port, const char *req) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  size_t n = strlen(req);
  assert_int_equal(write(fd, req, n), (ssize_t)n);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
    ssize_t r = read(fd, buf + len, cap - len - 1);
    if (r <= 0) break;
    len += (size_t)r;
  }
  buf[len] = 0;
  close(fd);
  return buf;
}

static int status_of(const char *reply) {
  const char *sp = strchr(reply, ' ');
  return sp ? atoi(sp + 1) : -1;
}

static char *get(uint16_t port, const char *method, const char *path) {
  char req[256];
  snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", method, path);
  return http(port, req);
}

typedef struct world {
  fixture fx;
  grt_metrics *m;
  grt_metrics_server *srv;
} world;

static world start(void) {
  world w;
  w.fx = make_fixture("caching", GRT_GiB, NULL);
  assert_int_equal(grt_metrics_create(&w.m), GRT_OK);
  assert_int_equal(grt_metrics_add_allocator(w.m, w.fx.a, "act", "0"), GRT_OK);
  assert_int_equal(grt_metrics_add_device(w.m, w.fx.dev, "0"), GRT_OK);
  grt_serve_config sc;
  grt_serve_config_default(&sc);
  sc.port = 0; /* any free port */
  char err[128];
  assert_int_equal(grt_metrics_serve(w.m, &sc, &w.srv, err, sizeof err), GRT_OK);
  assert_true(grt_metrics_server_port(w.srv) > 0);
  return w;
}

static void finish(world *w) {
  assert_int_equal(grt_metrics_server_stop(w->srv), GRT_OK);
  assert_int_equal(grt_metrics_destroy(w->m), GRT_OK);
  drop_fixture(&w->fx);
}

static void test_routes(void **state) {
  (void)state;
  world w = start();
  uint16_t port = grt_metrics_server_port(w.srv);
  grt_devptr p = must_malloc(w.fx.a, 3 * MiB, 0);
  char *r = get(port, "GET", "/metrics");
  assert_int_equal(status_of(r), 200);
  assert_non_null(strstr(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  assert_non_null(strstr(r, "\ngpurt_alloc_allocated_bytes{device=\"0\",allocator=\"act\",pool=\"all\"} 3145728\n"));
  free(r);
  r = get(port, "GET", "/metrics?x=1"); /* a query string does not change the path */
  assert_int_equal(status_of(r), 200);
  free(r);
  r = get(port, "HEAD", "/metrics");
  assert_int_equal(status_of(r), 200);
  assert_null(strstr(r, "gpurt_alloc")); /* no body */
  free(r);
  r = get(port, "GET", "/");
  assert_int_equal(status_of(r), 404);
  free(r);
  r = get(port, "GET", "/metricsx");
  assert_int_equal(status_of(r), 404);
  free(r);
  r = http(port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  assert_int_equal(status_of(r), 405);
  assert_non_null(strstr(r, "Allow: GET, HEAD"));
  free(r);
  r = get(port, "DELETE", "/metrics");
  assert_int_equal(status_of(r), 405);
  free(r);
  r = http(port, "GET metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); /* not a path */
  assert_int_equal(status_of(r), 400);
  free(r);
  r = http(port, "\x01\x02 garbage\r\n\r\n");
  assert_int_equal(status_of(r), 400); /* libmicrohttpd rejects what it cannot parse */
  free(r);
  assert_true(grt_metrics_server_scrapes(w.srv) >= 3);
  assert_int_equal(grt_alloc_free(w.fx.a, p), GRT_OK);
  finish(&w);
}

static void test_port_in_use_and_bad_address(void **state) {
  (void)state;
  world w = start();
  grt_serve_config sc;
  grt_serve_config_default(&sc);
  sc.port = grt_metrics_server_port(w.srv);
  grt_metrics_server *second = (grt_metrics_server *)0x1;
  char err[256];
  assert_int_equal(grt_metrics_serve(w.m, &sc, &second, err, sizeof err), GRT_ERR_IO);
  assert_null(second);
  assert_non_null(strstr(err, "address already in use"));
  snprintf(sc.address, sizeof sc.address, "not-an-address");
  assert_int_equal(grt_metrics_serve(w.m, &sc, &second, err, sizeof err), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_serve_config_parse(&sc, "127.0.0.1:9401"), GRT_OK);
  assert_string_equal(sc.address, "127.0.0.1");
  assert_int_equal(sc.port, 9401);
  assert_int_equal(grt_serve_config_parse(&sc, ":9402"), GRT_OK);
  assert_int_equal(sc.port, 9402);
  assert_int_equal(grt_serve_config_parse(&sc, "127.0.0.1:70000"), GRT_ERR_PARSE);
  assert_int_equal(grt_serve_config_parse(&sc, "127.0.0.1:"), GRT_ERR_PARSE);
  assert_int_equal(grt_serve_config_parse(&sc, "x:-1"), GRT_ERR_PARSE);
  assert_int_equal(sc.port, 9402); /* failed parses changed nothing */
  assert_int_equal(grt_metrics_server_stop(NULL), GRT_OK);
  finish(&w);
}

typedef struct driver {
  grt_allocator *a;
  volatile int done;
} driver;

/* Allocates and frees on its own thread while the server scrapes. */
static void *drive(void *arg) {
  driver *d = arg;
  grt_devptr ptrs[16];
  for (int round = 0; round < 200; round++) {
    for (int i = 0; i < 16; i++) assert_int_equal(grt_alloc_malloc(d->a, (uint64_t)(i + 1) * MiB, 0, &ptrs[i]), GRT_OK);
    for (int i = 0; i < 16; i++) assert_int_equal(grt_alloc_free(d->a, ptrs[i]), GRT_OK);
  }
  return NULL;
}

static void test_live_scrapes_while_allocating(void **state) {
  (void)state;
  world w = start();
  uint16_t port = grt_metrics_server_port(w.srv);
  driver d = {w.fx.a, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, drive, &d), 0);
  for (int i = 0; i < 20; i++) {
    char *r = get(port, "GET", "/metrics");
    assert_int_equal(status_of(r), 200);
    assert_non_null(strstr(r, "gpurt_alloc_largest_free_block_bytes{"));
    free(r);
  }
  assert_int_equal(pthread_join(t, NULL), 0);
  char *r = get(port, "GET", "/metrics");
  assert_non_null(strstr(r, "gpurt_alloc_allocations_total{device=\"0\",allocator=\"act\",pool=\"all\"} 3200\n"));
  free(r);
  finish(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_routes),
      cmocka_unit_test(test_port_in_use_and_bad_address),
      cmocka_unit_test(test_live_scrapes_while_allocating),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
