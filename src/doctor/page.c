/* page.c — the snapshot's page: HTML around the data object (page_data.c),
 * with the script and style inline (embedded from src/doctor/page/ at build
 * time), so it opens offline; grt_doctor_page_save, the replay it draws. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "page_impl.h"

extern const unsigned char grt__page_report_js[], grt__page_report_css[];
extern const size_t grt__page_report_js_len, grt__page_report_css_len;

/* HTML text: the name is the only string from outside that lands in markup. */
static void html_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '&') fputs("&amp;", f);
    else if (*s == '"') fputs("&quot;", f);
    else fputc(*s, f);
  }
}

/* The data inside <script type="application/json">: "</" is written "<\/" so no
 * string in it (a frame name, a path) can end the element. */
static void json_in_script(FILE *f, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    fputc(s[i], f);
    if (s[i] == '<' && i + 1 < n && s[i + 1] == '/') fputc('\\', f);
  }
}

grt_status grt__page_write(FILE *f, const grt__page_input *x) {
  char *data = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&data, &n);
  if (!m) return GRT_ERR_NOMEM;
  grt_status st = grt__page_data(m, x);
  if (fclose(m) && !st) st = GRT_ERR_NOMEM;
  if (st) {
    free(data);
    return st;
  }
  fputs("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>gpurt report: ", f);
  html_text(f, x->name);
  fputs("</title>\n<style>\n", f);
  fwrite(grt__page_report_css, 1, grt__page_report_css_len, f);
  fputs("</style></head>\n<body>\n<h1>gpurt report: ", f);
  html_text(f, x->name);
  fprintf(f, "</h1>\n<p class=\"sub\">device %d; figures from the faithful replay (the caching allocator placing "
             "every block where PyTorch did) and from the recorded events</p>\n", x->device);
  fputs("<section id=\"doctor\"></section>\n"
        "<h2>Active memory over time</h2>\n"
        "<p class=\"note\">Live allocations stacked in the order they were made, one colour per allocation site. "
        "Hover a band for its size, address, lifetime and stack; click pins it; the wheel zooms, a drag pans, a "
        "double click resets. Red: OOMs; violet: the peak of live bytes.</p>\n"
        "<div class=\"controls\"><label>x axis <select id=\"axis\"><option value=\"event\">event index</option>"
        "<option value=\"time\">recorded time</option></select></label></div>\n"
        "<canvas id=\"tl\"></canvas>\n"
        "<h2>Allocator state at an event (as recorded)</h2>\n"
        "<div class=\"controls\"><input type=\"range\" id=\"ev\" min=\"0\" value=\"0\" aria-label=\"event\">"
        "<span id=\"jumps\"></span></div>\n"
        "<p id=\"state-figures\" class=\"note\"></p>\n"
        "<canvas id=\"segs\"></canvas>\n"
        "<p class=\"note\">One row per segment (the 200 largest), blocks coloured by site; grey: cached free; "
        "amber: freed, waiting on another stream; the largest free block is outlined.</p>\n"
        "<h2>Figures over time</h2>\n<div id=\"legend\" class=\"legend\"></div>\n<canvas id=\"fig\"></canvas>\n"
        "<p id=\"fig-note\" class=\"note\"></p>\n<div id=\"tip\"></div>\n"
        "<script id=\"gpurt-data\" type=\"application/json\">",
        f);
  json_in_script(f, data, n);
  free(data);
  fputs("</script>\n<script>\n", f);
  fwrite(grt__page_report_js, 1, grt__page_report_js_len, f);
  fputs("</script>\n</body></html>\n", f);
  return ferror(f) ? GRT_ERR_IO : GRT_OK;
}

/* The faithful replay's per-event figures: the page draws the model beside
 * the recorded run. */
static grt_status replay_series(const grt_trace *t, grt_replay **out, char *err, size_t err_size) {
  grt_replay_config c;
  grt_replay_config_default(&c);
  c.placement = GRT_REPLAY_PLACE_RECORDED;
  c.record_series = true;
  grt_status st = grt_replay_open(t, &c, out);
  if (st) return snprintf(err, err_size, "cannot create the replay"), st;
  if (!(st = grt_replay_rebuild_start(*out))) st = grt_replay_run(*out);
  if (st) snprintf(err, err_size, "%s", grt_replay_last_error(*out));
  return st;
}

grt_status grt_doctor_page_save(const grt_trace *trace, const grt_doctor_report *examined, const char *name,
                                int device, const char *path, size_t *events, char *err, size_t err_size) {
  char scratch[8];
  if (!err || !err_size) err = scratch, err_size = sizeof scratch;
  err[0] = 0;
  if (events) *events = 0;
  if (!trace || !path || !*path) return snprintf(err, err_size, "no trace or no file to write"), GRT_ERR_INVALID_ARG;
  grt_doctor_report *own = NULL;
  grt_status st = GRT_OK;
  if (!examined) {
    if (!(own = malloc(sizeof *own))) return snprintf(err, err_size, "out of host memory"), GRT_ERR_NOMEM;
    st = grt_doctor_examine(trace, own, err, err_size);
  }
  grt_replay *r = NULL;
  const grt_replay_sample *samples = NULL;
  size_t n = 0;
  if (!st) st = replay_series(trace, &r, err, err_size);
  if (!st && (st = grt_replay_series(r, &samples, &n))) snprintf(err, err_size, "the replay kept no series");
  if (!st) {
    FILE *f = fopen(path, "w");
    grt__page_input x = {trace, name ? name : "snapshot", device, examined ? examined : own, samples, n};
    if (!f) st = GRT_ERR_IO;
    else st = grt__page_write(f, &x);
    if (f && fclose(f) && !st) st = GRT_ERR_IO;
    if (st) snprintf(err, err_size, "cannot write %s: %s", path, grt_status_str(st));
    else if (events) *events = n;
  }
  grt_status dst = grt_replay_destroy(r);
  if (!st && dst) st = dst, snprintf(err, err_size, "grt_replay_destroy: %s", grt_status_str(dst));
  free(own);
  return st;
}
