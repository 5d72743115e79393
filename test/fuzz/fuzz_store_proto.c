/* Fuzz target: the rendezvous store wire format (runtime/store/store_proto.c).
 *
 * Each input is used twice:
 *   - as one frame body, straight into hvds__store_decode();
 *   - as a byte stream from a peer, framed the way the server does it: bytes arrive in small
 *     chunks into a growing buffer, hvds__store_frame_peek() finds whole frames (first frame under
 *     the HELLO limit, the rest under HVDS_STORE_MAX_FRAME), each body is decoded and consumed,
 *     and the stream ends at the first frame the server would drop the connection for.
 * Properties: whatever decodes re-encodes to the same bytes (header included), every decoded
 * field lies inside the body and within its limit, and buffered bytes never exceed what arrived,
 * so no allocation follows a length the peer declared.
 */
#include <string.h>

#include "fuzz.h"
#include "store_proto.h"

#define HELLO_MAX_BODY (1u + 4u + HVDS_STORE_MAX_SECRET) /* as store_server.c */

static int inside(const void* p, size_t n, const uint8_t* body, size_t len) {
  const uint8_t* q = p;
  return n == 0 || (q >= body && q <= body + len && n <= (size_t)(body + len - q));
}

/* Decodes body; on success checks the fields and that encoding gives back header + body. */
static void check_body(const uint8_t* body, size_t len) {
  hvds_store_msg_t m;
  if (hvds__store_decode(body, len, &m) != HVDS_SUCCESS) return;
  FUZZ_ASSERT(inside(m.key, m.key_len, body, len) && m.key_len <= HVDS_STORE_MAX_SECRET);
  FUZZ_ASSERT(inside(m.val, m.val_len, body, len) && m.val_len <= HVDS_STORE_MAX_VALUE);
  FUZZ_ASSERT(m.key_len == 0 || memchr(m.key, '\0', m.key_len) == NULL);

  hvds_store_buf_t out = {0};
  FUZZ_ASSERT(hvds__store_encode(&m, &out) == HVDS_SUCCESS);
  FUZZ_ASSERT(out.len == HVDS_STORE_HEADER + len);
  size_t frame_len = 0;
  FUZZ_ASSERT(hvds__store_frame_peek(out.data, out.len, HVDS_STORE_MAX_FRAME, &frame_len) ==
              HVDS_SUCCESS);
  FUZZ_ASSERT(frame_len == out.len);
  FUZZ_ASSERT(memcmp(out.data + HVDS_STORE_HEADER, body, len) == 0);
  hvds__store_buf_free(&out);
}

/* Feeds data as a stream in chunks of 1..16 bytes (the chunk size comes from the input's length
 * so a given input always splits the same way). */
static void check_stream(const uint8_t* data, size_t size) {
  hvds_store_buf_t in = {0};
  size_t chunk = 1 + size % 16, fed = 0, frames = 0;
  int dropped = 0;
  while (fed < size && !dropped) {
    size_t n = size - fed < chunk ? size - fed : chunk;
    FUZZ_ASSERT(hvds__store_buf_reserve(&in, n) == HVDS_SUCCESS);
    memcpy(in.data + in.len, data + fed, n);
    in.len += n;
    fed += n;
    FUZZ_ASSERT(in.len <= fed && in.cap <= 2 * fed + 256);
    for (;;) {
      size_t max_body = frames == 0 ? HELLO_MAX_BODY : HVDS_STORE_MAX_FRAME;
      size_t frame_len = 0;
      hvds_result_t rc = hvds__store_frame_peek(in.data, in.len, max_body, &frame_len);
      if (rc == HVDS_IN_PROGRESS) break;
      if (rc != HVDS_SUCCESS) {
        dropped = 1;
        break;
      }
      FUZZ_ASSERT(frame_len > HVDS_STORE_HEADER && frame_len <= in.len);
      FUZZ_ASSERT(frame_len - HVDS_STORE_HEADER <= max_body);
      check_body(in.data + HVDS_STORE_HEADER, frame_len - HVDS_STORE_HEADER);
      hvds__store_buf_consume(&in, frame_len);
      frames++;
    }
  }
  hvds__store_buf_free(&in);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_body(data, size);
  check_stream(data, size);
  return 0;
}
