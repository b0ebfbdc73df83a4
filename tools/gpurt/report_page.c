/* report_page.c — the page of `gpurt report`: HTML around the data object
 * (report_data.c), with the script and style inline (embedded from
 * tools/gpurt/report/ at build time), so it opens offline. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_page.h"

extern const unsigned char grt_report_report_js[], grt_report_report_css[];
extern const size_t grt_report_report_js_len, grt_report_report_css_len;

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

grt_status cli_report_page(FILE *f, const cli_report_input *x) {
  char *data = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&data, &n);
  if (!m) return GRT_ERR_NOMEM;
  grt_status st = cli_report_data(m, x);
  if (fclose(m) && !st) st = GRT_ERR_NOMEM;
  if (st) {
    free(data);
    return st;
  }
  fputs("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>gpurt report: ", f);
  html_text(f, x->name);
  fputs("</title>\n<style>\n", f);
  fwrite(grt_report_report_css, 1, grt_report_report_css_len, f);
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
  fwrite(grt_report_report_js, 1, grt_report_report_js_len, f);
  fputs("</script>\n</body></html>\n", f);
  return ferror(f) ? GRT_ERR_IO : GRT_OK;
}
