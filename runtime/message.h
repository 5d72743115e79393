/* Negotiation messages: what a rank asks for (request) and what every rank then runs (response),
 * with a compact little-endian wire format. The decoder trusts nothing: every length is checked
 * against the bytes actually received before anything is allocated. */
#ifndef HVDS_MESSAGE_H_
#define HVDS_MESSAGE_H_

#include <stddef.h>
#include <stdint.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Horovod's Request/Response type numbering, plus process-set registration. */
typedef enum {
  HVDS_MSG_ALLREDUCE = 0,
  HVDS_MSG_ALLGATHER = 1,
  HVDS_MSG_BROADCAST = 2,
  HVDS_MSG_JOIN = 3,
  HVDS_MSG_ADASUM = 4,
  HVDS_MSG_ALLTOALL = 5,
  HVDS_MSG_BARRIER = 6,
  HVDS_MSG_REDUCESCATTER = 7,
  HVDS_MSG_ERROR = 8,
  HVDS_MSG_PS_ADD = 9,
  HVDS_MSG_PS_REMOVE = 10,
  HVDS_MSG_SPARSE_ALLREDUCE = 11, /* extra: hvds_sparse_meta_t (execute_sparse.c) */
  HVDS_MSG_TYPE_COUNT = 12
} hvds_msg_type_t;

const char* hvds__msg_type_name(int type); /* "ALLREDUCE", ... */

typedef struct {
  int32_t rank;      /* requesting rank, in the process set */
  int32_t type;      /* hvds_msg_type_t */
  int32_t dtype;     /* hvds_dtype_t */
  int32_t root_rank; /* broadcast */
  int32_t device;    /* -1 CPU */
  int32_t reduce_op; /* hvds_reduce_op_t */
  double prescale;
  double postscale;
  int32_t ndim;
  int64_t shape[HVDS_MAX_DIMS];
  int32_t nextra;    /* PS_ADD: rank list; SPARSE_ALLREDUCE: format, index dtype, algorithm */
  int32_t* extra;    /* owned */
  char* name;        /* owned */
} hvds_request_t;

typedef struct {
  int32_t type;             /* hvds_msg_type_t */
  int32_t dtype;
  int32_t reduce_op;
  int32_t root_rank;
  int32_t device;
  int32_t last_joined_rank; /* JOIN */
  double prescale;
  double postscale;
  int32_t nnames;
  char** names;             /* owned; fused responses carry several */
  int32_t nsizes;
  int64_t* sizes;           /* allreduce: elements per name; allgather: dim0 per rank */
  int32_t nextra;
  int32_t* extra;           /* PS_ADD: ranks; ALLGATHER/ALLTOALL/REDUCESCATTER: shape of name 0;
                               SPARSE_ALLREDUCE: as its request's (sizes: dim, row) */
  char* error;              /* ERROR: message */
} hvds_response_t;

/* Deep copies and frees (free accepts NULL and leaves the struct zeroed). */
int hvds__request_copy(hvds_request_t* dst, const hvds_request_t* src);
void hvds__request_free(hvds_request_t* r);
int hvds__response_copy(hvds_response_t* dst, const hvds_response_t* src);
void hvds__response_free(hvds_response_t* r);
/* Appends name (copied) to r->names. Returns 0, or -1 when out of memory. */
int hvds__response_add_name(hvds_response_t* r, const char* name);
/* Appends name without copying: r owns it from now on. */
int hvds__response_take_name(hvds_response_t* r, char* name);
int hvds__response_add_size(hvds_response_t* r, int64_t size);

/* A growable byte buffer for encoding. */
typedef struct {
  uint8_t* data;
  size_t len;
  size_t cap;
  int oom; /* set when an append failed; the buffer is then unusable */
} hvds_buf_t;
void hvds__buf_free(hvds_buf_t* b);

/* Encoders append to b; check b->oom afterwards. */
void hvds__encode_requests(hvds_buf_t* b, const hvds_request_t* reqs, int32_t n, int32_t flags);
void hvds__encode_responses(hvds_buf_t* b, const hvds_response_t* resps, int32_t n,
                            int32_t flags);
/* Decoders: on success *out is a malloc'd array of *n items the caller frees (items with the
 * matching *_free, then the array). Return HVDS_INVALID_ARGUMENT for malformed input, with
 * nothing allocated. Limits: names up to 64 KiB, at most 1<<20 items or sizes per message. */
hvds_result_t hvds__decode_requests(const uint8_t* data, size_t len, hvds_request_t** out,
                                    int32_t* n, int32_t* flags);
hvds_result_t hvds__decode_responses(const uint8_t* data, size_t len, hvds_response_t** out,
                                     int32_t* n, int32_t* flags);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_MESSAGE_H_ */
