/* Rendezvous store wire format: frame encoding and a strict, allocation-free decoder. */
#include "store_proto.h"

#include <stdlib.h>
#include <string.h>

hvds_result_t hvds__store_buf_reserve(hvds_store_buf_t* buf, size_t extra) {
  if (extra <= buf->cap - buf->len) return HVDS_SUCCESS;
  if (extra > SIZE_MAX / 2 - buf->len) return HVDS_SYSTEM_ERROR;
  size_t need = buf->len + extra;
  size_t cap = buf->cap ? buf->cap : 256;
  while (cap < need) cap *= 2;
  uint8_t* data = realloc(buf->data, cap);
  if (data == NULL) return HVDS_SYSTEM_ERROR;
  buf->data = data;
  buf->cap = cap;
  return HVDS_SUCCESS;
}

void hvds__store_buf_consume(hvds_store_buf_t* buf, size_t n) {
  if (n >= buf->len) {
    buf->len = 0;
    return;
  }
  memmove(buf->data, buf->data + n, buf->len - n);
  buf->len -= n;
}

void hvds__store_buf_free(hvds_store_buf_t* buf) {
  if (buf == NULL) return;
  free(buf->data);
  buf->data = NULL;
  buf->len = buf->cap = 0;
}

static void put_u32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t* p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put_i64(uint8_t* p, int64_t v) {
  uint64_t u = (uint64_t)v;
  put_u32(p, (uint32_t)(u >> 32));
  put_u32(p + 4, (uint32_t)u);
}

static int64_t get_i64(const uint8_t* p) {
  uint64_t u = ((uint64_t)get_u32(p) << 32) | get_u32(p + 4);
  return (int64_t)u;
}

/* Which fields each type carries. */
enum { F_NONE = 0, F_STR = 1, F_BYTES = 2, F_I32 = 4, F_I64 = 8 };

static int fields_of(hvds_store_msg_type_t type, size_t* str_max) {
  *str_max = HVDS_STORE_MAX_KEY;
  switch (type) {
    case HVDS_STORE_MSG_HELLO:
      *str_max = HVDS_STORE_MAX_SECRET;
      return F_STR;
    case HVDS_STORE_MSG_OK:
    case HVDS_STORE_MSG_DENIED:
    case HVDS_STORE_MSG_NOTFOUND:
      return F_NONE;
    case HVDS_STORE_MSG_SET:
      return F_STR | F_BYTES;
    case HVDS_STORE_MSG_GET:
      return F_STR | F_I32;
    case HVDS_STORE_MSG_VALUE:
      return F_BYTES;
    case HVDS_STORE_MSG_ADD:
      return F_STR | F_I64;
    case HVDS_STORE_MSG_INT:
      return F_I64;
    case HVDS_STORE_MSG_DELETE_PREFIX:
    case HVDS_STORE_MSG_ERROR:
      return F_STR;
  }
  return -1;
}

hvds_result_t hvds__store_encode(const hvds_store_msg_t* msg, hvds_store_buf_t* out) {
  size_t str_max;
  int fields = fields_of(msg->type, &str_max);
  if (fields < 0) return HVDS_INVALID_ARGUMENT;
  if ((fields & F_STR) && (msg->key_len > str_max || (msg->key_len && msg->key == NULL)))
    return HVDS_INVALID_ARGUMENT;
  if ((fields & F_BYTES) && (msg->val_len > HVDS_STORE_MAX_VALUE || (msg->val_len && !msg->val)))
    return HVDS_INVALID_ARGUMENT;
  if ((fields & F_I32) && (msg->num < INT32_MIN || msg->num > INT32_MAX))
    return HVDS_INVALID_ARGUMENT;

  size_t body = 1;
  if (fields & F_STR) body += 4 + msg->key_len;
  if (fields & F_BYTES) body += 4 + msg->val_len;
  if (fields & F_I32) body += 4;
  if (fields & F_I64) body += 8;
  hvds_result_t rc = hvds__store_buf_reserve(out, HVDS_STORE_HEADER + body);
  if (rc != HVDS_SUCCESS) return rc;

  uint8_t* p = out->data + out->len;
  put_u32(p, (uint32_t)body);
  p += 4;
  *p++ = (uint8_t)msg->type;
  if (fields & F_STR) {
    put_u32(p, (uint32_t)msg->key_len);
    if (msg->key_len) memcpy(p + 4, msg->key, msg->key_len);
    p += 4 + msg->key_len;
  }
  if (fields & F_BYTES) {
    put_u32(p, (uint32_t)msg->val_len);
    if (msg->val_len) memcpy(p + 4, msg->val, msg->val_len);
    p += 4 + msg->val_len;
  }
  if (fields & F_I32) {
    put_u32(p, (uint32_t)(int32_t)msg->num);
    p += 4;
  }
  if (fields & F_I64) {
    put_i64(p, msg->num);
    p += 8;
  }
  out->len += HVDS_STORE_HEADER + body;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__store_frame_peek(const uint8_t* data, size_t len, size_t max_body,
                                     size_t* frame_len) {
  if (len < HVDS_STORE_HEADER) return HVDS_IN_PROGRESS;
  uint32_t body = get_u32(data);
  // Reject before the caller grows its buffer to hold the declared length.
  if (body == 0 || body > max_body) return HVDS_INVALID_ARGUMENT;
  if (len - HVDS_STORE_HEADER < body) return HVDS_IN_PROGRESS;
  *frame_len = HVDS_STORE_HEADER + (size_t)body;
  return HVDS_SUCCESS;
}

/* Reads a length-prefixed field of at most max bytes starting at *pos. */
static int take_field(const uint8_t* body, size_t len, size_t* pos, size_t max,
                      const uint8_t** field, size_t* field_len) {
  if (len - *pos < 4) return -1;
  uint32_t n = get_u32(body + *pos);
  *pos += 4;
  if (n > max || len - *pos < n) return -1;
  *field = body + *pos;
  *field_len = n;
  *pos += n;
  return 0;
}

hvds_result_t hvds__store_decode(const uint8_t* body, size_t len, hvds_store_msg_t* msg) {
  memset(msg, 0, sizeof(*msg));
  if (len < 1 || len > HVDS_STORE_MAX_FRAME) return HVDS_INVALID_ARGUMENT;
  msg->type = (hvds_store_msg_type_t)body[0];
  size_t str_max;
  int fields = fields_of(msg->type, &str_max);
  if (fields < 0) return HVDS_INVALID_ARGUMENT;

  size_t pos = 1;
  const uint8_t* field;
  if (fields & F_STR) {
    if (take_field(body, len, &pos, str_max, &field, &msg->key_len) != 0)
      return HVDS_INVALID_ARGUMENT;
    // Keys travel as C strings inside the server, so an embedded NUL is malformed.
    if (memchr(field, '\0', msg->key_len) != NULL) return HVDS_INVALID_ARGUMENT;
    msg->key = (const char*)field;
  }
  if (fields & F_BYTES) {
    if (take_field(body, len, &pos, HVDS_STORE_MAX_VALUE, &field, &msg->val_len) != 0)
      return HVDS_INVALID_ARGUMENT;
    msg->val = field;
  }
  if (fields & F_I32) {
    if (len - pos < 4) return HVDS_INVALID_ARGUMENT;
    msg->num = (int32_t)get_u32(body + pos);
    pos += 4;
  }
  if (fields & F_I64) {
    if (len - pos < 8) return HVDS_INVALID_ARGUMENT;
    msg->num = get_i64(body + pos);
    pos += 8;
  }
  return pos == len ? HVDS_SUCCESS : HVDS_INVALID_ARGUMENT;
}
