/* src/data/shuffle.c: the loader's seeded permutation: splitmix64 feeding Fisher-Yates.
 *
 * splitmix64 is from Steele, Lea and Flood, "Fast splittable pseudorandom number generators"
 * (OOPSLA 2014), as written by Vigna (https://prng.di.unimi.it/splitmix64.c). Draws in [0, k) use
 * Lemire's multiply-shift with rejection ("Fast random integer generation in an interval", 2019),
 * so they carry no modulo bias. The permutation depends only on (n, seed).
 *
 * The augmentation's draws for one sample come from their own stream, started by
 * ct__sample_stream(seed, epoch, index): three chained splitmix64 steps, one per input, so a
 * sample's draws depend on nothing else (not on the worker, the batch or the rank). A constant
 * separates it from the shuffle's stream seed + epoch. */
#include "data/data_internal.h"

uint64_t ct__splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t ct__random_below(uint64_t *state, uint64_t k) {
  unsigned __int128 m = (unsigned __int128)ct__splitmix64(state) * k;
  uint64_t lo = (uint64_t)m;
  if (lo < k) {
    uint64_t threshold = -k % k;
    while (lo < threshold) {
      m = (unsigned __int128)ct__splitmix64(state) * k;
      lo = (uint64_t)m;
    }
  }
  return (uint64_t)(m >> 64);
}

void ct__permutation(int64_t *perm, int64_t n, uint64_t seed) {
  uint64_t state = seed;
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)ct__random_below(&state, (uint64_t)i + 1);
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

uint64_t ct__sample_stream(uint64_t seed, int64_t epoch, int64_t index) {
  uint64_t st = seed ^ 0x61756720756e6974ull; /* "aug unit": not the shuffle's stream */
  st = ct__splitmix64(&st) ^ (uint64_t)epoch;
  st = ct__splitmix64(&st) ^ (uint64_t)index;
  return ct__splitmix64(&st);
}
