/* src/backend/cpu/random.c: uniform, normal and integer draws from Philox4x32-10 (the exact
 * mapping is specified in src/core/rng.c, and the CUDA backend follows it bit for bit). */
#include <math.h>
#include "backend/cpu/cpu.h"

ct_status ct__cpu_random(ct_tensor *out, ct_dist dist, double p0, double p1, uint64_t seed, uint64_t offset) {
  int64_t n = ct_tensor_numel(out), blocks = (n + 3) / 4;
  char *base = ct__ptr(out);
  size_t es = ct_dtype_size(out->dtype);
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (int64_t b = 0; b < blocks; b++) {
    uint32_t w[4];
    ct__philox(seed, offset + (uint64_t)b, 0, w);
    for (int k = 0; k < 4 && b * 4 + k < n; k++) {
      double v;
      if (dist == CT_DIST_UNIFORM) v = p0 + (p1 - p0) * ((double)(w[k] >> 8) * (1.0 / 16777216.0));
      else if (dist == CT_DIST_NORMAL) {
        int pr = k / 2;
        double u1 = ((double)w[2 * pr] + 1.0) * (1.0 / 4294967296.0);
        double u2 = (double)w[2 * pr + 1] * (1.0 / 4294967296.0);
        double r = sqrt(-2.0 * log(u1));
        v = p0 + p1 * (k % 2 == 0 ? r * cos(2.0 * M_PI * u2) : r * sin(2.0 * M_PI * u2));
      } else {
        uint64_t range = (uint64_t)(p1 - p0);
        v = p0 + (double)((uint64_t)w[k] % range);
      }
      ct__store(base + (b * 4 + k) * (int64_t)es, out->dtype, v);
    }
  }
  return CT_OK;
}
