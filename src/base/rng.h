/* rng.h — small deterministic PRNG (splitmix64 seeding + xoshiro256**), internal.
 * Tests, demos and benchmarks use it so every run with the same seed is identical. */
#ifndef GRT_BASE_RNG_H
#define GRT_BASE_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct grt__rng {
  uint64_t s[4];
} grt__rng;

static inline uint64_t grt__splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static inline void grt__rng_seed(grt__rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = grt__splitmix64(&seed);
}

static inline uint64_t grt__rng_next(grt__rng *r) {
  uint64_t *s = r->s;
  uint64_t x = s[1] * 5;
  uint64_t result = ((x << 7) | (x >> 57)) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = (s[3] << 45) | (s[3] >> 19);
  return result;
}

/* Uniform in [0, n) (n > 0); Lemire's multiply-shift, bias negligible for our n. */
__extension__ typedef unsigned __int128 grt__u128;
static inline uint64_t grt__rng_below(grt__rng *r, uint64_t n) {
  return (uint64_t)(((grt__u128)grt__rng_next(r) * n) >> 64);
}

/* Uniform double in [0, 1). */
static inline double grt__rng_unit(grt__rng *r) {
  return (double)(grt__rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Log-uniform integer in [lo, hi]. */
static inline uint64_t grt__rng_log_uniform(grt__rng *r, uint64_t lo, uint64_t hi) {
  double l = log((double)lo), h = log((double)hi + 1.0);
  uint64_t v = (uint64_t)exp(l + (h - l) * grt__rng_unit(r));
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  return v;
}

#endif
