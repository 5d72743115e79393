/* Request and response lists: copies, frees, and the bounds-checked wire format.
 *
 * Wire format (little-endian): u32 magic, u32 count, i32 flags, then count records. Integers are
 * fixed width, doubles IEEE-754, strings u32 length + bytes, arrays u32 count + items. */
#include "message.h"

#include <stdlib.h>
#include <string.h>

#define MSG_MAGIC_REQ 0x48565251u  /* "HVRQ" */
#define MSG_MAGIC_RESP 0x48565253u /* "HVRS" */
#define MAX_NAME 65536u
#define MAX_ITEMS (1u << 20)

static const char* const type_names[HVDS_MSG_TYPE_COUNT] = {
    "ALLREDUCE", "ALLGATHER", "BROADCAST",     "JOIN",  "ADASUM",           "ALLTOALL",
    "BARRIER",   "REDUCESCATTER", "ERROR", "PROCESS_SET_ADD", "PROCESS_SET_REMOVE",
    "SPARSE_ALLREDUCE"};

const char* hvds__msg_type_name(int type) {
  return (type >= 0 && type < HVDS_MSG_TYPE_COUNT) ? type_names[type] : "UNKNOWN";
}

/* ---- copies and frees ---- */

static int dup_ints(int32_t** dst, const int32_t* src, int32_t n) {
  *dst = NULL;
  if (n <= 0) return 0;
  *dst = malloc((size_t)n * sizeof(int32_t));
  if (*dst == NULL) return -1;
  memcpy(*dst, src, (size_t)n * sizeof(int32_t));
  return 0;
}

int hvds__request_copy(hvds_request_t* dst, const hvds_request_t* src) {
  *dst = *src;
  dst->name = src->name ? strdup(src->name) : NULL;
  if (dup_ints(&dst->extra, src->extra, src->nextra) != 0 || (src->name && !dst->name)) {
    hvds__request_free(dst);
    return -1;
  }
  return 0;
}

void hvds__request_free(hvds_request_t* r) {
  if (r == NULL) return;
  free(r->name);
  free(r->extra);
  memset(r, 0, sizeof(*r));
}

/* Arrays grow to the next power of two when full, so appending n items costs O(n). */
static int grow_pow2(void** arr, int32_t n, size_t item) {
  if (n > 0 && (n & (n - 1)) != 0) return 0; /* not full: capacity is the next power of two */
  void* p = realloc(*arr, (size_t)(n ? 2 * n : 1) * item);
  if (p == NULL) return -1;
  *arr = p;
  return 0;
}

static size_t pow2_at_least(uint32_t n) {
  size_t c = 1;
  while (c < n) c *= 2;
  return c;
}

int hvds__response_take_name(hvds_response_t* r, char* name) {
  if (grow_pow2((void**)&r->names, r->nnames, sizeof(char*)) != 0) return -1;
  r->names[r->nnames++] = name;
  return 0;
}

int hvds__response_add_name(hvds_response_t* r, const char* name) {
  if (grow_pow2((void**)&r->names, r->nnames, sizeof(char*)) != 0) return -1;
  r->names[r->nnames] = strdup(name);
  if (r->names[r->nnames] == NULL) return -1;
  r->nnames++;
  return 0;
}

int hvds__response_add_size(hvds_response_t* r, int64_t size) {
  if (grow_pow2((void**)&r->sizes, r->nsizes, sizeof(int64_t)) != 0) return -1;
  r->sizes[r->nsizes++] = size;
  return 0;
}

int hvds__response_copy(hvds_response_t* dst, const hvds_response_t* src) {
  *dst = *src;
  dst->names = NULL;
  dst->nnames = 0;
  dst->sizes = NULL;
  dst->nsizes = 0;
  dst->extra = NULL;
  dst->error = NULL;
  for (int32_t i = 0; i < src->nnames; i++)
    if (hvds__response_add_name(dst, src->names[i]) != 0) goto fail;
  for (int32_t i = 0; i < src->nsizes; i++)
    if (hvds__response_add_size(dst, src->sizes[i]) != 0) goto fail;
  if (dup_ints(&dst->extra, src->extra, src->nextra) != 0) goto fail;
  if (src->error && (dst->error = strdup(src->error)) == NULL) goto fail;
  return 0;
fail:
  hvds__response_free(dst);
  return -1;
}

void hvds__response_free(hvds_response_t* r) {
  if (r == NULL) return;
  for (int32_t i = 0; i < r->nnames; i++) free(r->names[i]);
  free(r->names);
  free(r->sizes);
  free(r->extra);
  free(r->error);
  memset(r, 0, sizeof(*r));
}

/* ---- encoding ---- */

void hvds__buf_free(hvds_buf_t* b) {
  free(b->data);
  memset(b, 0, sizeof(*b));
}

static void put(hvds_buf_t* b, const void* p, size_t n) {
  // n == 0 comes with p == NULL (a NULL string), and memcpy from NULL is undefined even then.
  if (b->oom || n == 0) return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    uint8_t* d = realloc(b->data, cap);
    if (d == NULL) {
      b->oom = 1;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static void put_u32(hvds_buf_t* b, uint32_t v) { put(b, &v, sizeof v); }
static void put_i32(hvds_buf_t* b, int32_t v) { put(b, &v, sizeof v); }
static void put_i64(hvds_buf_t* b, int64_t v) { put(b, &v, sizeof v); }
static void put_f64(hvds_buf_t* b, double v) { put(b, &v, sizeof v); }
static void put_str(hvds_buf_t* b, const char* s) {
  uint32_t n = s ? (uint32_t)strlen(s) : 0;
  put_u32(b, n);
  put(b, s, n);
}
static void put_ints(hvds_buf_t* b, const int32_t* v, int32_t n) {
  put_u32(b, (uint32_t)(n > 0 ? n : 0));
  if (n > 0) put(b, v, (size_t)n * 4);
}

void hvds__encode_requests(hvds_buf_t* b, const hvds_request_t* reqs, int32_t n, int32_t flags) {
  put_u32(b, MSG_MAGIC_REQ);
  put_u32(b, (uint32_t)n);
  put_i32(b, flags);
  for (int32_t i = 0; i < n; i++) {
    const hvds_request_t* r = &reqs[i];
    put_i32(b, r->rank);
    put_i32(b, r->type);
    put_i32(b, r->dtype);
    put_i32(b, r->root_rank);
    put_i32(b, r->device);
    put_i32(b, r->reduce_op);
    put_f64(b, r->prescale);
    put_f64(b, r->postscale);
    put_i32(b, r->ndim);
    for (int32_t d = 0; d < r->ndim && d < HVDS_MAX_DIMS; d++) put_i64(b, r->shape[d]);
    put_ints(b, r->extra, r->nextra);
    put_str(b, r->name);
  }
}

void hvds__encode_responses(hvds_buf_t* b, const hvds_response_t* resps, int32_t n,
                            int32_t flags) {
  put_u32(b, MSG_MAGIC_RESP);
  put_u32(b, (uint32_t)n);
  put_i32(b, flags);
  for (int32_t i = 0; i < n; i++) {
    const hvds_response_t* r = &resps[i];
    put_i32(b, r->type);
    put_i32(b, r->dtype);
    put_i32(b, r->reduce_op);
    put_i32(b, r->root_rank);
    put_i32(b, r->device);
    put_i32(b, r->last_joined_rank);
    put_f64(b, r->prescale);
    put_f64(b, r->postscale);
    put_u32(b, (uint32_t)r->nnames);
    for (int32_t k = 0; k < r->nnames; k++) put_str(b, r->names[k]);
    put_u32(b, (uint32_t)r->nsizes);
    for (int32_t k = 0; k < r->nsizes; k++) put_i64(b, r->sizes[k]);
    put_ints(b, r->extra, r->nextra);
    put_str(b, r->error);
  }
}

/* ---- decoding ---- */

typedef struct {
  const uint8_t* p;
  size_t left;
  int bad;
} reader_t;

static void get(reader_t* r, void* out, size_t n) {
  if (r->bad || r->left < n) {
    r->bad = 1;
    memset(out, 0, n);
    return;
  }
  memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
}

/* Typed readers over get(): sizeof(T) bytes each. */
#define TYPED_READER(name, T) \
  static T name(reader_t* r) {  \
    T v;                        \
    get(r, &v, sizeof v);       \
    return v;                   \
  }
TYPED_READER(get_u32, uint32_t)
TYPED_READER(get_i32, int32_t)
TYPED_READER(get_i64, int64_t)
TYPED_READER(get_f64, double)
#undef TYPED_READER

/* Returns a malloc'd NUL-terminated string, or NULL (with r->bad set on malformed input). An
 * empty string decodes to NULL when allow_null. */
static char* get_str(reader_t* r, int allow_null) {
  uint32_t n = get_u32(r);
  if (r->bad || n > MAX_NAME || n > r->left) {
    r->bad = 1;
    return NULL;
  }
  if (n == 0 && allow_null) return NULL;
  char* s = malloc(n + 1);
  if (s == NULL) {
    r->bad = 1;
    return NULL;
  }
  get(r, s, n);
  s[n] = '\0';
  if (memchr(s, '\0', n) != NULL) r->bad = 1; /* embedded NUL: not a name */
  return s;
}

static int32_t* get_ints(reader_t* r, int32_t* n_out) {
  uint32_t n = get_u32(r);
  *n_out = 0;
  if (r->bad || n > MAX_ITEMS || (size_t)n * 4 > r->left) {
    r->bad = 1;
    return NULL;
  }
  if (n == 0) return NULL;
  int32_t* v = malloc((size_t)n * 4);
  if (v == NULL) {
    r->bad = 1;
    return NULL;
  }
  get(r, v, (size_t)n * 4);
  *n_out = (int32_t)n;
  return v;
}

/* Reads the header; returns the item count, or -1 with r->bad set. */
static int64_t get_header(reader_t* r, uint32_t magic, size_t min_item, int32_t* flags) {
  if (get_u32(r) != magic) r->bad = 1;
  uint32_t n = get_u32(r);
  *flags = get_i32(r);
  /* A declared count must fit in the bytes that actually follow. */
  if (r->bad || n > MAX_ITEMS || (size_t)n * min_item > r->left) {
    r->bad = 1;
    return -1;
  }
  return n;
}

static void decode_request(reader_t* r, hvds_request_t* q) {
  q->rank = get_i32(r);
  q->type = get_i32(r);
  q->dtype = get_i32(r);
  q->root_rank = get_i32(r);
  q->device = get_i32(r);
  q->reduce_op = get_i32(r);
  q->prescale = get_f64(r);
  q->postscale = get_f64(r);
  q->ndim = get_i32(r);
  if (q->ndim < 0 || q->ndim > HVDS_MAX_DIMS) {
    r->bad = 1;
    return;
  }
  for (int32_t d = 0; d < q->ndim; d++) q->shape[d] = get_i64(r);
  q->extra = get_ints(r, &q->nextra);
  q->name = get_str(r, 0);
  if (q->type < 0 || q->type >= HVDS_MSG_TYPE_COUNT) r->bad = 1;
}


static void decode_response(reader_t* r, hvds_response_t* s) {
  s->type = get_i32(r);
  s->dtype = get_i32(r);
  s->reduce_op = get_i32(r);
  s->root_rank = get_i32(r);
  s->device = get_i32(r);
  s->last_joined_rank = get_i32(r);
  s->prescale = get_f64(r);
  s->postscale = get_f64(r);
  uint32_t nn = get_u32(r);
  if (r->bad || nn > MAX_ITEMS || (size_t)nn * 4 > r->left) {
    r->bad = 1;
    return;
  }
  s->names = calloc(pow2_at_least(nn), sizeof(char*)); /* room as grow_pow2 expects */
  if (s->names == NULL) {
    r->bad = 1;
    return;
  }
  for (uint32_t k = 0; k < nn && !r->bad; k++) {
    s->names[k] = get_str(r, 0);
    s->nnames = (int32_t)k + 1;
  }
  uint32_t ns = get_u32(r);
  if (r->bad || ns > MAX_ITEMS || (size_t)ns * 8 > r->left) {
    r->bad = 1;
    return;
  }
  if (ns > 0) {
    s->sizes = malloc(pow2_at_least(ns) * 8);
    if (s->sizes == NULL) {
      r->bad = 1;
      return;
    }
    get(r, s->sizes, (size_t)ns * 8);
    s->nsizes = (int32_t)ns;
  }
  s->extra = get_ints(r, &s->nextra);
  s->error = get_str(r, 1);
  if (s->type < 0 || s->type >= HVDS_MSG_TYPE_COUNT) r->bad = 1;
}

/* Decodes a list: header, then count items of item_size bytes decoded by one(); frees the
 * partial list with drop() on malformed input. */
static hvds_result_t decode_list(const uint8_t* data, size_t len, uint32_t magic, size_t min_item,
                                 size_t item_size, void (*one)(reader_t*, void*),
                                 void (*drop)(void*), void** out, int32_t* n, int32_t* flags) {
  reader_t r = {data, len, 0};
  *out = NULL;
  *n = 0;
  int64_t count = get_header(&r, magic, min_item, flags);
  if (count < 0) return HVDS_INVALID_ARGUMENT;
  char* items = calloc(count ? (size_t)count : 1, item_size);
  if (items == NULL) return HVDS_SYSTEM_ERROR;
  int64_t i = 0;
  for (; i < count && !r.bad; i++) one(&r, items + (size_t)i * item_size);
  if (r.bad || r.left != 0) {
    for (int64_t k = 0; k < i; k++) drop(items + (size_t)k * item_size);
    free(items);
    return HVDS_INVALID_ARGUMENT;
  }
  *out = items;
  *n = (int32_t)count;
  return HVDS_SUCCESS;
}

static void one_request(reader_t* r, void* q) { decode_request(r, q); }
static void drop_request(void* q) { hvds__request_free(q); }
static void one_response(reader_t* r, void* s) { decode_response(r, s); }
static void drop_response(void* s) { hvds__response_free(s); }

hvds_result_t hvds__decode_requests(const uint8_t* data, size_t len, hvds_request_t** out,
                                    int32_t* n, int32_t* flags) {
  return decode_list(data, len, MSG_MAGIC_REQ, 52, sizeof(hvds_request_t), one_request,
                     drop_request, (void**)out, n, flags);
}

hvds_result_t hvds__decode_responses(const uint8_t* data, size_t len, hvds_response_t** out,
                                     int32_t* n, int32_t* flags) {
  return decode_list(data, len, MSG_MAGIC_RESP, 56, sizeof(hvds_response_t), one_response,
                     drop_response, (void**)out, n, flags);
}
