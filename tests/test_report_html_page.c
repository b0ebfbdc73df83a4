/* test_report_html_page.c — grt_html_write_report through its C interface:
 * escaping of every special character, runs of two traces (one plot section
 * each, lines only for runs with samples), long series reduced to the plot
 * width with their peak kept, segment maps of every block state and the
 * 400-segment cap, the summary table's optional cells, argument checks and
 * write failures. (test_report_html.sh covers the page through the CLI.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpurt/html.h"

/* Writes the page into a temporary file and returns it as a string (caller frees). */
static char *render(const char *title, const grt_html_run *runs, size_t n) {
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(grt_html_write_report(f, title, runs, n), GRT_OK);
  long len = ftell(f);
  assert_true(len > 0);
  rewind(f);
  char *s = malloc((size_t)len + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)len, f), (size_t)len);
  s[len] = 0;
  fclose(f);
  return s;
}

static size_t count(const char *s, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static void test_page_contents(void **state) {
  (void)state;
  enum { LONG = 5000 };
  grt_replay_sample *many = calloc(LONG, sizeof *many);
  for (size_t i = 0; i < LONG; i++) many[i].reserved = many[i].allocated = many[i].largest_free = i % 100;
  many[4321].reserved = 1 << 20; /* a one-sample spike must survive the reduction */
  grt_replay_sample few[3] = {{.reserved = 10, .allocated = 5}, {.reserved = 20}, {.reserved = 0}};

  grt_snapshot_block blocks[3] = {{0x1000, 512, 100, GRT_BLOCK_ACTIVE_ALLOCATED},
                                  {0x1200, 512, 0, GRT_BLOCK_ACTIVE_PENDING_FREE},
                                  {0x1400, 1024, 0, GRT_BLOCK_INACTIVE}};
  grt_snapshot_segment one = {.address = 0x1000, .total_size = 2048, .is_large = 0, .blocks = blocks, .n_blocks = 3};
  grt_alloc_snapshot peak = {.segments = &one, .n_segments = 1};
  enum { MANY_SEGS = 401 };
  grt_snapshot_segment *segs = calloc(MANY_SEGS, sizeof *segs);
  for (size_t i = 0; i < MANY_SEGS; i++)
    segs[i] = (grt_snapshot_segment){.address = 0x100000 * (i + 1), .total_size = 2048, .is_large = 1};
  grt_alloc_snapshot oom = {.segments = segs, .n_segments = MANY_SEGS};

  grt_replay_summary s1 = {.events = LONG, .peak_reserved = 1 << 20, .has_oom = true, .first_oom_event = 77,
                           .first_oom_utilization = 0.5, .device_mallocs = 3, .device_frees = 2, .syncs = 1};
  grt_replay_summary s2 = {.events = 3};
  grt_html_run runs[4] = {
      {.trace = "a<b>&\"c\"", .policy = "caching", .summary = &s1, .samples = many, .n_samples = LONG,
       .min_capacity = 4096, .heap_ratio = 1.25, .at_peak = &peak, .peak_event = 12, .at_oom = &oom, .oom_event = 77},
      {.trace = "second", .policy = "naive", .summary = &s2, .samples = few, .n_samples = 3},
      {.trace = "a<b>&\"c\"", .policy = "no samples", .summary = &s2},
      {.trace = "second", .policy = "bump", .summary = &s2, .samples = few, .n_samples = 0},
  };
  char *page = render("t<1> & \"2\"", runs, 4);
  assert_non_null(strstr(page, "<title>gpurt replay: t&lt;1&gt; &amp; &quot;2&quot;</title>"));
  assert_non_null(strstr(page, "<h2>a&lt;b&gt;&amp;&quot;c&quot;</h2>"));
  assert_int_equal(count(page, "<h2>second</h2>"), 1); /* one section per trace, whatever the run order */
  assert_non_null(strstr(page, "id=\"plot-reserved-0\""));
  assert_non_null(strstr(page, "id=\"plot-largest-free-1\""));
  assert_int_equal(count(page, "class=\"series p"), 3 * 2); /* runs 0 and 1 have samples: 3 metrics each */
  /* one colour and class per policy, in order of first appearance, and a toggle each in the page's legend */
  assert_int_equal(count(page, "class=\"series p0\" fill=\"none\" stroke=\"#1f77b4\""), 3); /* caching */
  assert_int_equal(count(page, "class=\"series p1\" fill=\"none\" stroke=\"#d62728\""), 3); /* naive */
  for (int k = 0; k < 4; k++) {
    char id[32];
    snprintf(id, sizeof id, "id=\"toggle-p%d\"", k);
    assert_int_equal(count(page, id), 1);
  }
  assert_null(strstr(page, "log scale")); /* no line dwarfs another here */
  assert_non_null(strstr(page, "id=\"line-allocated-1\""));
  assert_null(strstr(page, "id=\"line-reserved-2\""));
  assert_null(strstr(page, "id=\"line-reserved-3\""));
  /* run 0's reserved line: 1200 points, the spike (1 MiB) at the top of the plot (y = 10) */
  const char *line = strstr(page, "id=\"line-reserved-0\"");
  assert_non_null(line);
  const char *end = strstr(line, "\"><title>");
  size_t commas = 0;
  for (const char *p = line; p < end; p++) commas += *p == ',';
  assert_int_equal(commas, 1200);
  const char *top = strstr(line, ",10.0 ");
  assert_true(top && top < end);
  assert_non_null(strstr(page, ">1.00 MiB</text>")); /* the y axis top */
  /* segment maps */
  assert_non_null(strstr(page, "caching: segments at the peak of reserved memory (event 12): 1 segment</p>"));
  assert_non_null(strstr(page, "segments at the first OOM (event 77): 401 segments (first 400 shown)</p>"));
  assert_non_null(strstr(page, "id=\"segmap-peak-0\""));
  assert_non_null(strstr(page, "<title>segment 0x1000 2.00 KiB small</title>"));
  assert_non_null(strstr(page, "fill=\"#3b6fb6\" stroke")); /* allocated */
  assert_non_null(strstr(page, "fill=\"#f0a030\" stroke")); /* pending free */
  assert_non_null(strstr(page, "fill=\"#dde3ea\" stroke")); /* free */
  assert_int_equal(count(page, " large</title>"), 400);
  /* summary table */
  assert_non_null(strstr(page, "<td>1.250</td><td>event 77 at 50.0% utilization</td><td>3 / 2</td><td>1</td>"));
  assert_int_equal(count(page, "<td>-</td><td>none</td>"), 3);
  free(page);

  /* no runs, no title */
  page = render(NULL, NULL, 0);
  assert_non_null(strstr(page, "<title>gpurt replay: report</title>"));
  assert_non_null(strstr(page, "<h1>gpurt replay report: </h1>"));
  assert_non_null(strstr(page, "<table id=\"summary\">"));
  free(page);
  free(segs);
  free(many);
}

/* A series reduced to fewer samples than events (whatif --html) spans the run's events on the x axis. */
static void test_reduced_series(void **state) {
  (void)state;
  grt_replay_sample few[3] = {{.reserved = 10}, {.reserved = 20}, {.reserved = 5}};
  grt_replay_summary s = {.events = 1000};
  grt_html_run run = {.trace = "t", .policy = "p", .summary = &s, .samples = few, .n_samples = 3};
  char *page = render("reduced", &run, 1);
  assert_non_null(strstr(page, "class=\"ax\">1000</text>"));
  free(page);
}

static void test_page_errors(void **state) {
  (void)state;
  grt_replay_summary s = {0};
  grt_html_run ok = {.trace = "t", .policy = "p", .summary = &s};
  grt_html_run bad[3] = {ok, ok, ok};
  bad[0].trace = NULL;
  bad[1].policy = NULL;
  bad[2].summary = NULL;
  FILE *f = tmpfile();
  assert_non_null(f);
  for (int i = 0; i < 3; i++) assert_int_equal(grt_html_write_report(f, "x", &bad[i], 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(ftell(f), 0); /* refused before writing anything */
  assert_int_equal(grt_html_write_report(f, "x", NULL, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_html_write_report(NULL, "x", &ok, 1), GRT_ERR_INVALID_ARG);
  fclose(f);
  f = fopen("/dev/null", "r"); /* every write fails */
  assert_non_null(f);
  assert_int_equal(grt_html_write_report(f, "x", &ok, 1), GRT_ERR_IO);
  fclose(f);
  assert_int_equal(grt_html_save_report(NULL, "x", &ok, 1), GRT_ERR_INVALID_ARG);
  assert_int_equal(grt_html_save_report("/nonexistent/dir/r.html", "x", &ok, 1), GRT_ERR_IO);
  f = fopen("/dev/full", "w");
  if (f) { /* the buffered page fails at close: no space */
    fclose(f);
    assert_int_equal(grt_html_save_report("/dev/full", "x", &ok, 1), GRT_ERR_IO);
  }
  /* a good path: the same page as the stream writer's */
  char path[64];
  snprintf(path, sizeof path, "/tmp/grt_html_%d.html", (int)getpid());
  assert_int_equal(grt_html_save_report(path, "x", &ok, 1), GRT_OK);
  f = fopen(path, "rb");
  assert_non_null(f);
  char buf[256] = "";
  assert_true(fread(buf, 1, sizeof buf - 1, f) > 0);
  fclose(f);
  assert_non_null(strstr(buf, "<title>gpurt replay: x</title>"));
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_page_contents),
      cmocka_unit_test(test_reduced_series),
      cmocka_unit_test(test_page_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
