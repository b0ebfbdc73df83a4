/* nomem_wrap.h — failing chosen host allocations (tests named *nomem*).
 *
 * Such tests link with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc
 * (tests/CMakeLists.txt): every malloc/calloc/realloc call of the test and of
 * the library lands here (cmocka's own, in its shared library, does not).
 * nomem_arm(n) makes the n-th allocation from now fail, once; nomem_all()
 * fails every one. Allocations made while nomem_shield > 0 are not counted
 * and never fail (a test raises it around code that is not under test).
 * Include this header in one file per test executable.
 */
#ifndef GRT_TESTS_NOMEM_WRAP_H
#define GRT_TESTS_NOMEM_WRAP_H

#include <stdbool.h>
#include <stddef.h>

static long nomem_fail_at; /* 0: nothing armed */
static long nomem_seen;    /* allocations counted since arming */
static bool nomem_fired;   /* the armed failure happened */
static bool nomem_every;   /* every allocation fails */
static int nomem_shield;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

static bool nomem_refuse(void) {
  if (nomem_shield) return false;
  if (nomem_every) return nomem_fired = true;
  if (!nomem_fail_at || ++nomem_seen != nomem_fail_at) return false;
  return nomem_fired = true;
}

void *__wrap_malloc(size_t n) { return nomem_refuse() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return nomem_refuse() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return nomem_refuse() ? NULL : __real_realloc(p, n); }

static inline void nomem_arm(long n) {
  nomem_fail_at = n;
  nomem_seen = 0;
  nomem_fired = false;
  nomem_every = false;
}

static inline void nomem_all(void) {
  nomem_arm(0);
  nomem_every = true;
}

/* Disarms; returns whether the armed failure happened. */
static inline bool nomem_disarm(void) {
  nomem_fail_at = 0;
  nomem_every = false;
  return nomem_fired;
}

#endif
