/* Rendezvous store wire format.
 *
 * Every message is one frame: a 4-byte big-endian body length, then the body. The body starts
 * with a 1-byte message type; the fields that follow depend on the type:
 *
 *   HELLO          str secret                  client -> server, must be the first frame
 *   OK             (none)                      server -> client, HELLO accepted
 *   DENIED         (none)                      server -> client, then the server closes
 *   SET            str key, bytes value        client -> server, answered by OK
 *   GET            str key, i32 wait_ms        client -> server, answered by VALUE or NOTFOUND
 *   VALUE          bytes value
 *   NOTFOUND       (none)
 *   ADD            str key, i64 delta          client -> server, answered by INT
 *   INT            i64 value
 *   DELETE_PREFIX  str prefix                  client -> server, answered by OK
 *   ERROR          str reason                  server -> client (limit exceeded, bad request)
 *
 * "str" and "bytes" are a 4-byte big-endian length followed by that many bytes; integers are
 * big-endian two's complement. The decoder is strict: a frame whose declared length exceeds
 * HVDS_STORE_MAX_FRAME is rejected before anything is allocated, every field is bounds-checked,
 * keys are limited to HVDS_STORE_MAX_KEY bytes and may not contain NUL, values to
 * HVDS_STORE_MAX_VALUE bytes, and trailing bytes after the last field are an error.
 */
#ifndef HVDS_STORE_PROTO_H_
#define HVDS_STORE_PROTO_H_

#include <stddef.h>
#include <stdint.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HVDS_STORE_MAX_KEY 1024u                  /* bytes in a key or prefix */
#define HVDS_STORE_MAX_VALUE (64u << 20)          /* bytes in one value */
#define HVDS_STORE_MAX_SECRET 1024u               /* bytes in the HELLO secret */
#define HVDS_STORE_MAX_KEYS 1000000u              /* keys held by one server */
#define HVDS_STORE_MAX_BYTES (1ull << 30)         /* key plus value bytes held by one server */
#define HVDS_STORE_HEADER 4u                      /* bytes of the length prefix */
/* Largest body: type, key field, value field. */
#define HVDS_STORE_MAX_FRAME (1u + 4u + HVDS_STORE_MAX_KEY + 4u + HVDS_STORE_MAX_VALUE)

typedef enum {
  HVDS_STORE_MSG_HELLO = 1,
  HVDS_STORE_MSG_OK = 2,
  HVDS_STORE_MSG_DENIED = 3,
  HVDS_STORE_MSG_SET = 4,
  HVDS_STORE_MSG_GET = 5,
  HVDS_STORE_MSG_VALUE = 6,
  HVDS_STORE_MSG_NOTFOUND = 7,
  HVDS_STORE_MSG_ADD = 8,
  HVDS_STORE_MSG_INT = 9,
  HVDS_STORE_MSG_DELETE_PREFIX = 10,
  HVDS_STORE_MSG_ERROR = 11
} hvds_store_msg_type_t;

/* A decoded message. Pointers refer into the decoded buffer (nothing is allocated), so the
 * message is valid only while that buffer is. Fields unused by a type are zero. */
typedef struct {
  hvds_store_msg_type_t type;
  const char* key;  /* HELLO: secret; SET/GET/ADD: key; DELETE_PREFIX: prefix; ERROR: reason */
  size_t key_len;   /* not NUL-terminated on decode */
  const void* val;  /* SET, VALUE */
  size_t val_len;
  int64_t num;      /* GET: wait_ms (-1 = forever); ADD: delta; INT: value */
} hvds_store_msg_t;

/* A growable byte buffer. Zero-initialize; hvds__store_buf_free() releases it. */
typedef struct {
  uint8_t* data;
  size_t len; /* bytes in use */
  size_t cap; /* bytes allocated */
} hvds_store_buf_t;

/* Makes room for extra more bytes. HVDS_SYSTEM_ERROR on allocation failure (buf unaltered). */
hvds_result_t hvds__store_buf_reserve(hvds_store_buf_t* buf, size_t extra);
/* Drops the first n bytes (n <= len). */
void hvds__store_buf_consume(hvds_store_buf_t* buf, size_t n);
/* Frees the storage and zeroes the buffer. Accepts NULL. */
void hvds__store_buf_free(hvds_store_buf_t* buf);

/* Appends msg as one frame to out. Returns HVDS_INVALID_ARGUMENT if a field exceeds its limit
 * (out unaltered) or HVDS_SYSTEM_ERROR if allocation fails. */
hvds_result_t hvds__store_encode(const hvds_store_msg_t* msg, hvds_store_buf_t* out);

/* Looks at the start of data. Returns HVDS_SUCCESS with *frame_len (header plus body) when a
 * whole frame is present, HVDS_IN_PROGRESS when more bytes are needed, HVDS_INVALID_ARGUMENT
 * when the declared length is zero or above max_body (the connection should be dropped). */
hvds_result_t hvds__store_frame_peek(const uint8_t* data, size_t len, size_t max_body,
                                     size_t* frame_len /* OUT */);

/* Decodes one body (the bytes after the length prefix). HVDS_INVALID_ARGUMENT on any malformed,
 * truncated, over-limit or trailing data; *msg is then unspecified. */
hvds_result_t hvds__store_decode(const uint8_t* body, size_t len, hvds_store_msg_t* msg /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_STORE_PROTO_H_ */
