/* src/io/safetensors.c: the safetensors format (https://github.com/huggingface/safetensors): a
 * validating reader over a memory buffer, file reading, and an atomic writer. The checks mirror the
 * reference reader (safetensors/src/tensor.rs: read_metadata, Metadata::validate); see io.h.
 *
 * Layout of a file: u64 little-endian N | N bytes of JSON header | byte buffer.
 * JSON is parsed and printed by cJSON; everything about the format's rules is checked here.
 * Checksums (CT_SAFETENSORS_CHECKSUM_KEY, written by ct_checkpoint_save, verified by every parse)
 * are XXH3_64 from xxHash (Debian's libxxhash-dev), compiled in from its header (XXH_INLINE_ALL:
 * every function static here), so libcuttle loads no xxHash library at run time. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/internal.h"
#include "cuttle/io.h"
#include "io/safetensors_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "src/io/safetensors.c assumes a little-endian host (safetensors data is little-endian)"
#endif

/* ---- dtypes of the format */

typedef struct {
  const char *name;
  unsigned bits;  /* per element: 4 and 6 for the sub-byte float formats */
  ct_dtype dtype; /* CT_DTYPE_COUNT: no cuttle dtype */
} st_dtype;

/* Every dtype of the format as of safetensors 0.8, in the order of the reference's Dtype enum
 * (increasing alignment), which the writer's layout follows. */
#define NONE CT_DTYPE_COUNT
static const st_dtype st_dtypes[] = {
    {"BOOL", 8, CT_BOOL}, {"F4", 4, NONE},       {"F6_E2M3", 6, NONE}, {"F6_E3M2", 6, NONE}, {"U8", 8, CT_U8},
    {"I8", 8, NONE},      {"F8_E5M2", 8, NONE},  {"F8_E4M3", 8, NONE}, {"F8_E8M0", 8, NONE}, {"I16", 16, NONE},
    {"U16", 16, NONE},    {"F16", 16, CT_F16},   {"BF16", 16, CT_BF16}, {"I32", 32, CT_I32}, {"U32", 32, NONE},
    {"F32", 32, CT_F32},  {"F64", 64, CT_F64},   {"C64", 64, NONE},    {"I64", 64, CT_I64}, {"U64", 64, NONE},
};
#undef NONE
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

static const st_dtype *st_dtype_by_name(const char *s) {
  for (int i = 0; i < ST_NDTYPES; i++)
    if (strcmp(st_dtypes[i].name, s) == 0) return &st_dtypes[i];
  return NULL;
}

static const char *st_dtype_name_of(ct_dtype dt) {
  for (int i = 0; i < ST_NDTYPES; i++)
    if (st_dtypes[i].dtype == dt) return st_dtypes[i].name;
  return NULL;
}

/* ---- the parsed file */

typedef struct {
  char *name;
  const st_dtype *dt;
  int ndim;
  int64_t *shape;
  uint64_t begin, end;
} st_entry;

struct ct_safetensors {
  char *label;
  uint8_t *buf; /* the whole file (owned) */
  const uint8_t *data; /* the byte buffer: buf + 8 + N */
  size_t data_size;
  int n;
  st_entry *entries; /* sorted by name */
  int n_meta;
  char **meta_keys, **meta_values; /* file order */
};

void ct_safetensors_close(ct_safetensors *f) {
  if (!f) return;
  for (int i = 0; i < f->n; i++) {
    free(f->entries[i].name);
    free(f->entries[i].shape);
  }
  free(f->entries);
  for (int i = 0; i < f->n_meta; i++) {
    free(f->meta_keys[i]);
    free(f->meta_values[i]);
  }
  free(f->meta_keys);
  free(f->meta_values);
  free(f->buf);
  free(f->label);
  free(f);
}

/* Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF). Returns the
 * offset of the first bad byte, or n when all n bytes are valid. */
static size_t utf8_check(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
    else return i;
    if (n - i < len) return i;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return n;
}

/* A JSON number that is an exact non-negative integer (cJSON holds numbers as doubles, which are
 * exact up to 2^53). */
static int json_uint(const cJSON *item, uint64_t *out) {
  if (!cJSON_IsNumber(item)) return 0;
  double d = item->valuedouble;
  if (!(d >= 0) || d > 9007199254740992.0 || d != (double)(uint64_t)d) return 0;
  *out = (uint64_t)d;
  return 1;
}

/* "(2, 3)" for a shape of any length, cut short with "..." when buf is too small. */
static char *dims_str(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t used = 0;
  int w = snprintf(buf, n, "(");
  used = w > 0 ? (size_t)w : 0;
  for (int i = 0; i < ndim && used < n; i++) {
    w = snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
  if (used < n) snprintf(buf + used, n - used, ndim == 1 ? ",)" : ")");
  if (used >= n && n > 4) strcpy(buf + n - 4, "...");
  return buf;
}

static int cmp_entry_name(const void *a, const void *b) {
  return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}
static int cmp_entry_offsets(const void *a, const void *b) {
  const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

/* Is key seen before item among the children of its parent? (cJSON keeps repeated keys.) */
static int key_repeated(const cJSON *parent, const cJSON *item) {
  for (const cJSON *c = parent->child; c && c != item; c = c->next)
    if (c->string && item->string && strcmp(c->string, item->string) == 0) return 1;
  return 0;
}

/* cJSON allocates through cuttle's wrapper, so that its allocations are counted and can fail in
 * the fault-injection tests like every other; json_oom tells a parse that failed for want of
 * memory from one that met bad JSON. */
static _Thread_local int json_oom;
static void *json_malloc(size_t n) {
  void *p = ct__malloc(n, "the JSON of a safetensors header");
  if (!p) json_oom = 1;
  return p;
}
static pthread_once_t json_hooks_once = PTHREAD_ONCE_INIT;
static void json_hooks_init(void) { cJSON_InitHooks(&(cJSON_Hooks){.malloc_fn = json_malloc, .free_fn = free}); }
static void json_hooks(void) { pthread_once(&json_hooks_once, json_hooks_init); }

static ct_status parse_metadata(ct_safetensors *f, const cJSON *meta) {
  const char *L = f->label;
  if (!cJSON_IsObject(meta)) return ct__error(CT_EFORMAT, "%s: \"__metadata__\" must be an object of strings", L);
  int n = cJSON_GetArraySize(meta);
  f->meta_keys = ct__calloc((size_t)n + 1, sizeof(char *), "the metadata's keys");
  f->meta_values = f->meta_keys ? ct__calloc((size_t)n + 1, sizeof(char *), "the metadata's values") : NULL;
  if (!f->meta_values) return CT_ENOMEM;
  for (const cJSON *c = meta->child; c; c = c->next) {
    if (!cJSON_IsString(c))
      return ct__error(CT_EFORMAT, "%s: \"__metadata__\" value of \"%s\" is not a string", L, c->string);
    if (key_repeated(meta, c)) return ct__error(CT_EFORMAT, "%s: duplicate key \"%s\" in \"__metadata__\"", L, c->string);
    char *k = ct__strdup(c->string, "a metadata key"), *v = k ? ct__strdup(c->valuestring, "a metadata value") : NULL;
    if (!v) {
      free(k);
      return CT_ENOMEM;
    }
    f->meta_keys[f->n_meta] = k;
    f->meta_values[f->n_meta] = v;
    f->n_meta++;
  }
  return CT_OK;
}

static ct_status parse_entry(ct_safetensors *f, const cJSON *item, st_entry *e) {
  const char *L = f->label, *name = item->string;
  if (!cJSON_IsObject(item)) return ct__error(CT_EFORMAT, "%s: tensor \"%s\": entry is not an object", L, name);
  const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
  for (const cJSON *c = item->child; c; c = c->next) {
    const cJSON **slot = strcmp(c->string, "dtype") == 0          ? &dtype
                         : strcmp(c->string, "shape") == 0        ? &shape
                         : strcmp(c->string, "data_offsets") == 0 ? &offs
                                                                  : NULL;
    if (!slot) continue; /* unknown fields are ignored, as serde does for the reference's TensorInfo */
    if (*slot) return ct__error(CT_EFORMAT, "%s: tensor \"%s\": duplicate field \"%s\"", L, name, c->string);
    *slot = c;
  }
  if (!dtype || !shape || !offs)
    return ct__error(CT_EFORMAT, "%s: tensor \"%s\": missing field \"%s\"", L, name,
                     !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
  if (!cJSON_IsString(dtype)) return ct__error(CT_EFORMAT, "%s: tensor \"%s\": dtype is not a string", L, name);
  e->dt = st_dtype_by_name(dtype->valuestring);
  if (!e->dt)
    return ct__error(CT_EFORMAT,
                     "%s: tensor \"%s\": unknown dtype \"%.32s\" (known: BOOL F4 F6_E2M3 F6_E3M2 U8 I8 F8_E5M2 "
                     "F8_E4M3 F8_E8M0 I16 U16 F16 BF16 I32 U32 F32 F64 C64 I64 U64)",
                     L, name, dtype->valuestring);
  if (!cJSON_IsArray(shape)) return ct__error(CT_EFORMAT, "%s: tensor \"%s\": shape is not an array", L, name);
  int nd = cJSON_GetArraySize(shape);
  e->shape = ct__malloc(((size_t)nd + 1) * sizeof(int64_t), "a tensor's shape");
  if (!e->shape) return CT_ENOMEM;
  e->ndim = 0;
  for (const cJSON *c = shape->child; c; c = c->next) {
    uint64_t v;
    if (!json_uint(c, &v))
      return ct__error(CT_EFORMAT, "%s: tensor \"%s\": shape entry %d is not a non-negative integer (at most 2^53)", L,
                       name, e->ndim);
    e->shape[e->ndim++] = (int64_t)v;
  }
  if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &e->begin) ||
      !json_uint(offs->child->next, &e->end))
    return ct__error(CT_EFORMAT, "%s: tensor \"%s\": data_offsets must be two non-negative integers [begin, end]", L,
                     name);
  if (e->end < e->begin)
    return ct__error(CT_EFORMAT, "%s: tensor \"%s\": data_offsets [%llu, %llu] end before begin", L, name,
                     (unsigned long long)e->begin, (unsigned long long)e->end);
  uint64_t bits = e->dt->bits;
  for (int i = 0; i < e->ndim; i++)
    if (__builtin_mul_overflow(bits, (uint64_t)e->shape[i], &bits))
      return ct__error(CT_EFORMAT, "%s: tensor \"%s\": the byte size of shape %s overflows 64 bits", L, name,
                       dims_str(e->ndim, e->shape, (char[128]){0}, 128));
  if (bits % 8)
    return ct__error(CT_EFORMAT, "%s: tensor \"%s\": shape %s of %s is not a whole number of bytes", L, name,
                     dims_str(e->ndim, e->shape, (char[128]){0}, 128), e->dt->name);
  uint64_t bytes = bits / 8;
  if (bytes != e->end - e->begin)
    return ct__error(CT_EFORMAT, "%s: tensor \"%s\": shape %s of %s needs %llu bytes but data_offsets [%llu, %llu] span %llu",
                     L, name, dims_str(e->ndim, e->shape, (char[128]){0}, 128), e->dt->name, (unsigned long long)bytes,
                     (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)(e->end - e->begin));
  return CT_OK;
}

/* The checks on the raw bytes of f->buf (size bytes) before any JSON: the 8-byte header length,
 * into *hlen, within the limit and the file, and a header of UTF-8 without NUL that opens an object. */
static ct_status check_header_bytes(const ct_safetensors *f, size_t size, uint64_t *hlen) {
  const char *L = f->label;
  const uint8_t *b = f->buf;
  if (size < 8) return ct__error(CT_EFORMAT, "%s: %zu bytes is too short for the 8-byte header length", L, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | b[i];
  if (n > CT_SAFETENSORS_MAX_HEADER)
    return ct__error(CT_EFORMAT, "%s: header length %llu exceeds the limit of %u bytes (the reference's MAX_HEADER_SIZE)",
                     L, (unsigned long long)n, CT_SAFETENSORS_MAX_HEADER);
  if (n < 2) return ct__error(CT_EFORMAT, "%s: header length %llu is too small for a JSON object", L, (unsigned long long)n);
  if (n > size - 8)
    return ct__error(CT_EFORMAT, "%s: header length %llu runs past the end of the file (%zu bytes follow the length)", L,
                     (unsigned long long)n, size - 8);
  const uint8_t *h = b + 8;
  const uint8_t *nul = memchr(h, 0, (size_t)n);
  if (nul) return ct__error(CT_EFORMAT, "%s: header contains a NUL byte at offset %zu", L, (size_t)(nul - h));
  size_t bad = utf8_check(h, (size_t)n);
  if (bad != n) return ct__error(CT_EFORMAT, "%s: header is not valid UTF-8 (byte %zu)", L, bad);
  if (h[0] != '{') return ct__error(CT_EFORMAT, "%s: header does not start with '{'", L);
  *hlen = n;
  return CT_OK;
}

/* The n bytes of header at h parsed as JSON into *root (for cJSON_Delete); CT_ENOMEM when cJSON ran
 * out of memory, CT_EFORMAT with where the JSON went wrong. */
static ct_status parse_json(const char *L, const uint8_t *h, uint64_t n, cJSON **root) {
  char *text = ct__malloc((size_t)n + 1, "the header's text");
  if (!text) return CT_ENOMEM;
  memcpy(text, h, (size_t)n);
  text[n] = 0;
  const char *end = NULL;
  json_hooks();
  json_oom = 0;
  *root = cJSON_ParseWithOpts(text, &end, 1);
  if (!*root && json_oom) {
    free(text);
    return CT_ENOMEM;
  }
  if (!*root) {
    size_t at = end && end >= text && end <= text + n ? (size_t)(end - text) : 0;
    ct__error(CT_EFORMAT, "%s: header is not valid JSON (at byte %zu of %llu: \"%.20s\")", L, at, (unsigned long long)n,
              text + at);
    free(text);
    return CT_EFORMAT;
  }
  free(text);
  return CT_OK;
}

/* The header's object root into f: its tensors into f->entries (file order), its "__metadata__"
 * into f->meta_keys and f->meta_values. */
static ct_status parse_root(ct_safetensors *f, const cJSON *root) {
  const char *L = f->label;
  if (!cJSON_IsObject(root)) return ct__error(CT_EFORMAT, "%s: header is not a JSON object", L);
  int count = cJSON_GetArraySize(root);
  f->entries = ct__calloc((size_t)count + 1, sizeof(st_entry), "the list of tensors");
  if (!f->entries) return CT_ENOMEM;
  int seen_meta = 0;
  for (const cJSON *c = root->child; c; c = c->next) {
    ct_status s;
    if (strcmp(c->string, "__metadata__") == 0) {
      if (seen_meta++) return ct__error(CT_EFORMAT, "%s: duplicate key \"__metadata__\"", L);
      if ((s = parse_metadata(f, c)) != CT_OK) return s;
      continue;
    }
    st_entry *e = &f->entries[f->n++];
    if (!(e->name = ct__strdup(c->string, "a tensor's name"))) return CT_ENOMEM;
    if ((s = parse_entry(f, c, e)) != CT_OK) return s;
  }
  return CT_OK;
}

/* Sort f's entries by name (for ct_safetensors_find); a name given twice is CT_EFORMAT. */
static ct_status sort_entries(ct_safetensors *f) {
  qsort(f->entries, (size_t)f->n, sizeof(st_entry), cmp_entry_name);
  for (int i = 1; i < f->n; i++)
    if (strcmp(f->entries[i - 1].name, f->entries[i].name) == 0)
      return ct__error(CT_EFORMAT, "%s: duplicate tensor name \"%s\"", f->label, f->entries[i].name);
  return CT_OK;
}

/* The tensors' data_offsets, in the order of their offsets, must tile the byte buffer from 0 with
 * no gap and no overlap; *end: where the last one ends. */
static ct_status check_tiling(const ct_safetensors *f, uint64_t *end) {
  const char *L = f->label;
  st_entry **order = ct__malloc(((size_t)f->n + 1) * sizeof *order, "the tensors in file order");
  if (!order) return CT_ENOMEM;
  for (int i = 0; i < f->n; i++) order[i] = &f->entries[i];
  qsort(order, (size_t)f->n, sizeof *order, cmp_entry_offsets);
  ct_status s = CT_OK;
  uint64_t at = 0;
  for (int i = 0; i < f->n && s == CT_OK; i++) {
    const st_entry *e = order[i];
    if (e->begin > at)
      s = ct__error(CT_EFORMAT, "%s: tensor \"%s\": gap in the byte buffer: data_offsets begin at %llu, the previous tensor ends at %llu",
                    L, e->name, (unsigned long long)e->begin, (unsigned long long)at);
    else if (e->begin < at)
      s = ct__error(CT_EFORMAT, "%s: tensor \"%s\": data_offsets [%llu, %llu] overlap the previous tensor, which ends at %llu", L,
                    e->name, (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)at);
    else
      at = e->end;
  }
  free(order);
  *end = at;
  return s;
}

/* The checksum value's form: "xxh3_64:" and 16 lowercase hex digits, XXH3_64bits (seed 0) of the
 * whole byte buffer. */
#define CK_PREFIX "xxh3_64:"
#define CK_PREFIX_LEN 8
#define CK_VALUE_LEN (CK_PREFIX_LEN + 16)

/* The 64-bit value of a well-formed checksum string s into *out; 0 when s is malformed. */
static int parse_checksum(const char *s, uint64_t *out) {
  if (strlen(s) != CK_VALUE_LEN || strncmp(s, CK_PREFIX, CK_PREFIX_LEN) != 0) return 0;
  uint64_t v = 0;
  for (const char *c = s + CK_PREFIX_LEN; *c; c++) {
    int d = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10 : -1;
    if (d < 0) return 0;
    v = v << 4 | (uint64_t)d;
  }
  *out = v;
  return 1;
}

/* When f's metadata holds CT_SAFETENSORS_CHECKSUM_KEY (cuttle's checkpoints do since it was added;
 * PyTorch's and older cuttle's files do not, and pass as before), the byte buffer must hash to it. */
static ct_status verify_checksum(const ct_safetensors *f) {
  const char *v = NULL;
  for (int i = 0; i < f->n_meta && !v; i++)
    if (strcmp(f->meta_keys[i], CT_SAFETENSORS_CHECKSUM_KEY) == 0) v = f->meta_values[i];
  if (!v) return CT_OK;
  uint64_t want = 0;
  if (!parse_checksum(v, &want))
    return ct__error(CT_EFORMAT,
                     "%s: metadata \"%s\" = \"%.40s\" is not a checksum of the form \"" CK_PREFIX
                     "\" and 16 lowercase hex digits: the header is damaged; use another checkpoint",
                     f->label, CT_SAFETENSORS_CHECKSUM_KEY, v);
  uint64_t got = XXH3_64bits(f->data, f->data_size);
  if (got != want)
    return ct__error(CT_EFORMAT,
                     "%s: the tensor bytes do not match the checksum recorded at save (xxh3_64 %016llx recorded, "
                     "%016llx computed): the file is damaged; use another checkpoint",
                     f->label, (unsigned long long)want, (unsigned long long)got);
  return CT_OK;
}

/* Parse the header of f->buf (total bytes size); fills everything else in f. */
static ct_status parse_buffer(ct_safetensors *f, size_t size) {
  uint64_t n = 0;
  ct_status s = check_header_bytes(f, size, &n);
  if (s != CT_OK) return s;
  cJSON *root = NULL;
  if ((s = parse_json(f->label, f->buf + 8, n, &root)) != CT_OK) return s;
  uint64_t at = 0;
  if ((s = parse_root(f, root)) == CT_OK && (s = sort_entries(f)) == CT_OK && (s = check_tiling(f, &at)) == CT_OK) {
    size_t data_size = size - 8 - (size_t)n;
    if (at != data_size)
      s = ct__error(CT_EFORMAT, "%s: the tensors' data ends at byte %llu of the buffer, but the buffer holds %zu bytes (%s)",
                    f->label, (unsigned long long)at, data_size, at > data_size ? "file truncated" : "trailing bytes");
    else {
      f->data = f->buf + 8 + n;
      f->data_size = data_size;
      s = verify_checksum(f);
    }
  }
  cJSON_Delete(root);
  return s;
}

/* Takes ownership of buf (malloc'd, size bytes) in every case. */
static ct_safetensors *parse_owned(uint8_t *buf, size_t size, const char *label) {
  ct_safetensors *f = ct__calloc(1, sizeof *f, "a safetensors handle");
  char *l = f ? ct__strdup(label ? label : "<memory>", "a safetensors label") : NULL;
  if (!l) {
    free(f), free(buf);
    return NULL;
  }
  f->label = l;
  f->buf = buf;
  if (parse_buffer(f, size) != CT_OK) {
    ct_safetensors_close(f);
    return NULL;
  }
  return f;
}

ct_safetensors *ct_safetensors_parse(const void *data, size_t size, const char *label) {
  if (!data && size > 0) CT_FAIL_NULL(CT_EINVAL, "ct_safetensors_parse: NULL data of %zu bytes", size);
  uint8_t *buf = ct__malloc(size, "a copy of safetensors data");
  if (!buf) return NULL;
  if (size) memcpy(buf, data, size);
  ct_safetensors *f = parse_owned(buf, size, label);
  if (!f) ct__error_prefix("ct_safetensors_parse");
  return f;
}

ct_safetensors *ct_safetensors_open(const char *path) {
  if (!path) CT_FAIL_NULL(CT_EINVAL, "ct_safetensors_open: NULL path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) CT_FAIL_NULL(CT_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int err = errno;
    close(fd);
    CT_FAIL_NULL(CT_EIO, "%s: not a regular file%s%s", path, err ? ": " : "", err ? strerror(err) : "");
  }
  size_t size = (size_t)st.st_size;
  uint8_t *buf = ct__malloc(size, "a safetensors file's contents");
  if (!buf) {
    close(fd);
    return NULL;
  }
  size_t got = 0;
  while (got < size) {
    ssize_t r = read(fd, buf + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = r < 0 ? errno : 0;
      close(fd);
      free(buf);
      CT_FAIL_NULL(CT_EIO, "%s: read failed after %zu of %zu bytes%s%s", path, got, size, err ? ": " : " (file shrank)",
                   err ? strerror(err) : "");
    }
    got += (size_t)r;
  }
  close(fd);
  return parse_owned(buf, size, path);
}

int ct_safetensors_count(const ct_safetensors *f) {
  if (!f) return ct__null_status("ct_safetensors_count", "f"), -1;
  return f->n;
}

ct_status ct_safetensors_info_at(const ct_safetensors *f, int i, ct_safetensors_info *out) {
  if (!f || !out) return ct__error(CT_EINVAL, "ct_safetensors_info_at: NULL argument");
  if (i < 0 || i >= f->n)
    return ct__error(CT_EINVAL, "ct_safetensors_info_at: index %d out of range for %s (%d tensors)", i, f->label, f->n);
  const st_entry *e = &f->entries[i];
  out->name = e->name;
  out->format_dtype = e->dt->name;
  out->dtype = e->dt->dtype;
  out->ndim = e->ndim;
  out->shape = e->shape;
  out->offset = (size_t)e->begin;
  out->nbytes = (size_t)(e->end - e->begin);
  return CT_OK;
}

int ct_safetensors_find(const ct_safetensors *f, const char *name) {
  if (!f || !name) return ct__null_status("ct_safetensors_find", !f ? "f" : "name"), -1;
  if (f->n == 0) return -1;
  st_entry key = {.name = (char *)name};
  const st_entry *e = bsearch(&key, f->entries, (size_t)f->n, sizeof(st_entry), cmp_entry_name);
  return e ? (int)(e - f->entries) : -1;
}

ct_tensor *ct_safetensors_get(const ct_safetensors *f, const char *name, ct_device dev) {
  if (!f || !name) CT_FAIL_NULL(CT_EINVAL, "ct_safetensors_get: NULL argument");
  if (!ct__check_device("ct_safetensors_get", dev)) return NULL;
  int i = ct_safetensors_find(f, name);
  if (i < 0) {
    char list[256] = "";
    size_t used = 0;
    for (int k = 0; k < f->n && k < 5 && used < sizeof list; k++) {
      int w = snprintf(list + used, sizeof list - used, "%s\"%s\"", k ? ", " : "", f->entries[k].name);
      if (w < 0) break;
      used += (size_t)w;
    }
    CT_FAIL_NULL(CT_EINVAL, "ct_safetensors_get: %s: no tensor \"%s\" in the file (it has %d: %s%s); pass one of its names",
                 f->label, name, f->n, list, f->n > 5 ? ", ..." : "");
  }
  const st_entry *e = &f->entries[i];
  if (e->dt->dtype == CT_DTYPE_COUNT)
    CT_FAIL_NULL(CT_EDTYPE, "ct_safetensors_get: %s: tensor \"%s\" has dtype %s, which cuttle has no tensor type for",
                 f->label, name,
                 e->dt->name);
  if (e->ndim > CT_MAX_DIMS)
    CT_FAIL_NULL(CT_EUNSUPPORTED, "ct_safetensors_get: %s: tensor \"%s\" has %d dims; cuttle tensors have at most %d",
                 f->label, name,
                 e->ndim, CT_MAX_DIMS);
  /* A zero-size tensor may have huge other dims; the core's numel and stride products must not
   * overflow, and every partial product is at most the product of the nonzero dims. */
  uint64_t prod = 1;
  for (int d = 0; d < e->ndim; d++)
    if (e->shape[d] && (__builtin_mul_overflow(prod, (uint64_t)e->shape[d], &prod) || prod > (uint64_t)INT64_MAX))
      CT_FAIL_NULL(CT_EUNSUPPORTED, "ct_safetensors_get: %s: tensor \"%s\": shape %s is too large for a tensor's strides",
                   f->label, name,
                   dims_str(e->ndim, e->shape, (char[128]){0}, 128));
  const uint8_t *p = f->data + e->begin;
  size_t nbytes = (size_t)(e->end - e->begin);
  uint8_t *tmp = NULL;
  if (e->dt->dtype == CT_BOOL && nbytes) { /* only 0 and 1 are valid bools in memory */
    if (!(tmp = ct__malloc(nbytes, "bool values read from safetensors"))) return NULL;
    for (size_t k = 0; k < nbytes; k++) tmp[k] = p[k] != 0;
    p = tmp;
  }
  ct_tensor *t = ct_from_host(nbytes ? (const void *)p : (const void *)f->buf, e->ndim, e->shape, e->dt->dtype, dev);
  free(tmp);
  if (!t) ct__error_prefix("ct_safetensors_get: %s: tensor \"%s\"", f->label, name);
  return t;
}

const char *ct_safetensors_metadata(const ct_safetensors *f, const char *key) {
  if (!f || !key) return ct__null_status("ct_safetensors_metadata", !f ? "f" : "key"), NULL;
  for (int i = 0; i < f->n_meta; i++)
    if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
  return NULL;
}

int ct_safetensors_metadata_count(const ct_safetensors *f) {
  if (!f) return ct__null_status("ct_safetensors_metadata_count", "f"), -1;
  return f->n_meta;
}

ct_status ct_safetensors_metadata_at(const ct_safetensors *f, int i, const char **key, const char **value) {
  if (!f) return ct__error(CT_EINVAL, "ct_safetensors_metadata_at: NULL file");
  if (i < 0 || i >= f->n_meta)
    return ct__error(CT_EINVAL, "ct_safetensors_metadata_at: index %d out of range for %s (%d entries)", i, f->label,
                     f->n_meta);
  if (key) *key = f->meta_keys[i];
  if (value) *value = f->meta_values[i];
  return CT_OK;
}

/* ---- writing */

typedef struct {
  const char *name;
  ct_tensor *t;
  int rank; /* index in st_dtypes, which lists the dtypes in the reference's Dtype enum order */
  uint64_t nbytes;
} w_item;

/* The reference writer's order (prepare() in safetensors/src/tensor.rs): descending Dtype enum order,
 * which is increasing alignment, then name by bytes. So every tensor is aligned to its dtype size. */
static int cmp_w_item(const void *a, const void *b) {
  const w_item *x = a, *y = b;
  if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int st_rank_of(ct_dtype dt) {
  for (int i = 0; i < ST_NDTYPES; i++)
    if (st_dtypes[i].dtype == dt) return i;
  return -1;
}
static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int utf8_ok(const char *s) { return utf8_check((const uint8_t *)s, strlen(s)) == strlen(s); }

/* Append v to arr as a raw number: exact, where cJSON would print a double. */
static int json_add_uint(cJSON *arr, uint64_t v) {
  char num[32];
  snprintf(num, sizeof num, "%llu", (unsigned long long)v);
  cJSON *item = cJSON_CreateRaw(num);
  if (!item) return 0;
  if (!cJSON_AddItemToArray(arr, item)) {
    cJSON_Delete(item);
    return 0;
  }
  return 1;
}

/* Build the padded header for the sorted items. Returns a malloc'd string of *len bytes (a multiple
 * of 8), or NULL on ENOMEM. */
static char *build_header(int n, const w_item *items, int n_meta, const ct_metadata_kv *meta, size_t *len) {
  json_hooks();
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  int ok = 1;
  if (n_meta > 0) {
    cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
    ok = m != NULL;
    for (int i = 0; ok && i < n_meta; i++) ok = cJSON_AddStringToObject(m, meta[i].key, meta[i].value) != NULL;
  }
  uint64_t at = 0;
  for (int i = 0; ok && i < n; i++) {
    cJSON *e = cJSON_AddObjectToObject(root, items[i].name);
    /* field order as the reference prints it: dtype, shape, data_offsets */
    ok = e && cJSON_AddStringToObject(e, "dtype", st_dtype_name_of(ct_tensor_dtype(items[i].t)));
    cJSON *shape = ok ? cJSON_AddArrayToObject(e, "shape") : NULL;
    ok = shape != NULL;
    int nd = ok ? ct_tensor_ndim(items[i].t) : 0;
    const int64_t *sh = ok ? ct_tensor_shape(items[i].t) : NULL;
    for (int d = 0; ok && d < nd; d++) ok = json_add_uint(shape, (uint64_t)sh[d]);
    cJSON *offs = ok ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
    ok = offs && json_add_uint(offs, at) && json_add_uint(offs, at + items[i].nbytes);
    at += items[i].nbytes;
  }
  char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!text) return NULL;
  size_t tl = strlen(text), padded = (tl + 7) / 8 * 8;
  char *out = ct__realloc(text, padded + 1, "the padded header");
  if (!out) {
    free(text);
    return NULL;
  }
  memset(out + tl, ' ', padded - tl);
  out[padded] = 0;
  *len = padded;
  return out;
}

static int write_all(int fd, const void *p, size_t n) {
  const uint8_t *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w, n -= (size_t)w;
  }
  return 0;
}

/* write_all at file offset off, leaving the file offset where it was. */
static int pwrite_all(int fd, const void *p, size_t n, off_t off) {
  const uint8_t *c = p;
  while (n > 0) {
    ssize_t w = pwrite(fd, c, n, off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w, n -= (size_t)w, off += w;
  }
  return 0;
}

/* The directory that holds path ("." for a bare name), malloc'd; NULL when out of memory. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
}

/* Remove "<name of path>.tmp.<pid>" files in dir whose process no longer exists. Only a save killed
 * in the moment between naming its finished file and renaming it over path (or, without O_TMPFILE,
 * killed while writing) leaves one, and it would otherwise stay forever. A pid that is alive (even
 * if reused by another program) keeps its file: removing a live save's file is the one thing this
 * must never do. Best effort: errors are ignored, since the save itself does not depend on it. */
static void remove_stale_temps(const char *dir, const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t bl = strlen(base);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *nm = e->d_name;
    if (strncmp(nm, base, bl) != 0 || strncmp(nm + bl, ".tmp.", 5) != 0) continue;
    const char *digits = nm + bl + 5;
    char *end = NULL;
    errno = 0;
    long pid = strtol(digits, &end, 10);
    if (errno || end == digits || *end || *digits == '-' || *digits == '+' || pid <= 0 || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) unlinkat(dirfd(d), nm, 0);
  }
  closedir(d);
}

#ifdef O_TMPFILE
/* Give the unnamed file open as fd the name tmp. Linking through /proc needs no privilege;
 * AT_EMPTY_PATH (tried second) needs CAP_DAC_READ_SEARCH. Returns 0, or -1 with errno set. */
static int link_anonymous(int fd, const char *tmp) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0) return 0;
  int saved = errno;
  if (linkat(fd, "", AT_FDCWD, tmp, AT_EMPTY_PATH) == 0) return 0;
  errno = saved;
  return -1;
}
#else
static int link_anonymous(int fd, const char *tmp) {
  (void)fd, (void)tmp;
  errno = ENOTSUP;
  return -1;
}
#endif

/* Test hook (tests/cli/test_signals.c only; not for production use): CUTTLE_TEST_SAVE_DELAY_MS=N
 * makes every save pause N milliseconds after writing the header, so that a test can deliver a
 * signal or SIGKILL while a file is half-written. Signals do not shorten the pause. */
static void test_delay(void) {
  const char *e = getenv("CUTTLE_TEST_SAVE_DELAY_MS");
  long ms = e ? strtol(e, NULL, 10) : 0;
  if (ms <= 0) return;
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* ct_safetensors_save's checks of its arguments before it allocates: the path, the counts and
 * arrays, and the metadata (set, UTF-8, no key twice). */
static ct_status check_save_args(const char *path, int n, const char *const *names, ct_tensor *const *tensors,
                                 int n_meta, const ct_metadata_kv *meta) {
  if (!path) return ct__error(CT_EINVAL, "ct_safetensors_save: NULL path");
  if (n < 0 || n_meta < 0 || (n > 0 && (!names || !tensors)) || (n_meta > 0 && !meta))
    return ct__error(CT_EINVAL, "ct_safetensors_save(%s): bad counts or NULL arrays (n %d, n_meta %d)", path, n, n_meta);
  for (int i = 0; i < n_meta; i++) {
    if (!meta[i].key || !meta[i].value)
      return ct__error(CT_EINVAL, "ct_safetensors_save(%s): metadata entry %d has a NULL key or value", path, i);
    if (!utf8_ok(meta[i].key) || !utf8_ok(meta[i].value))
      return ct__error(CT_EINVAL, "ct_safetensors_save(%s): metadata entry %d is not valid UTF-8", path, i);
    if (strcmp(meta[i].key, CT_SAFETENSORS_CHECKSUM_KEY) == 0)
      return ct__error(CT_EINVAL,
                       "ct_safetensors_save(%s): metadata key \"%s\" is reserved: cuttle computes it itself "
                       "(ct_checkpoint_save records it; a value passed through would not match the new tensors)",
                       path, CT_SAFETENSORS_CHECKSUM_KEY);
    for (int j = 0; j < i; j++)
      if (strcmp(meta[i].key, meta[j].key) == 0)
        return ct__error(CT_EINVAL, "ct_safetensors_save(%s): metadata key \"%s\" given twice", path, meta[i].key);
  }
  return CT_OK;
}

/* The n tensors to save, checked (set, a name that is UTF-8 and not "__metadata__", a dtype the
 * format has, no name twice), into items in the reference writer's order; sorted: room for n
 * names. *maxbytes: the size of the largest tensor, *total: of all of them. */
static ct_status list_items(const char *path, int n, const char *const *names, ct_tensor *const *tensors,
                            w_item *items, const char **sorted, size_t *maxbytes, uint64_t *total) {
  for (int i = 0; i < n; i++) {
    if (!names[i] || !tensors[i])
      return ct__error(CT_EINVAL, "ct_safetensors_save(%s): %s %d is NULL", path, !names[i] ? "name" : "tensor", i);
    if (strcmp(names[i], "__metadata__") == 0 || !utf8_ok(names[i]))
      return ct__error(CT_EINVAL, "ct_safetensors_save(%s): tensor name \"%s\" is %s", path, names[i],
                       utf8_ok(names[i]) ? "reserved for the metadata" : "not valid UTF-8");
    ct_dtype dt = ct_tensor_dtype(tensors[i]);
    if (!st_dtype_name_of(dt))
      return ct__error(CT_EDTYPE, "ct_safetensors_save(%s): tensor \"%s\" has dtype %s, which the format lacks", path,
                       names[i], ct_dtype_name(dt));
    items[i] = (w_item){names[i], tensors[i], st_rank_of(dt), 0};
    items[i].nbytes = (uint64_t)ct_tensor_numel(tensors[i]) * ct_dtype_size(dt);
    if (items[i].nbytes > *maxbytes) *maxbytes = (size_t)items[i].nbytes;
    *total += items[i].nbytes;
    sorted[i] = names[i];
  }
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_str_ptr);
  for (int i = 1; i < n; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0)
      return ct__error(CT_EINVAL, "ct_safetensors_save(%s): tensor name \"%s\" given twice", path, sorted[i]);
  qsort(items, (size_t)n, sizeof *items, cmp_w_item);
  return CT_OK;
}

/* The file a save writes, beside path: unnamed (O_TMPFILE) or under tmp, and renamed over path
 * once it is complete. */
typedef struct {
  const char *path;
  char *tmp, *dir; /* "<path>.tmp.<pid>" and the directory of path, malloc'd */
  int fd;          /* -1 when not open */
  int anonymous;   /* created unnamed: it gets the name tmp only from link_anonymous */
} w_file;

/* Name w's temporary file and create it (total: the bytes of data, for the message). On failure
 * w->tmp is left set only when the file under that name is this save's to remove. */
static ct_status create_output(w_file *w, uint64_t total) {
  if (asprintf(&w->tmp, "%s.tmp.%ld", w->path, (long)getpid()) < 0) {
    w->tmp = NULL;
    return ct__error(CT_ENOMEM, "ct_safetensors_save(%s): out of memory (%llu bytes of data)", w->path,
                     (unsigned long long)total);
  }
  w->dir = dir_of(w->path);
  if (!w->dir) return ct__error(CT_ENOMEM, "ct_safetensors_save(%s): out of memory", w->path);
  remove_stale_temps(w->dir, w->path);
  /* A file with our own temporary name can only be left by an earlier process that had our pid, or
   * by another thread saving the same path at the same time (not supported): it is stale. */
  unlink(w->tmp);
#ifdef O_TMPFILE
  /* An unnamed file in the target's directory: if the process dies while writing it (SIGKILL, a
   * crash), the kernel frees it and nothing is left behind. It gets a name only once it is complete. */
  if (access("/proc/self/fd", X_OK) == 0) w->fd = open(w->dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
#endif
  w->anonymous = w->fd >= 0;
  if (w->anonymous) return CT_OK;
  /* No O_TMPFILE here (an older kernel, NFS, no /proc): write under the temporary name directly. */
  w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
  if (w->fd >= 0) return CT_OK;
  ct_status s = ct__error(CT_EIO, "ct_safetensors_save: cannot create %s: %s", w->tmp, strerror(errno));
  free(w->tmp);
  w->tmp = NULL; /* not ours: do not remove it */
  return s;
}

/* Write the header (hlen bytes) with its length, then the n tensors' bytes staged through buf, to
 * w->fd; hash (NULL: none) takes in every tensor byte as it is written. */
static ct_status write_contents(const w_file *w, const char *header, size_t hlen, int n, const w_item *items,
                                uint8_t *buf, XXH3_state_t *hash) {
  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  if (write_all(w->fd, len8, 8) || write_all(w->fd, header, hlen))
    return ct__error(CT_EIO, "ct_safetensors_save: cannot write %s: %s", w->tmp, strerror(errno));
  test_delay();
  for (int i = 0; i < n; i++) {
    if (!items[i].nbytes) continue;
    ct_status s = ct_to_host(items[i].t, buf, (size_t)items[i].nbytes, ct_tensor_dtype(items[i].t));
    if (s != CT_OK) return s; /* ct_to_host set the message */
    if (write_all(w->fd, buf, (size_t)items[i].nbytes))
      return ct__error(CT_EIO, "ct_safetensors_save: cannot write %s: %s", w->tmp, strerror(errno));
    if (hash && XXH3_64bits_update(hash, buf, (size_t)items[i].nbytes) != XXH_OK)
      return ct__error(CT_EINVAL, "ct_safetensors_save(%s): XXH3_64bits_update failed", w->path);
  }
  return CT_OK;
}

/* The checksum: the value "xxh3_64:<16 hex digits>" of hash into value (which meta[n_meta - 1]
 * points at, so far the placeholder of the same width), and the header built again with it
 * written over the first one (hlen bytes at offset 8). */
static ct_status write_checksum(const w_file *w, XXH3_state_t *hash, char *value, int n, const w_item *items,
                                int n_meta, const ct_metadata_kv *meta, size_t hlen) {
  snprintf(value, CK_VALUE_LEN + 1, CK_PREFIX "%016llx", (unsigned long long)XXH3_64bits_digest(hash));
  size_t len = 0;
  char *header = build_header(n, items, n_meta, meta, &len);
  if (!header) return CT_ENOMEM; /* the allocation that failed said what and how many bytes */
  ct_status s = CT_OK;
  if (len != hlen) /* cannot happen: the value has a fixed width and needs no escape */
    s = ct__error(CT_EIO, "ct_safetensors_save: %s: internal error: the header with the checksum has %zu bytes, "
                  "the one written %zu", w->path, len, hlen);
  else if (pwrite_all(w->fd, header, hlen, 8))
    s = ct__error(CT_EIO, "ct_safetensors_save: cannot write %s: %s", w->tmp, strerror(errno));
  free(header);
  return s;
}

/* Make the written bytes durable before the file gets its name. */
static ct_status sync_output(const w_file *w) {
  if (fsync(w->fd) != 0) return ct__error(CT_EIO, "ct_safetensors_save: fsync of %s failed: %s", w->tmp, strerror(errno));
  return CT_OK;
}

/* Give the complete file the name w->path. */
static ct_status rename_into_place(w_file *w) {
  /* Without O_TMPFILE the file was written under tmp and is complete now, so it can be closed
   * before the rename; an unnamed file is closed after it, since its name comes through its fd. */
  if (!w->anonymous) {
    int rc = close(w->fd);
    w->fd = -1;
    if (rc != 0) return ct__error(CT_EIO, "ct_safetensors_save: close of %s failed: %s", w->tmp, strerror(errno));
  }
  /* From the link to the rename, two system calls back to back, the complete file has the temporary
   * name: the only window in which a SIGKILL leaves a file behind, which the next save beside path
   * removes (remove_stale_temps). Nothing else runs in it, to keep it that short. */
  if (w->anonymous && link_anonymous(w->fd, w->tmp) != 0)
    return ct__error(CT_EIO, "ct_safetensors_save: cannot link the written file as %s: %s", w->tmp, strerror(errno));
  if (rename(w->tmp, w->path) != 0)
    return ct__error(CT_EIO, "ct_safetensors_save: cannot rename %s to %s: %s", w->tmp, w->path, strerror(errno));
  return CT_OK;
}

/* After the rename: close the file if still open, and make the rename itself durable. path is
 * complete either way; a failure here is still reported. */
static ct_status close_and_sync_dir(w_file *w) {
  ct_status s = CT_OK;
  if (w->fd >= 0) {
    int rc = close(w->fd);
    w->fd = -1;
    if (rc != 0) /* the data was fsync'ed above, so a failing close loses nothing; still report it */
      s = ct__error(CT_EIO, "ct_safetensors_save: close of %s failed: %s", w->path, strerror(errno));
  }
  /* Make the rename itself durable: fsync the directory that holds path. */
  int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP)
      s = ct__error(CT_EIO, "ct_safetensors_save: %s was written, but fsync of its directory %s failed: %s", w->path,
                    w->dir, strerror(errno));
    close(dfd);
  }
  return s;
}

/* ct_safetensors_save, and with checksum, ct__safetensors_save_checksummed. */
static ct_status save(const char *path, int n, const char *const *names, ct_tensor *const *tensors, int n_meta,
                      const ct_metadata_kv *meta, int checksum) {
  ct_status s = check_save_args(path, n, names, tensors, n_meta, meta);
  if (s != CT_OK) return s;
  /* With checksum, the caller's metadata and then the key, its value first a placeholder of the
   * final width (write_checksum fills it in). */
  char ck_value[CK_VALUE_LEN + 1] = CK_PREFIX "0000000000000000";
  ct_metadata_kv *all_meta = NULL;
  XXH3_state_t hash;
  if (checksum) {
    all_meta = ct__calloc((size_t)n_meta + 1, sizeof *all_meta, "the metadata of a save with a checksum");
    if (!all_meta) return CT_ENOMEM;
    if (n_meta) memcpy(all_meta, meta, (size_t)n_meta * sizeof *meta);
    all_meta[n_meta++] = (ct_metadata_kv){CT_SAFETENSORS_CHECKSUM_KEY, ck_value};
    meta = all_meta;
    XXH3_INITSTATE(&hash);
    if (XXH3_64bits_reset(&hash) != XXH_OK) {
      free(all_meta);
      return ct__error(CT_EINVAL, "ct_safetensors_save(%s): XXH3_64bits_reset failed", path);
    }
  }
  w_item *items = ct__calloc((size_t)n + 1, sizeof *items, "the list of tensors to save");
  const char **sorted = items ? ct__calloc((size_t)n + 1, sizeof *sorted, "the sorted tensor names") : NULL;
  char *header = NULL;
  uint8_t *buf = NULL;
  w_file w = {.path = path, .fd = -1};
  size_t maxbytes = 0, hlen = 0;
  uint64_t total = 0;
  s = items && sorted ? list_items(path, n, names, tensors, items, sorted, &maxbytes, &total) : CT_ENOMEM;
  if (s == CT_OK) {
    header = build_header(n, items, n_meta, meta, &hlen);
    buf = header ? ct__malloc(maxbytes, "the staging buffer of a save") : NULL;
    if (!buf) s = CT_ENOMEM; /* the allocation that failed said what and how many bytes */
  }
  int renamed = 0;
  if (s == CT_OK && (s = create_output(&w, total)) == CT_OK &&
      (s = write_contents(&w, header, hlen, n, items, buf, checksum ? &hash : NULL)) == CT_OK &&
      (!checksum || (s = write_checksum(&w, &hash, ck_value, n, items, n_meta, meta, hlen)) == CT_OK) &&
      (s = sync_output(&w)) == CT_OK && (s = rename_into_place(&w)) == CT_OK) {
    renamed = 1;
    s = close_and_sync_dir(&w);
  }
  if (!renamed) { /* a failed save leaves nothing behind */
    if (w.fd >= 0) close(w.fd);
    if (w.tmp) unlink(w.tmp);
  }
  free(w.dir);
  free(w.tmp);
  free(buf);
  free(header);
  free(sorted);
  free(items);
  free(all_meta);
  return s;
}

ct_status ct_safetensors_save(const char *path, int n, const char *const *names, ct_tensor *const *tensors,
                              int n_meta, const ct_metadata_kv *meta) {
  return save(path, n, names, tensors, n_meta, meta, 0);
}

ct_status ct__safetensors_save_checksummed(const char *path, int n, const char *const *names,
                                           ct_tensor *const *tensors, int n_meta, const ct_metadata_kv *meta) {
  return save(path, n, names, tensors, n_meta, meta, 1);
}
