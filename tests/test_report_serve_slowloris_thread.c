/* test_report_serve_slowloris_thread.c — /metrics cannot be starved: while a
 * flood thread holds 72 slow connections open (silent, trickling a header a
 * byte at a time, keep-alive and never closing), from the scraper's own
 * address and seven others, and reopens each one the server closes, every
 * scrape still gets its whole 200 within a second. Connections that trickle
 * their header are closed at header_timeout_s even though bytes keep coming,
 * idle keep-alive ones at timeout_s, and bad limits are refused with a
 * sentence. Every wait is bounded by poll(). Runs under TSan. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alloc_fixture.h"
#include "gpurt/serve.h"

#define SLOW 64   /* silent or trickling, 8 from each of 127.0.0.1..8 */
#define HOLDERS 8 /* keep-alive clients on 127.0.0.1 that never close */
#define FLOOD (SLOW + HOLDERS)
#define SCRAPE_BUDGET_MS 1000 /* the requirement: a scrape is answered within a second */

static const char REQUEST[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
static const char TRICKLE[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "; /* then 'a' forever */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits at most ms for events on fd; the revents, 0 on timeout. */
static short wait_fd(int fd, short events, int64_t ms) {
  struct pollfd p = {fd, events, 0};
  return poll(&p, 1, ms > 0 ? (int)ms : 0) == 1 ? p.revents : 0;
}

/* A non-blocking socket from src (an address of 127.0.0.0/8) connecting to
 * 127.0.0.1:port; -1 if src cannot be bound. */
static int open_from(const char *src, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1; /* the port is picked at connect, by the whole 4-tuple: churn cannot run out of them */
  setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  struct sockaddr_in sa = {0};
  sa.sin_family = AF_INET;
  inet_pton(AF_INET, src, &sa.sin_addr);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa)) {
    close(fd);
    return -1;
  }
  sa.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

/* One scrape on a fresh connection, as Prometheus makes one after the server
 * closed its last: the status, and the body checked against Content-Length.
 * Fails the test past budget_ms. */
static void scrape(uint16_t port, int64_t budget_ms, int64_t *took_ms) {
  int64_t t0 = now_ms(), end = t0 + budget_ms;
  int fd = open_from("127.0.0.1", port);
  assert_true(fd >= 0);
  assert_true(wait_fd(fd, POLLOUT, end - now_ms()) & POLLOUT);
  assert_int_equal(send(fd, REQUEST, sizeof REQUEST - 1, MSG_NOSIGNAL), (ssize_t)(sizeof REQUEST - 1));
  static char buf[1 << 20];
  size_t len = 0;
  const char *body = NULL;
  long want = -1;
  while (!body || (long)(len - (size_t)(body - buf)) < want) {
    assert_true(now_ms() < end); /* the scrape's whole answer within the budget */
    if (!(wait_fd(fd, POLLIN, end - now_ms()) & (POLLIN | POLLHUP))) continue;
    ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
    assert_true(r > 0); /* the server must not close a scraper's connection unanswered */
    len += (size_t)r;
    buf[len] = 0;
    const char *eoh = body ? NULL : strstr(buf, "\r\n\r\n");
    if (eoh) {
      body = eoh + 4;
      const char *cl = strstr(buf, "Content-Length: ");
      assert_non_null(cl);
      want = atol(cl + 16);
    }
  }
  close(fd);
  *took_ms = now_ms() - t0;
  assert_memory_equal(buf, "HTTP/1.1 200", 12);
  assert_non_null(strstr(body, "gpurt_alloc_largest_free_block_bytes{"));
}

typedef struct flood {
  uint16_t port;
  int nsrc; /* source addresses usable: 127.0.0.1..nsrc */
  atomic_int stop;
  atomic_long opened, closed_by_server;
  int fd[FLOOD];
  size_t sent[FLOOD];
} flood;

typedef enum { SILENT, TRICKLING, HOLDING } slow_kind;

/* Both kinds from every address: i % 8 picks the address, i / 8 the kind. */
static slow_kind kind_of(int i) { return i >= SLOW ? HOLDING : (i / 8) % 2 ? TRICKLING : SILENT; }

static void reopen(flood *f, int i) {
  char src[32];
  snprintf(src, sizeof src, "127.0.0.%d", i >= SLOW ? 1 : 1 + i % f->nsrc);
  f->fd[i] = open_from(src, f->port);
  f->sent[i] = 0;
  if (f->fd[i] >= 0) atomic_fetch_add(&f->opened, 1);
}

/* Sends what a slow client of kind k that has sent *sent bytes sends next:
 * one byte more of a header that never ends, or a holder's one request. */
static void push(int fd, slow_kind k, size_t *sent) {
  if (k == SILENT || (k == HOLDING && *sent)) return;
  const char *what = k == HOLDING ? REQUEST : *sent < sizeof TRICKLE - 1 ? TRICKLE + *sent : "a";
  size_t n = k == HOLDING ? sizeof REQUEST - 1 : 1;
  if (send(fd, what, n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)n) *sent += n;
}

/* Reads what came (a holder's responses); closes and counts the connections
 * the server ended. */
static void drain(flood *f, int i) {
  char buf[4096];
  ssize_t r = recv(f->fd[i], buf, sizeof buf, MSG_DONTWAIT);
  if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))) return;
  close(f->fd[i]);
  f->fd[i] = -1;
  atomic_fetch_add(&f->closed_by_server, 1);
}

/* Keeps FLOOD slow connections open, every 20 ms a byte more each, until told to stop. */
static void *flood_main(void *arg) {
  flood *f = arg;
  struct pollfd p[FLOOD];
  while (!atomic_load(&f->stop)) {
    for (int i = 0; i < FLOOD; i++) {
      if (f->fd[i] < 0) reopen(f, i);
      if (f->fd[i] >= 0) push(f->fd[i], kind_of(i), &f->sent[i]);
      p[i] = (struct pollfd){f->fd[i], POLLIN, 0};
    }
    if (poll(p, FLOOD, 20) <= 0) continue;
    for (int i = 0; i < FLOOD; i++)
      if (p[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR))) drain(f, i);
  }
  for (int i = 0; i < FLOOD; i++)
    if (f->fd[i] >= 0) close(f->fd[i]);
  return NULL;
}

/* How many of 127.0.0.1..8 this machine lets a socket bind (all of them on
 * Linux, where the whole of 127.0.0.0/8 is loopback). */
static int source_addresses(uint16_t port) {
  int n = 1;
  for (int k = 2; k <= 8; k++, n++) {
    char src[32];
    snprintf(src, sizeof src, "127.0.0.%d", k);
    int fd = open_from(src, port);
    if (fd < 0) break;
    close(fd);
  }
  return n;
}

typedef struct world {
  fixture fx;
  grt_metrics *m;
  grt_metrics_server *srv;
} world;

static world start(const grt_serve_config *sc) {
  world w;
  w.fx = make_fixture("caching", GRT_GiB, NULL);
  assert_int_equal(grt_metrics_create(&w.m), GRT_OK);
  assert_int_equal(grt_metrics_add_allocator(w.m, w.fx.a, "act", "0"), GRT_OK);
  assert_int_equal(grt_metrics_add_device(w.m, w.fx.dev, "0"), GRT_OK);
  char err[256];
  assert_int_equal(grt_metrics_serve(w.m, sc, &w.srv, err, sizeof err), GRT_OK);
  return w;
}

static void finish(world *w) {
  assert_int_equal(grt_metrics_server_stop(w->srv), GRT_OK);
  assert_int_equal(grt_metrics_destroy(w->m), GRT_OK);
  drop_fixture(&w->fx);
}

static void print_counters(const char *when, const grt_serve_counters *c) {
  printf("  %s: scrapes %llu, header timeouts %llu, idle timeouts %llu, displaced %llu, refused %llu\n", when,
         (unsigned long long)c->scrapes, (unsigned long long)c->header_timeouts, (unsigned long long)c->idle_timeouts,
         (unsigned long long)c->displaced, (unsigned long long)c->refused);
}

static void test_scrapes_answered_under_flood(void **state) {
  (void)state;
  grt_serve_config sc;
  grt_serve_config_default(&sc); /* the defaults are what must hold */
  sc.port = 0;
  world w = start(&sc);
  static flood f;
  memset(&f, 0, sizeof f);
  f.port = grt_metrics_server_port(w.srv);
  f.nsrc = source_addresses(f.port);
  for (int i = 0; i < FLOOD; i++) f.fd[i] = -1;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, flood_main, &f), 0);
  for (int64_t end = now_ms() + 2000; atomic_load(&f.opened) < FLOOD && now_ms() < end;) wait_fd(-1, 0, 10);
  assert_true(atomic_load(&f.opened) >= FLOOD);
  grt_serve_counters c;
  assert_int_equal(grt_metrics_server_counters(w.srv, &c), GRT_OK);
  for (int64_t end = now_ms() + 2000; c.displaced < FLOOD && now_ms() < end; wait_fd(-1, 0, 10))
    assert_int_equal(grt_metrics_server_counters(w.srv, &c), GRT_OK); /* until the flood has filled the server */
  int64_t worst = 0;
  for (int k = 0; k < 8; k++) {
    int64_t took;
    scrape(f.port, SCRAPE_BUDGET_MS, &took);
    worst = took > worst ? took : worst;
    wait_fd(-1, 0, 50);
  }
  atomic_store(&f.stop, 1);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(grt_metrics_server_counters(w.srv, &c), GRT_OK);
  printf("  8 scrapes under %d slow connections from %d addresses: slowest %lld ms; flood opened %ld, "
         "server closed %ld\n",
         FLOOD, f.nsrc, (long long)worst, atomic_load(&f.opened), atomic_load(&f.closed_by_server));
  print_counters("server", &c);
  assert_true(c.scrapes >= 8);
  assert_true(c.displaced > 0);
  finish(&w);
}

typedef struct timed_conn {
  int fd;
  slow_kind kind;
  size_t sent;
  int64_t opened_ms, closed_ms; /* closed_ms 0: still open */
  bool got_bytes;
} timed_conn;

/* Reads what the server sent; notes when it closed the connection. */
static void watch(timed_conn *c, int64_t now) {
  char buf[4096];
  ssize_t r = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
  if (r > 0) c->got_bytes = true;
  if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) c->closed_ms = now;
}

static void run_timed(timed_conn *cs, int n, int64_t bound_ms) {
  for (int64_t end = now_ms() + bound_ms; now_ms() < end;) {
    struct pollfd p[16];
    int open = 0;
    for (int i = 0; i < n; i++) {
      bool live = !cs[i].closed_ms;
      open += live;
      if (live) push(cs[i].fd, cs[i].kind, &cs[i].sent);
      p[i] = (struct pollfd){live ? cs[i].fd : -1, POLLIN, 0};
    }
    if (!open) return;
    poll(p, (nfds_t)n, 200); /* a trickling client's byte every 200 ms: libmicrohttpd's own timeout never fires */
    for (int i = 0; i < n; i++)
      if (p[i].fd >= 0 && p[i].revents) watch(&cs[i], now_ms());
  }
}

static void test_slow_connections_closed_at_deadline(void **state) {
  (void)state;
  grt_serve_config sc;
  grt_serve_config_default(&sc);
  sc.port = 0;
  sc.header_timeout_s = 1;
  sc.timeout_s = 3;
  world w = start(&sc);
  uint16_t port = grt_metrics_server_port(w.srv);
  timed_conn cs[7];
  for (int i = 0; i < 7; i++) {
    slow_kind k = i == 6 ? HOLDING : i % 2 ? TRICKLING : SILENT;
    cs[i] = (timed_conn){open_from("127.0.0.1", port), k, 0, now_ms(), 0, false};
    assert_true(cs[i].fd >= 0);
  }
  run_timed(cs, 7, 4500);
  for (int i = 0; i < 7; i++) {
    int64_t lived = cs[i].closed_ms - cs[i].opened_ms;
    static const char *const names[] = {"silent", "trickling", "keep-alive"};
    printf("  %s connection closed by the server after %lld ms\n", names[cs[i].kind], (long long)lived);
    assert_true(cs[i].closed_ms > 0);
    if (cs[i].kind == HOLDING) {
      assert_true(cs[i].got_bytes); /* answered, then closed when idle for timeout_s */
      assert_true(lived >= 2900 && lived < 4400);
    } else {
      assert_false(cs[i].got_bytes); /* closed without an answer */
      assert_true(lived >= 900 && lived < 2000);
    }
    close(cs[i].fd);
  }
  grt_serve_counters c;
  assert_int_equal(grt_metrics_server_counters(w.srv, &c), GRT_OK);
  print_counters("server", &c);
  assert_int_equal(c.header_timeouts, 6);
  assert_int_equal(c.idle_timeouts, 1);
  assert_int_equal(c.displaced + c.refused, 0);
  finish(&w);
}

static void expect_refused(grt_serve_config sc, const char *says) {
  grt_metrics *m;
  assert_int_equal(grt_metrics_create(&m), GRT_OK);
  grt_metrics_server *srv = (grt_metrics_server *)0x1;
  char err[256];
  sc.port = 0;
  assert_int_equal(grt_metrics_serve(m, &sc, &srv, err, sizeof err), GRT_ERR_INVALID_ARG);
  assert_null(srv);
  if (!strstr(err, says)) fail_msg("'%s' does not say '%s'", err, says);
  assert_int_equal(grt_metrics_destroy(m), GRT_OK);
}

static void test_bad_limits_refused(void **state) {
  (void)state;
  grt_serve_config d, sc;
  grt_serve_config_default(&d);
  assert_int_equal(d.max_connections, 32);
  assert_int_equal(d.per_ip_connections, 8);
  assert_int_equal(d.header_timeout_s, 3);
  assert_int_equal(d.timeout_s, 5);
  sc = d;
  sc.max_connections = 0;
  expect_refused(sc, "max_connections is 0; it must be 2 to 1024");
  sc = d;
  sc.max_connections = 1;
  expect_refused(sc, "max_connections is 1;");
  sc = d;
  sc.max_connections = 100000;
  expect_refused(sc, "max_connections is 100000;");
  sc = d;
  sc.per_ip_connections = 0;
  expect_refused(sc, "per_ip_connections is 0; it must be 1 to 31");
  sc = d;
  sc.per_ip_connections = 32;
  expect_refused(sc, "per_ip_connections is 32;");
  sc = d;
  sc.header_timeout_s = 0;
  expect_refused(sc, "header_timeout_s is 0; it must be 1 to 60 seconds");
  sc = d;
  sc.header_timeout_s = 3600;
  expect_refused(sc, "header_timeout_s is 3600;");
  sc = d;
  sc.timeout_s = 0;
  expect_refused(sc, "timeout_s is 0; it must be 1 to 3600 seconds");
  sc = d;
  sc.timeout_s = 86400;
  expect_refused(sc, "timeout_s is 86400;");
  grt_serve_counters c;
  assert_int_equal(grt_metrics_server_counters(NULL, &c), GRT_ERR_INVALID_ARG);
  sc = d; /* the smallest server */
  sc.port = 0;
  sc.max_connections = 2;
  sc.per_ip_connections = 1;
  world w = start(&sc);
  int64_t took;
  scrape(grt_metrics_server_port(w.srv), 5000, &took);
  finish(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_limits_refused),
      cmocka_unit_test(test_scrapes_answered_under_flood),
      cmocka_unit_test(test_slow_connections_closed_at_deadline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
