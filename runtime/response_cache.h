/* Response cache (Horovod's): remembers negotiated allreduce, reducescatter and allgather
 * responses by tensor name. Each cache
 * slot is a bit; in steady state every rank sends only a bit vector of the slots it has ready and
 * one bitwise-AND allreduce replaces the whole negotiation round trip. Every rank puts and erases
 * in the same order, so slot numbers agree across ranks. Coordinator thread only. */
#ifndef HVDS_RESPONSE_CACHE_H_
#define HVDS_RESPONSE_CACHE_H_

#include <stdint.h>

#include "message.h"
#include "name_map.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  char* name;         /* NULL = free slot */
  int32_t type, dtype, reduce_op, device;
  double prescale, postscale;
  int64_t numel;
  int32_t nextra;             /* reducescatter, allgather: the response's shape */
  int32_t extra[HVDS_MAX_DIMS];
  int32_t nsizes;             /* allgather: dim 0 of every rank; reducescatter: numel */
  int64_t* sizes;
  uint64_t last_used; /* LRU tick, identical across ranks */
} hvds_cache_entry_t;

typedef struct {
  hvds_cache_entry_t* entries; /* cap slots; slot index = bit */
  int32_t cap;                 /* 0 disables the cache */
  hvds_name_map_t index;       /* name -> (slot + 1) */
  uint64_t tick;
} hvds_cache_t;

typedef enum { HVDS_CACHE_MISS = 0, HVDS_CACHE_HIT = 1, HVDS_CACHE_INVALID = 2 } hvds_cache_state_t;

void hvds__cache_init(hvds_cache_t* c, int32_t capacity);
void hvds__cache_free(hvds_cache_t* c); /* accepts a zeroed cache */
/* HIT when name is cached with the same parameters (*bit = its slot); INVALID when cached with
 * different ones (*bit = its slot); MISS otherwise. An allgather hits only when this rank's
 * first dimension (req->rank's entry) is the one cached, so when every rank hits, every rank's
 * size is unchanged and the cached response is exact. */
hvds_cache_state_t hvds__cache_lookup(const hvds_cache_t* c, const hvds_request_t* req,
                                      int32_t* bit);
/* Caches name i of a negotiated response (allreduce, reducescatter, allgather); evicts the least recently used slot when
 * full. Returns the slot, or -1 if the cache is disabled or the type is not cacheable. */
int32_t hvds__cache_put(hvds_cache_t* c, const hvds_response_t* resp, int32_t i);
void hvds__cache_touch(hvds_cache_t* c, int32_t bit);
void hvds__cache_erase(hvds_cache_t* c, int32_t bit);
const hvds_cache_entry_t* hvds__cache_get(const hvds_cache_t* c, int32_t bit); /* NULL if free */
/* Builds a single-name response from a cached slot (for the fast path). Returns 0 or -1 (OOM). */
int hvds__cache_response(const hvds_cache_t* c, int32_t bit, hvds_response_t* out);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RESPONSE_CACHE_H_ */
