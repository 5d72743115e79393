/* Which ranks reached rendezvous, as the launcher's own store records it: every worker ADDs
 * hvds/<job>/arrived and sets hvds/<job>/arrived/<rank> once it has connected. Read in the
 * supervisor's thread, straight from the server's table. */
#ifndef HVDS_LAUNCHER_ARRIVALS_H_
#define HVDS_LAUNCHER_ARRIVALS_H_

#include <stddef.h>
#include <stdint.h>

#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  unsigned char* arrived; /* np flags */
  int np;
  int count;              /* ranks arrived */
  int64_t first_ms;       /* when the launcher first saw a rank arrive; -1 before */
} hvds_arrivals_t;

/* Fills a for np ranks; HVDS_SYSTEM_ERROR when out of memory. Free with hvds__arrivals_free. */
hvds_result_t hvds__arrivals_init(hvds_arrivals_t* a /* OUT */, int np);
/* Reads the job's keys from store; now_ms stamps a first arrival. Returns 1 when more ranks have
 * arrived since the last call. */
int hvds__arrivals_update(hvds_arrivals_t* a, hvds_store_server_t* store, const char* job_id,
                          int64_t now_ms);
/* The ranks not arrived yet, as "3" or "3, 5 and 6" (at most the first 16 named), into out. */
void hvds__arrivals_missing(const hvds_arrivals_t* a, char* out, size_t len);
/* Accepts a zeroed or freed a. */
void hvds__arrivals_free(hvds_arrivals_t* a);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_ARRIVALS_H_ */
