/* Writes the seed corpus with the real encoders: small valid messages of every kind plus a few
 * edge cases (empty lists, limits, truncation, an over-long declared length). Run it after a
 * wire-format change and commit the output:
 *   build/bin/fuzz_gen_corpus test/fuzz/corpus
 * Files go to <dir>/fuzz_message/ and <dir>/fuzz_store_proto/, which must exist. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"
#include "store_proto.h"

static const char* g_root;
static int g_failed;

static void write_file(const char* target, const char* name, const void* data, size_t len) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s/%s", g_root, target, name);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(data, 1, len, f) != len) {
    fprintf(stderr, "gen_corpus: cannot write %s\n", path);
    g_failed = 1;
  }
  if (f) fclose(f);
}

/* ---- negotiation messages ---- */

static hvds_request_t request(int32_t type, const char* name) {
  hvds_request_t r;
  memset(&r, 0, sizeof(r));
  r.rank = 1;
  r.type = type;
  r.dtype = HVDS_FLOAT32;
  r.device = -1;
  r.reduce_op = HVDS_SUM;
  r.prescale = 1.0;
  r.postscale = 0.5;
  r.ndim = 2;
  r.shape[0] = 17;
  r.shape[1] = 3;
  r.name = (char*)name;
  return r;
}

static void put_requests(const char* file, const hvds_request_t* reqs, int32_t n, int32_t flags,
                         size_t cut) {
  hvds_buf_t b = {0};
  hvds__encode_requests(&b, reqs, n, flags);
  if (b.oom || cut > b.len) g_failed = 1;
  else write_file("fuzz_message", file, b.data, b.len - cut);
  hvds__buf_free(&b);
}

static void put_responses(const char* file, const hvds_response_t* resps, int32_t n,
                          int32_t flags, size_t cut) {
  hvds_buf_t b = {0};
  hvds__encode_responses(&b, resps, n, flags);
  if (b.oom || cut > b.len) g_failed = 1;
  else write_file("fuzz_message", file, b.data, b.len - cut);
  hvds__buf_free(&b);
}

static void gen_messages(void) {
  static int32_t ranks[] = {0, 2, 5};
  static char* names[] = {"grad.w", "grad.b", "layer1/kernel"};
  static int64_t sizes[] = {51, 3, 4096};
  static int32_t shape[] = {4, 7};

  put_requests("req_empty", NULL, 0, 0, 0);
  hvds_request_t reqs[3] = {request(HVDS_MSG_ALLREDUCE, "grad.w"),
                            request(HVDS_MSG_BROADCAST, "weights"),
                            request(HVDS_MSG_PS_ADD, "")};
  reqs[1].root_rank = 2;
  reqs[2].extra = ranks;
  reqs[2].nextra = 3;
  reqs[2].ndim = 0;
  put_requests("req_allreduce", reqs, 1, 0, 0);
  put_requests("req_three_flags", reqs, 3, 7, 0);
  put_requests("req_truncated", reqs, 3, 0, 1);
  hvds_request_t dims = request(HVDS_MSG_ALLGATHER, "rank8");
  dims.ndim = HVDS_MAX_DIMS;
  for (int d = 0; d < HVDS_MAX_DIMS; d++) dims.shape[d] = (int64_t)1 << (d * 7);
  put_requests("req_max_dims", &dims, 1, 0, 0);

  put_responses("resp_empty", NULL, 0, 0, 0);
  hvds_response_t fused;
  memset(&fused, 0, sizeof(fused));
  fused.type = HVDS_MSG_ALLREDUCE;
  fused.dtype = HVDS_FLOAT32;
  fused.device = -1;
  fused.prescale = 1.0;
  fused.postscale = 1.0;
  fused.names = names;
  fused.nnames = 3;
  fused.sizes = sizes;
  fused.nsizes = 3;
  put_responses("resp_fused", &fused, 1, 0, 0);
  hvds_response_t gather = fused;
  gather.type = HVDS_MSG_ALLGATHER;
  gather.nnames = 1;
  gather.extra = shape;
  gather.nextra = 2;
  hvds_response_t error;
  memset(&error, 0, sizeof(error));
  error.type = HVDS_MSG_ERROR;
  error.names = names;
  error.nnames = 1;
  error.error = "Mismatched data types: float32 vs int64";
  hvds_response_t join;
  memset(&join, 0, sizeof(join));
  join.type = HVDS_MSG_JOIN;
  join.last_joined_rank = 3;
  hvds_response_t list[] = {gather, error, join};
  put_responses("resp_gather_error_join", list, 3, 1, 0);
  put_responses("resp_truncated", list, 3, 0, 5);
}

/* ---- store protocol ---- */

static hvds_store_msg_t smsg(hvds_store_msg_type_t type, const char* key, const char* val,
                            int64_t num) {
  hvds_store_msg_t m;
  memset(&m, 0, sizeof(m));
  m.type = type;
  m.key = key;
  m.key_len = key ? strlen(key) : 0;
  m.val = val;
  m.val_len = val ? strlen(val) : 0;
  m.num = num;
  return m;
}

/* Writes the frames of msgs as one stream; cut drops that many bytes from the end, and
 * body_only drops the 4-byte length prefix (a bare body, for the direct decode path). */
static void put_store(const char* file, const hvds_store_msg_t* msgs, size_t n, size_t cut,
                      int body_only) {
  hvds_store_buf_t b = {0};
  for (size_t i = 0; i < n; i++)
    if (hvds__store_encode(&msgs[i], &b) != HVDS_SUCCESS) g_failed = 1;
  size_t skip = body_only ? HVDS_STORE_HEADER : 0;
  if (g_failed || cut + skip > b.len) g_failed = 1;
  else write_file("fuzz_store_proto", file, b.data + skip, b.len - cut - skip);
  hvds__store_buf_free(&b);
}

static void gen_store(void) {
  hvds_store_msg_t session[] = {
      smsg(HVDS_STORE_MSG_HELLO, "s3cret", NULL, 0),
      smsg(HVDS_STORE_MSG_SET, "rank/0/addr", "10.0.0.1:4242", 0),
      smsg(HVDS_STORE_MSG_GET, "rank/1/addr", NULL, 30000),
      smsg(HVDS_STORE_MSG_ADD, "barrier/0", NULL, 1),
      smsg(HVDS_STORE_MSG_DELETE_PREFIX, "rank/", NULL, 0),
  };
  put_store("client_session", session, 5, 0, 0);
  put_store("client_session_truncated", session, 5, 3, 0);
  hvds_store_msg_t replies[] = {
      smsg(HVDS_STORE_MSG_OK, NULL, NULL, 0),       smsg(HVDS_STORE_MSG_VALUE, NULL, "v", 0),
      smsg(HVDS_STORE_MSG_NOTFOUND, NULL, NULL, 0), smsg(HVDS_STORE_MSG_INT, NULL, NULL, -7),
      smsg(HVDS_STORE_MSG_ERROR, "too many keys", NULL, 0),
      smsg(HVDS_STORE_MSG_DENIED, NULL, NULL, 0),
  };
  put_store("server_replies", replies, 6, 0, 0);
  hvds_store_msg_t edge[] = {
      smsg(HVDS_STORE_MSG_HELLO, "", NULL, 0),
      smsg(HVDS_STORE_MSG_SET, "", "", 0),
      smsg(HVDS_STORE_MSG_GET, "k", NULL, -1),
      smsg(HVDS_STORE_MSG_ADD, "k", NULL, INT64_MIN),
      smsg(HVDS_STORE_MSG_INT, NULL, NULL, INT64_MAX),
  };
  put_store("edge_values", edge, 5, 0, 0);
  char* key = malloc(HVDS_STORE_MAX_KEY + 1);
  if (key == NULL) {
    g_failed = 1;
    return;
  }
  memset(key, 'k', HVDS_STORE_MAX_KEY);
  key[HVDS_STORE_MAX_KEY] = '\0';
  hvds_store_msg_t longest[] = {smsg(HVDS_STORE_MSG_HELLO, "x", NULL, 0),
                                smsg(HVDS_STORE_MSG_SET, key, "value", 0)};
  put_store("max_key", longest, 2, 0, 0);
  free(key);
  put_store("body_set", &session[1], 1, 0, 1);
  put_store("body_get", &session[2], 1, 0, 1);
  // A HELLO whose declared length is far past the HELLO limit: the server must drop it unread.
  static const uint8_t oversized[] = {0x04, 0x00, 0x00, 0x00, HVDS_STORE_MSG_HELLO, 0, 0, 0, 1};
  write_file("fuzz_store_proto", "oversized_length", oversized, sizeof(oversized));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  gen_messages();
  gen_store();
  return g_failed;
}
