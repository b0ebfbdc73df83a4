/* safetensors_builder.h — safetensors files for the io tests: a header
 * text and a byte buffer written to a temporary file, with the 8-byte
 * length (or a lying one) in front. */
#ifndef GRT_TESTS_SAFETENSORS_BUILDER_H
#define GRT_TESTS_SAFETENSORS_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes [len8][header][data] to a new temporary file; its path goes to path (>= 64 bytes). */
static inline void st_write_raw(char *path, uint64_t len8, const char *header, size_t header_len,
                                const unsigned char *data, size_t data_len) {
  snprintf(path, 64, "/tmp/grt_st_XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) abort();
  unsigned char l[8];
  for (int i = 0; i < 8; i++) l[i] = (unsigned char)(len8 >> (8 * i));
  if (write(fd, l, 8) != 8 || write(fd, header, header_len) != (ssize_t)header_len ||
      (data_len && write(fd, data, data_len) != (ssize_t)data_len))
    abort();
  close(fd);
}

static inline void st_write(char *path, const char *header, const unsigned char *data, size_t data_len) {
  st_write_raw(path, strlen(header), header, strlen(header), data, data_len);
}

/* n deterministic bytes (a counter through a multiplier: not a repeating pattern). */
static inline unsigned char *st_bytes(size_t n, uint32_t seed) {
  unsigned char *b = malloc(n ? n : 1);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) x = x * 1664525u + 1013904223u, b[i] = (unsigned char)(x >> 24);
  return b;
}

#endif
