/* cli_opts.c — see cli_opts.h.
 *
 * getopt_long runs in RETURN_IN_ORDER mode ("-" first in the short option
 * string): positional arguments come back in place, argv is never permuted,
 * and the result does not depend on POSIXLY_CORRECT. ":" after it and
 * opterr = 0 silence getopt, so every message is worded here; what went
 * wrong is worked out from the argument itself and the table, because getopt
 * reports an unknown and an ambiguous long option alike. */
#include "cli_opts.h"

#include "input.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpurt/alloc.h"

static void build_shortopts(cli_opts *p) {
  size_t n = 0;
  p->shortopts[n++] = '-';
  p->shortopts[n++] = ':';
  for (const struct option *o = p->longopts; o->name && n + 3 < sizeof p->shortopts; o++) {
    if (o->flag || o->val <= 0 || o->val > 127 || !isalnum(o->val)) continue;
    p->shortopts[n++] = (char)o->val;
    if (o->has_arg == required_argument) p->shortopts[n++] = ':';
  }
  p->shortopts[n] = '\0';
}

void cli_opts_init(cli_opts *p, const char *cmd, int argc, char **argv, const struct option *longopts,
                   bool subcommand) {
  memset(p, 0, sizeof *p);
  p->cmd = cmd;
  p->argc = argc;
  p->argv = argv;
  p->longopts = longopts;
  build_shortopts(p);
  opterr = 0;
  optind = 0; /* 0, not 1: glibc then also forgets the previous parse's state */
  for (int c; (c = getopt_long(argc, argv, p->shortopts, longopts, NULL)) != -1;) {
    if (c == CLI_OPT_HELP) p->help = true;
    if (c == CLI_OPT_POSITIONAL && subcommand) break;
  }
  optind = 0;
}

int cli_opts_fail(const cli_opts *p, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (p->cmd)
    fprintf(stderr, "gpurt %s: %s (see gpurt help %s)\n", p->cmd, msg, p->cmd);
  else
    fprintf(stderr, "gpurt: %s (see gpurt help)\n", msg);
  return 2;
}

int cli_opts_unexpected(const cli_opts *p) { return cli_opts_fail(p, "unexpected argument '%s'", p->arg); }

int cli_opts_expect_end(cli_opts *p) {
  int c = cli_opts_next(p);
  if (c == CLI_OPT_END) return 0;
  if (c == CLI_OPT_POSITIONAL) return cli_opts_unexpected(p);
  return 2; /* an error, already reported: a table without options has nothing else to return */
}

/* A long option getopt refused: text is the argument after its "--". */
static int report_long(const cli_opts *p, const char *text) {
  size_t len = strcspn(text, "=");
  bool has_value = text[len] == '=';
  const struct option *hit = NULL;
  int matches = 0;
  for (const struct option *o = p->longopts; o->name; o++) {
    if (strncmp(o->name, text, len)) continue;
    if (strlen(o->name) == len) { /* an exact name beats its abbreviations */
      hit = o;
      matches = 1;
      break;
    }
    if (!matches++) hit = o;
  }
  if (!matches || !len) return cli_opts_fail(p, "unknown option '--%.*s'", (int)len, text);
  if (matches > 1) {
    char list[512];
    size_t at = 0;
    for (const struct option *o = p->longopts; o->name && at < sizeof list; o++)
      if (!strncmp(o->name, text, len))
        at += (size_t)snprintf(list + at, sizeof list - at, "%s--%s", at ? ", " : "", o->name);
    return cli_opts_fail(p, "option '--%.*s' is ambiguous: %s", (int)len, text, list);
  }
  if (hit->has_arg == required_argument && !has_value)
    return cli_opts_fail(p, "option '--%s' requires a value", hit->name);
  if (hit->has_arg == no_argument && has_value) return cli_opts_fail(p, "option '--%s' takes no value", hit->name);
  return cli_opts_fail(p, "cannot read option '--%s'", text);
}

static void report(const cli_opts *p, int at, int code) {
  const char *a = at < p->argc ? p->argv[at] : "";
  if (a[0] == '-' && a[1] == '-' && a[2])
    report_long(p, a + 2);
  else if (code == ':')
    cli_opts_fail(p, "option '-%c' requires a value", optopt);
  else if (optopt > ' ' && optopt < 127)
    cli_opts_fail(p, "unknown option '-%c'", optopt);
  else
    cli_opts_fail(p, "unknown option '%s'", a);
}

static const char *long_name(const cli_opts *p, int val) {
  for (const struct option *o = p->longopts; o->name; o++)
    if (o->val == val) return o->name;
  return "?";
}

int cli_opts_next(cli_opts *p) {
  p->name = NULL;
  p->arg = NULL;
  if (!p->options_done) {
    int at = optind ? optind : 1;
    int c = getopt_long(p->argc, p->argv, p->shortopts, p->longopts, NULL);
    if (c == '?' || c == ':') {
      report(p, at, c);
      return CLI_OPT_ERROR;
    }
    if (c == CLI_OPT_MAX_INPUT) { /* every command that reads a trace takes it; it is the input's, not the command's */
      p->name = "max-input-size";
      p->arg = optarg;
      uint64_t v;
      if (!cli_opt_bytes(p, &v)) return CLI_OPT_ERROR;
      cli_input_set_max(v);
      return cli_opts_next(p);
    }
    if (c != -1) {
      if (c != CLI_OPT_POSITIONAL) p->name = long_name(p, c);
      p->arg = optarg;
      return c;
    }
    p->options_done = true; /* the end, or "--": what is left is positional */
    p->next_positional = optind ? optind : 1;
  }
  if (p->next_positional >= p->argc) return CLI_OPT_END;
  p->arg = p->argv[p->next_positional++];
  return CLI_OPT_POSITIONAL;
}

int cli_opts_index(const cli_opts *p) { return p->options_done ? p->next_positional : optind ? optind : 1; }

static bool bad_value(const cli_opts *p, const char *wanted) {
  cli_opts_fail(p, "option '--%s' wants %s, got '%s'", p->name, wanted, p->arg ? p->arg : "");
  return false;
}

/* A decimal number's start: strtod and strtoull would also take spaces, signs,
 * "inf", "nan" and hexadecimal ("0x10"), which the options do not. */
static bool starts_numeric(const char *s) {
  if (!s || (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))) return false;
  return isdigit((unsigned char)s[0]) || (s[0] == '.' && isdigit((unsigned char)s[1]));
}

bool cli_opt_u64(const cli_opts *p, uint64_t min, uint64_t max, uint64_t *out) {
  const char *s = p->arg;
  char *end = NULL;
  errno = 0;
  unsigned long long v = starts_numeric(s) ? strtoull(s, &end, 10) : 0;
  if (!end || *end || errno || v < min || v > max) {
    char wanted[96];
    if (max == UINT64_MAX)
      snprintf(wanted, sizeof wanted, "an integer >= %llu", (unsigned long long)min);
    else
      snprintf(wanted, sizeof wanted, "an integer from %llu to %llu", (unsigned long long)min, (unsigned long long)max);
    return bad_value(p, wanted);
  }
  *out = v;
  return true;
}

bool cli_opt_real(const cli_opts *p, double min, double max, double *out) {
  const char *s = p->arg;
  char *end = NULL;
  double v = starts_numeric(s) ? strtod(s, &end) : 0;
  if (!end || *end || !isfinite(v) || v < min || v > max) {
    char wanted[96];
    snprintf(wanted, sizeof wanted, "a number from %g to %g", min, max);
    return bad_value(p, wanted);
  }
  *out = v;
  return true;
}

bool cli_opt_device(const cli_opts *p, int *out) {
  uint64_t v;
  if (!cli_opt_u64(p, 0, CLI_MAX_DEVICE, &v)) return false;
  *out = (int)v;
  return true;
}

/* The multiplier a size's suffix stands for; 0 when it is no suffix. */
static double size_suffix(const char *s) {
  if (!*s) return 1;
  double mult;
  switch (*s | 0x20) {
  case 'k': mult = 1024.0; break;
  case 'm': mult = 1024.0 * 1024; break;
  case 'g': mult = 1024.0 * 1024 * 1024; break;
  case 't': mult = 1024.0 * 1024 * 1024 * 1024; break;
  case 'b': mult = 1; break;
  default: return 0;
  }
  s++;
  return !*s || !strcasecmp(s, "ib") || !strcasecmp(s, "b") ? mult : 0;
}

bool cli_opt_fraction(const cli_opts *p, double *out) {
  double v;
  if (!cli_opt_real(p, 0.0, 1.0, &v)) return false;
  if (v == 0.0) return bad_value(p, "a share of the device above 0, up to 1");
  *out = v;
  return true;
}

bool cli_opt_bytes(const cli_opts *p, uint64_t *out) {
  const char *s = p->arg;
  char *end = NULL;
  double v = starts_numeric(s) ? strtod(s, &end) : 0;
  double mult = end ? size_suffix(end) : 0;
  double bytes = v * mult;
  /* 0x1p64 is 2^64: the first size a uint64_t cannot hold; NaN fails too */
  if (!mult || !(bytes >= 1 && bytes < 0x1p64)) return bad_value(p, "a size such as 16G, 512M or 1048576");
  *out = (uint64_t)bytes;
  return true;
}

bool cli_opt_choice(const cli_opts *p, const char *const *words, size_t n, size_t *index) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(p->arg, words[i])) {
      *index = i;
      return true;
    }
  char wanted[256] = "one of";
  size_t at = strlen(wanted);
  for (size_t i = 0; i < n && at < sizeof wanted; i++)
    at += (size_t)snprintf(wanted + at, sizeof wanted - at, "%s %s", i ? "," : "", words[i]);
  return bad_value(p, wanted);
}

bool cli_opt_device_model(const cli_opts *p, grt_device_model *out) {
  static const char *const names[] = {"contiguous", "paged"};
  size_t i = 0;
  if (!cli_opt_choice(p, names, 2, &i)) return false;
  return grt_device_model_parse(names[i], out) == GRT_OK; /* both names parse */
}

int cli_opts_check_capacity(const cli_opts *p, uint64_t capacity, grt_device_model model) {
  if (!capacity || capacity >= GRT_SMALL_BUFFER || model != GRT_DEVICE_MODEL_PAGED) return CLI_ARGS_OK;
  return cli_opts_fail(p, "--capacity below 2 MiB: a paged device holds whole 2 MiB pages "
                          "(or choose --device-model contiguous)");
}

bool cli_opt_list(const cli_opts *p, const char **out, size_t max, size_t *n) {
  size_t have = *n;
  char *text = (char *)p->arg, *save = NULL;
  char *tok = strtok_r(text, ",", &save);
  if (!tok) return bad_value(p, "a comma-separated list");
  for (; tok; tok = strtok_r(NULL, ",", &save)) {
    if (have == max) {
      cli_opts_fail(p, "option '--%s' takes at most %zu items in all", p->name, max);
      return false;
    }
    out[have++] = tok;
  }
  *n = have;
  return true;
}

bool cli_opt_policies(const cli_opts *p, const char **out, size_t max, size_t *n) {
  size_t first = *n;
  const char *const *names = NULL;
  size_t count = 0;
  if (!cli_opt_list(p, out, max, n)) return false;
  if (grt_alloc_policies(&names, &count)) {
    cli_opts_fail(p, "option '--%s': the library lists no policies", p->name);
    return false;
  }
  for (size_t i = first; i < *n; i++) {
    size_t k = 0;
    while (k < count && strcmp(out[i], names[k])) k++;
    if (k < count) continue;
    char known[256] = "";
    for (size_t j = 0; j < count; j++)
      snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "", names[j]);
    cli_opts_fail(p, "option '--%s' wants policies from %s, got '%s'", p->name, known, out[i]);
    return false;
  }
  return true;
}
