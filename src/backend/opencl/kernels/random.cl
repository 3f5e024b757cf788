/* src/backend/opencl/kernels/random.cl: Philox4x32-10 and the distributions of src/core/rng.c, bit
 * for bit: element i uses block counter (offset + i / 4, 0), word i % 4. One work-item per block
 * of four elements. dist: 0 uniform [p0, p1), 1 normal (p0 mean, p1 std), 2 randint [p0, p1). */
void philox(ulong seed, ulong ctr_lo, uint out[4]) {
  uint c0 = (uint)ctr_lo, c1 = (uint)(ctr_lo >> 32), c2 = 0, c3 = 0;
  uint k0 = (uint)seed, k1 = (uint)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    ulong p0 = (ulong)0xD2511F53u * c0, p1 = (ulong)0xCD9E8D57u * c2;
    uint n0 = (uint)(p1 >> 32) ^ c1 ^ k0, n1 = (uint)p1, n2 = (uint)(p0 >> 32) ^ c3 ^ k1, n3 = (uint)p0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    if (r < 9) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

__kernel void random_(__global uchar *out, long ooff, int odt, long n, int dist, REAL p0, REAL p1, ulong range, ulong seed,
                      ulong offset) {
  long b = get_global_id(0);
  uint w[4];
  philox(seed, offset + (ulong)b, w);
  for (int k = 0; k < 4 && b * 4 + k < n; k++) {
    REAL v;
    if (dist == 0) v = p0 + (p1 - p0) * ((REAL)(w[k] >> 8) * (REAL)(1.0 / 16777216.0));
    else if (dist == 1) {
      int pr = k / 2;
      REAL u1 = ((REAL)w[2 * pr] + (REAL)1) * (REAL)(1.0 / 4294967296.0);
      REAL u2 = (REAL)w[2 * pr + 1] * (REAL)(1.0 / 4294967296.0);
      REAL r = sqrt((REAL)-2 * log(u1));
      v = p0 + p1 * (k % 2 == 0 ? r * cos((REAL)(2.0 * M_PI) * u2) : r * sin((REAL)(2.0 * M_PI) * u2));
    } else {
      v = p0 + (REAL)((ulong)w[k] % range);
    }
    st(out, ooff + b * 4 + k, odt, v);
  }
}
