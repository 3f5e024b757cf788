/* src/core/rng.c: Philox4x32-10 and the generators.
 *
 * Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC'11;
 * the same function as Random123 and cuRAND's Philox): key (k0, k1) = (seed low 32 bits, seed high
 * 32 bits), counter words (ctr_lo low, ctr_lo high, ctr_hi low, ctr_hi high), multipliers
 * 0xD2511F53 and 0xCD9E8D57, Weyl increments 0x9E3779B9 and 0xBB67AE85, 10 rounds.
 *
 * The distributions, identical on every backend (element i of a draw at generator offset o uses
 * block counter (o + i / 4, 0) and word w = i % 4 of its output):
 *   uniform [lo, hi):  u = (word >> 8) * 2^-24;  lo + (hi - lo) u
 *   normal:            pair p = w / 2: u1 = (word[2p] + 1) * 2^-32, u2 = word[2p+1] * 2^-32,
 *                      r = sqrt(-2 ln u1); z = r cos(2 pi u2) for even w, r sin(2 pi u2) for odd w
 *   randint [lo, hi):  lo + word mod (hi - lo)   (a bias below 2^-32 (hi - lo), documented)
 * A draw of n elements advances the offset by ceil(n / 4) blocks. */
#include "core/internal.h"

static inline void philox_round(uint32_t c[4], uint32_t k0, uint32_t k1) {
  uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
  uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
  uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
  uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
  uint32_t n0 = hi1 ^ c[1] ^ k0, n1 = lo1, n2 = hi0 ^ c[3] ^ k1, n3 = lo0;
  c[0] = n0, c[1] = n1, c[2] = n2, c[3] = n3;
}

void ct__philox(uint64_t seed, uint64_t ctr_lo, uint64_t ctr_hi, uint32_t out[4]) {
  uint32_t c[4] = {(uint32_t)ctr_lo, (uint32_t)(ctr_lo >> 32), (uint32_t)ctr_hi, (uint32_t)(ctr_hi >> 32)};
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    philox_round(c, k0, k1);
    if (r < 9) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  out[0] = c[0], out[1] = c[1], out[2] = c[2], out[3] = c[3];
}

static ct_generator default_gen;

ct_generator ct_generator_new(uint64_t seed) { return (ct_generator){seed, 0}; }
void ct_manual_seed(uint64_t seed) { default_gen = ct_generator_new(seed); }
ct_generator *ct_default_generator(void) { return &default_gen; }
