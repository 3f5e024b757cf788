/* src/backend/opencl/program.c: the device program: its source, its build, and the on-disk cache
 * of program binaries. Layer 2 of the folder (opencl_backend.h): it builds into the context it is
 * given (context.c) and calls device.c only.
 *
 * The source is a prelude made here (REAL, the dtype tags, CT_MAX_DIMS, CT_OCL_GROUP_MAX, and the op enums and the
 * ops.def formulas) followed by every .cl file of kernels/ in name order, embedded at build time
 * (src/backend/opencl/embed.cmake). It is built once per device context, on the first launch.
 *
 * PoCL compiles slowly, so the binary is cached on disk: in $CUTTLE_OPENCL_CACHE, else
 * $XDG_CACHE_HOME/cuttle/opencl, else ~/.cache/cuttle/opencl, in a file named by a 64-bit FNV-1a
 * hash of the device name, driver version, build options and source. A cached binary that fails to
 * load or build is ignored (and replaced); a cache directory that cannot be written only costs the
 * next run a compile. Files are written to a temporary name and renamed, so two processes never
 * read half a binary. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "backend/opencl/opencl_backend.h"
#include "opencl_kernels.h" /* generated: ct__ocl_sources */

static uint64_t fnv1a(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

/* ---- the ops.def formulas as OpenCL C. They are not written here either: ops.def's X-macros
 * stringify each expression into a case of unary_fwd / unary_deriv / binary_fwd / binary_deriv,
 * computed in REAL (double where the device has cl_khr_fp64), so the device evaluates the very
 * expressions the CPU does. */
typedef struct {
  int op;
  const char *ename; /* the enum's name without its prefix: ADD */
  const char *fwd, *d1, *d2;
  int compare;
} formula;

static const formula unary_formulas[] = {
#define CT_UNARY(E, name, fwd, deriv) {CT_UNARY_##E, #E, #fwd, #deriv, NULL, 0},
#include "core/ops.def"
};

static const formula binary_formulas[] = {
#define CT_BINARY(E, name, fwd, da, db) {CT_BINARY_##E, #E, #fwd, #da, #db, 0},
#define CT_COMPARE(E, name, pred) {CT_BINARY_##E, #E, #pred, NULL, NULL, 1},
#include "core/ops.def"
};

#define NU (sizeof unary_formulas / sizeof unary_formulas[0])
#define NB (sizeof binary_formulas / sizeof binary_formulas[0])

static size_t ops_source(char *buf, size_t n) {
  size_t k = 0;
#define OUT(...) k += (size_t)snprintf(buf + k, k < n ? n - k : 0, __VA_ARGS__)
  /* the op enums by name, for the integer path of a_common.cl */
  for (size_t i = 0; i < NU; i++) OUT("#define CT_UNARY_%s %d\n", unary_formulas[i].ename, unary_formulas[i].op);
  for (size_t i = 0; i < NB; i++) OUT("#define CT_BINARY_%s %d\n", binary_formulas[i].ename, binary_formulas[i].op);
  OUT("REAL unary_fwd(int op, REAL x) {\n  switch (op) {\n");
  for (size_t i = 0; i < NU; i++) OUT("    case %d: return (REAL)(%s);\n", unary_formulas[i].op, unary_formulas[i].fwd);
  OUT("  }\n  return 0;\n}\nREAL unary_deriv(int op, REAL x, REAL y) {\n  switch (op) {\n");
  for (size_t i = 0; i < NU; i++) OUT("    case %d: return (REAL)(%s);\n", unary_formulas[i].op, unary_formulas[i].d1);
  OUT("  }\n  return 0;\n}\nREAL binary_fwd(int op, REAL a, REAL b) {\n  switch (op) {\n");
  for (size_t i = 0; i < NB; i++)
    if (binary_formulas[i].compare) OUT("    case %d: return (%s) ? (REAL)1 : (REAL)0;\n", binary_formulas[i].op, binary_formulas[i].fwd);
    else OUT("    case %d: return (REAL)(%s);\n", binary_formulas[i].op, binary_formulas[i].fwd);
  OUT("  }\n  return 0;\n}\nREAL binary_deriv(int op, int wrt, REAL a, REAL b, REAL y) {\n  switch (op) {\n");
  for (size_t i = 0; i < NB; i++)
    if (!binary_formulas[i].compare)
      OUT("    case %d: return wrt == 0 ? (REAL)(%s) : (REAL)(%s);\n", binary_formulas[i].op, binary_formulas[i].d1, binary_formulas[i].d2);
  OUT("  }\n  return 0;\n}\n");
#undef OUT
  return k < n ? k : n;
}

/* The whole program source (malloc'd), or NULL. */
static char *program_source(const ct__ocl_devinfo *d) {
  size_t cap = 1 << 16, len = 0;
  for (size_t i = 0; i < sizeof ct__ocl_sources / sizeof ct__ocl_sources[0]; i++) cap += strlen(ct__ocl_sources[i]) + 1;
  char *s = malloc(cap);
  if (!s) return NULL;
  if (d->fp64)
    len += (size_t)snprintf(s + len, cap - len, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#define CT_FP64 1\ntypedef double REAL;\n");
  else /* no float64 on the device: the formulas' double literals and casts compute in float */
    len += (size_t)snprintf(s + len, cap - len, "#define double float\ntypedef float REAL;\n#define M_SQRT1_2 M_SQRT1_2_F\n#define M_PI M_PI_F\n");
  len += (size_t)snprintf(s + len, cap - len,
                          "#define CT_MAX_DIMS %d\n#define CT_OCL_GROUP_MAX %d\n#define DT_F32 %d\n#define DT_F64 %d\n#define DT_F16 %d\n#define DT_BF16 %d\n"
                          "#define DT_I32 %d\n#define DT_I64 %d\n#define DT_U8 %d\n#define DT_BOOL %d\n",
                          CT_MAX_DIMS, CT_OCL_GROUP_MAX, CT_F32, CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64, CT_U8, CT_BOOL);
  len += ops_source(s + len, cap - len);
  for (size_t i = 0; i < sizeof ct__ocl_sources / sizeof ct__ocl_sources[0] && len < cap; i++)
    len += (size_t)snprintf(s + len, cap - len, "%s\n", ct__ocl_sources[i]);
  if (len >= cap) {
    free(s);
    return NULL;
  }
  return s;
}

static const char BUILD_OPTIONS[] = "-cl-std=CL1.2";

/* The cache file's path into buf; 0 when there is no place for a cache. */
static int cache_path(char *buf, size_t n, const ct__ocl_devinfo *d, const char *src) {
  char dir[768];
  const char *e = getenv("CUTTLE_OPENCL_CACHE"), *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (e && *e) snprintf(dir, sizeof dir, "%s", e);
  else if (x && *x) snprintf(dir, sizeof dir, "%s/cuttle/opencl", x);
  else if (home && *home) snprintf(dir, sizeof dir, "%s/.cache/cuttle/opencl", home);
  else return 0;
  /* make each level (mkdir -p); failures surface when the file is opened */
  for (char *p = dir + 1; *p; p++)
    if (*p == '/') *p = 0, mkdir(dir, 0755), *p = '/';
  mkdir(dir, 0755);
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv1a(h, d->name, strlen(d->name) + 1);
  h = fnv1a(h, d->driver, strlen(d->driver) + 1);
  h = fnv1a(h, BUILD_OPTIONS, sizeof BUILD_OPTIONS);
  h = fnv1a(h, src, strlen(src));
  snprintf(buf, n, "%s/%016llx.bin", dir, (unsigned long long)h);
  return 1;
}

static cl_program from_cache(ct__ocl_ctx *c, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *bin = NULL;
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 && (bin = malloc((size_t)n)) &&
      fread(bin, 1, (size_t)n, f) != (size_t)n)
    n = -1;
  fclose(f);
  cl_program p = NULL;
  if (bin && n > 0) {
    size_t len = (size_t)n;
    const unsigned char *bins[1] = {bin};
    cl_int st, e;
    p = clCreateProgramWithBinary(c->context, 1, &c->info->device, &len, bins, &st, &e);
    if (e == CL_SUCCESS && st == CL_SUCCESS) e = clBuildProgram(p, 1, &c->info->device, BUILD_OPTIONS, NULL, NULL);
    if (e != CL_SUCCESS || st != CL_SUCCESS) {
      if (p) clReleaseProgram(p);
      p = NULL;
    }
  }
  free(bin);
  return p;
}

static void to_cache(cl_program p, const char *path) {
  size_t n = 0;
  if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0) return;
  unsigned char *bin = malloc(n);
  if (!bin) return;
  unsigned char *bins[1] = {bin};
  if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (f) {
      int ok = fwrite(bin, 1, n, f) == n;
      ok = fclose(f) == 0 && ok;
      if (!ok || rename(tmp, path) != 0) remove(tmp);
    }
  }
  free(bin);
}

/* Build the program of c (c->lock held); CT_OK or CT_EBACKEND with the build log. */
static ct_status build(ct__ocl_ctx *c) {
  char *src = program_source(c->info);
  if (!src) return ct__error(CT_ENOMEM, "opencl:%d: out of host memory for the program source", c->index);
  char path[1024];
  int cached = cache_path(path, sizeof path, c->info, src);
  cl_program p = cached ? from_cache(c, path) : NULL;
  if (!p) {
    cl_int e;
    const char *srcs[1] = {src};
    p = clCreateProgramWithSource(c->context, 1, srcs, NULL, &e);
    if (e == CL_SUCCESS) e = clBuildProgram(p, 1, &c->info->device, BUILD_OPTIONS, NULL, NULL);
    if (e != CL_SUCCESS) {
      char log[2048] = "";
      if (p) clGetProgramBuildInfo(p, c->info->device, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
      log[sizeof log - 1] = 0;
      if (p) clReleaseProgram(p);
      free(src);
      return ct__error(CT_EBACKEND, "opencl:%d (%s): building cuttle's kernels failed: %s\n%s", c->index, c->info->name,
                       ct__ocl_errstr(e), log);
    }
    if (cached) to_cache(p, path);
  }
  free(src);
  c->program = p;
  return CT_OK;
}

ct__ocl_kernel_entry *ct__ocl_kernel(ct__ocl_ctx *c, const char *name) {
  for (int i = 0; i < c->nkernels; i++)
    if (strcmp(c->kernels[i].name, name) == 0) return &c->kernels[i];
  if (!c->program && build(c) != CT_OK) return NULL;
  if (c->nkernels == CT_OCL_MAX_KERNELS) CT_FAIL_NULL(CT_EBACKEND, "opencl: more than %d kernels (raise CT_OCL_MAX_KERNELS)", CT_OCL_MAX_KERNELS);
  cl_int e;
  cl_kernel k = clCreateKernel(c->program, name, &e);
  if (e != CL_SUCCESS) CT_FAIL_NULL(CT_EBACKEND, "opencl:%d: clCreateKernel(%s) failed: %s", c->index, name, ct__ocl_errstr(e));
  c->kernels[c->nkernels] = (ct__ocl_kernel_entry){.name = name, .k = k};
  return &c->kernels[c->nkernels++];
}
