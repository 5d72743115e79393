/* Fuzz target: the negotiation message decoders (request lists and response lists).
 *
 * Both decoders see every input; the 4-byte magic makes at most one of them accept it. Beyond
 * "no crash, no leak", each accepted input must satisfy:
 *   - round trip: the format has exactly one encoding per value, so re-encoding what was decoded
 *     (with the decoded flags) gives back the input byte for byte;
 *   - deep copies (hvds__request_copy / hvds__response_copy) encode the same bytes;
 *   - a decoded response can grow: the decoder sizes names/sizes the way the append helpers
 *     expect, so appending a name and a size after decoding stays in bounds (ASan checks).
 * Allocation from declared lengths is checked by running with -malloc_limit_mb (see `make fuzz`).
 */
#include <string.h>

#include "fuzz.h"
#include "message.h"

static void check_encoding(const hvds_buf_t* b, const uint8_t* data, size_t size) {
  FUZZ_ASSERT(!b->oom);
  FUZZ_ASSERT(b->len == size);
  FUZZ_ASSERT(memcmp(b->data, data, size) == 0);
}

static void check_requests(const uint8_t* data, size_t size) {
  hvds_request_t* reqs = NULL;
  int32_t n = -1, flags = 0;
  if (hvds__decode_requests(data, size, &reqs, &n, &flags) != HVDS_SUCCESS) {
    FUZZ_ASSERT(reqs == NULL && n == 0);
    return;
  }
  FUZZ_ASSERT(reqs != NULL && n >= 0);
  hvds_buf_t b = {0};
  hvds__encode_requests(&b, reqs, n, flags);
  check_encoding(&b, data, size);
  hvds__buf_free(&b);

  hvds_request_t* copies = calloc(n ? (size_t)n : 1, sizeof(*copies));
  FUZZ_ASSERT(copies != NULL);
  for (int32_t i = 0; i < n; i++) FUZZ_ASSERT(hvds__request_copy(&copies[i], &reqs[i]) == 0);
  hvds__encode_requests(&b, copies, n, flags);
  check_encoding(&b, data, size);
  hvds__buf_free(&b);

  for (int32_t i = 0; i < n; i++) {
    hvds__request_free(&copies[i]);
    hvds__request_free(&reqs[i]);
  }
  free(copies);
  free(reqs);
}

static void check_responses(const uint8_t* data, size_t size) {
  hvds_response_t* resps = NULL;
  int32_t n = -1, flags = 0;
  if (hvds__decode_responses(data, size, &resps, &n, &flags) != HVDS_SUCCESS) {
    FUZZ_ASSERT(resps == NULL && n == 0);
    return;
  }
  FUZZ_ASSERT(resps != NULL && n >= 0);
  hvds_buf_t b = {0};
  hvds__encode_responses(&b, resps, n, flags);
  check_encoding(&b, data, size);
  hvds__buf_free(&b);

  hvds_response_t* copies = calloc(n ? (size_t)n : 1, sizeof(*copies));
  FUZZ_ASSERT(copies != NULL);
  for (int32_t i = 0; i < n; i++) FUZZ_ASSERT(hvds__response_copy(&copies[i], &resps[i]) == 0);
  hvds__encode_responses(&b, copies, n, flags);
  check_encoding(&b, data, size);
  hvds__buf_free(&b);

  for (int32_t i = 0; i < n; i++) {
    hvds_response_t* r = &resps[i];
    int32_t nnames = r->nnames, nsizes = r->nsizes;
    FUZZ_ASSERT(hvds__response_add_name(r, "fuzz.appended") == 0);
    FUZZ_ASSERT(hvds__response_add_size(r, 42) == 0);
    FUZZ_ASSERT(r->nnames == nnames + 1 && strcmp(r->names[nnames], "fuzz.appended") == 0);
    FUZZ_ASSERT(r->nsizes == nsizes + 1 && r->sizes[nsizes] == 42);
    hvds__response_free(&copies[i]);
    hvds__response_free(r);
  }
  free(copies);
  free(resps);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_requests(data, size);
  check_responses(data, size);
  return 0;
}
