/* input.h — how the CLI reads a trace it is given: a file, `-` (standard
 * input) or a pipe, each possibly gzip- or zstd-compressed (told by the
 * magic, not the name). A native trace or RMM CSV among them (and such a
 * regular file over 32 MiB) is decoded as it is replayed (memory follows its
 * live allocations); any other format is read into memory up to
 * --max-input-size bytes (default 16 GiB) with a clear error past it. Other
 * regular uncompressed files go to the library's own loader untouched. */
#ifndef GRT_TOOLS_INPUT_H
#define GRT_TOOLS_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpurt/trace.h"

#define CLI_DEFAULT_MAX_INPUT ((uint64_t)16 << 30)

/* The --max-input-size option's entry and its value (0: the default). */
#define CLI_OPT_MAX_INPUT 0x4d49
#define CLI_OPT_MAX_INPUT_ENTRY {"max-input-size", required_argument, NULL, CLI_OPT_MAX_INPUT}
/* The usage line every command that reads a trace prints. */
#define CLI_INPUT_HELP                                                                                              \
  "  a trace may be - (standard input), a pipe, or gzip- or zstd-compressed (told by its first bytes);\n"         \
  "  --max-input-size SIZE caps what is held in memory (default 16G); a native or RMM trace streams instead\n"
void cli_input_set_max(uint64_t bytes);
uint64_t cli_input_max(void);

/* True when path must be read through cli_input_read: "-", not a regular
 * file, or a regular file starting with the gzip or zstd magic. */
bool cli_input_needs_reader(const char *path);
/* An input opened through its decoder: path, or standard input for "-". */
typedef struct cli_input cli_input;
/* NULL after writing the reason into why (cannot open, a corrupt start). */
cli_input *cli_input_open(const char *path, char *why, size_t why_size);
/* The decoded bytes, from the first: read them to the end (once). */
FILE *cli_input_stream(cli_input *in);
/* The decoded input is in a format read row by row (native, RMM CSV: told
 * by its first bytes, *format set): it can stream through a replay. */
bool cli_input_streams(const cli_input *in, grt_trace_format *format);
/* Why the stream stopped early (a read or decode error), or NULL. */
const char *cli_input_error(const cli_input *in);
void cli_input_close(cli_input *in);
/* Reads the rest of in into *data (malloc'd), *len bytes, up to
 * --max-input-size. 0, or -1 after writing the reason into why. */
int cli_input_slurp(cli_input *in, unsigned char **data, size_t *len, char *why, size_t why_size);
/* cli_input_open + cli_input_slurp + cli_input_close. */
int cli_input_read(const char *path, unsigned char **data, size_t *len, char *why, size_t why_size);

#endif
