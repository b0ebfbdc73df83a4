/* cli_opts.h — how every gpurt command reads its arguments: getopt_long over
 * the command's option table (long names, unique abbreviations, --opt=value
 * and --opt value), with one wording for every mistake, and one strict
 * parser per kind of value (integers, real numbers, byte sizes, choices,
 * comma lists).
 *
 * Every message goes to stderr as "gpurt CMD: ... (see gpurt help CMD)";
 * a caller that gets CLI_OPT_ERROR or a false from a value parser only has
 * to return 2. Options and positional arguments may come in any order;
 * "--" ends the options. */
#ifndef GRT_TOOLS_CLI_OPTS_H
#define GRT_TOOLS_CLI_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpurt/device.h"

enum {
  CLI_OPT_END = -1,       /* no arguments left */
  CLI_OPT_ERROR = -2,     /* a mistake, already reported */
  CLI_OPT_POSITIONAL = 1, /* a non-option argument, in p->arg */
  CLI_OPT_HELP = 'h',     /* the val of every table's -h/--help entry */
};

/* What a command's argument parser returns when the command should run;
 * anything else is the exit status (0 after printing help). */
#define CLI_ARGS_OK (-1)

/* The -h/--help entry every option table carries. */
#define CLI_OPT_HELP_ENTRY {"help", no_argument, NULL, CLI_OPT_HELP}

typedef struct cli_opts {
  const char *cmd;               /* "replay", "demo frag"; NULL for gpurt itself */
  int argc;
  char **argv;                   /* argv[0] is the command's name */
  const struct option *longopts; /* ends with a zeroed entry; each val is distinct */
  char shortopts[32];            /* built from longopts: the one-letter vals */
  bool help;                     /* -h/--help among the options (see cli_opts_init) */
  bool options_done;             /* getopt is finished: the rest are positional */
  int next_positional;           /* after options_done: argv index of the next one */
  const char *name;              /* the option just returned: its long name */
  const char *arg;               /* its value, or the positional argument */
} cli_opts;

/* Prepares a parse of argv[1..argc-1] against longopts and sets p->help when
 * -h/--help appears among the options, whatever else is wrong, so help always
 * wins. subcommand: the first positional argument names a subcommand whose
 * own options follow it, so the scan for help stops there. */
void cli_opts_init(cli_opts *p, const char *cmd, int argc, char **argv, const struct option *longopts,
                   bool subcommand);

/* The next argument: an option's val (p->name, p->arg set), CLI_OPT_POSITIONAL
 * (p->arg), CLI_OPT_END, or CLI_OPT_ERROR after reporting an unknown or
 * ambiguous option, a missing value or a value given to a flag. */
int cli_opts_next(cli_opts *p);

/* argv index of the argument after the one last returned. */
int cli_opts_index(const cli_opts *p);

/* Prints "gpurt CMD: MESSAGE (see gpurt help CMD)" on stderr; returns 2. */
int cli_opts_fail(const cli_opts *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* "unexpected argument 'X'" for a positional argument nobody wants; returns 2. */
int cli_opts_unexpected(const cli_opts *p);

/* For a command without options: 0 when no argument is left, else 2 after
 * reporting the first one. */
int cli_opts_expect_end(cli_opts *p);

/* Value parsers for the option just returned (p->arg). Each refuses an empty
 * value, signs, spaces and trailing junk, reports the option and the value,
 * and returns false; *out is written only on success. */

/* Decimal digits only, within [min, max]. */
bool cli_opt_u64(const cli_opts *p, uint64_t min, uint64_t max, uint64_t *out);
/* A finite decimal number (digits first: "2", "0.5", "1e3"), within [min, max]. */
bool cli_opt_real(const cli_opts *p, double min, double max, double *out);
/* A share of the device in (0, 1] (--memory-fraction). */
bool cli_opt_fraction(const cli_opts *p, double *out);

/* A byte size above zero: "1048576", "512M", "80G", "1.5GiB", "64k", "2TB";
 * the suffixes k, m, g, t, b in either case, optionally followed by "ib"
 * or "b"; fractions of a byte are dropped. Refuses sizes of 2^64 or more. */
bool cli_opt_bytes(const cli_opts *p, uint64_t *out);
/* A device index (PyTorch snapshots record one trace per device). */
#define CLI_MAX_DEVICE 1024
bool cli_opt_device(const cli_opts *p, int *out);
/* One of n exact words; *index is its position. */
bool cli_opt_choice(const cli_opts *p, const char *const *words, size_t n, size_t *index);
/* --device-model contiguous|paged. */
bool cli_opt_device_model(const cli_opts *p, grt_device_model *out);
/* A --capacity the device model can hold (a paged device holds whole 2 MiB
 * pages; 0 = automatic): CLI_ARGS_OK, or the exit status after the message. */
int cli_opts_check_capacity(const cli_opts *p, uint64_t capacity, grt_device_model model);
/* A comma-separated list appended to out[*n..max-1] (the value is split in
 * place); refuses a list with no item and one that does not fit. */
bool cli_opt_list(const cli_opts *p, const char **out, size_t max, size_t *n);
/* cli_opt_list of allocator policies: every item must be a name grt_alloc_policies() lists. */
bool cli_opt_policies(const cli_opts *p, const char **out, size_t max, size_t *n);

#endif
