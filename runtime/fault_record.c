/* A communication failure explained once: what this rank saw, the first fault any rank
 * reported, and the rank it started at, from the store and the launcher's word. */
#include "fault_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_cause.h"
#include "log.h"
#include "p2p.h"
#include "store.h"
#include "store_keys.h"

/* The global rank of the peer whose failure s's communicator saw first, or -1. */
static int fault_peer(const hvds_pset_t* s) {
  hvds_runtime_t* rt = s->rt;
  if (rt->world && rt->world->failed_peer >= 0) return rt->world->failed_peer;
  if (s->comm && s->comm->failed_peer >= 0 && s->comm->failed_peer < s->n && s->ranks)
    return s->ranks[s->comm->failed_peer];
  return -1;
}

/* Builds rt->fatal: what this rank saw, plus the first fault any rank reported and the
 * launcher's word on which process exited. */
void hvds__record_fault(hvds_pset_t* s, hvds_result_t rc) {
  hvds_runtime_t* rt = s->rt;
  if (rt->fatal[0]) return; /* the first failure is the one to explain */
  char seen[600];
  snprintf(seen, sizeof(seen), "rank %d: %s (%s)", rt->rank,
           s->comm && s->comm->error[0] ? s->comm->error : "communication failed",
           hvds_result_str(rc));
  char root[700] = "";
  if (rt->store) {
    char count[256], key[256];
    snprintf(count, sizeof(count), HVDS_KEY_FAULT_COUNT, rt->job);
    snprintf(key, sizeof(key), HVDS_KEY_FAULT, rt->job);
    hvds__store_set_first(rt->store, count, key, seen, strlen(seen), HVDS_STORE_STOPPING_REPLY_MS);
    /* The rank the failure started at, from every failing rank's report (fault_cause.h). */
    snprintf(key, sizeof(key), HVDS_KEY_FAILED, rt->job);
    hvds__fault_root_cause(rt->store, rt->job, rt->generation, rt->rank, rt->size, fault_peer(s),
                           rc, key, root, sizeof(root));
    /* The launcher records which worker exited; give it a moment to notice (seconds on a
     * loaded machine). */
    void* val = NULL;
    size_t len = 0;
    if (root[0] != '\0') {
      // found above
    } else if (hvds__store_get_within(rt->store, key, 2000, HVDS_STORE_STOPPING_REPLY_MS, &val,
                                      &len) == HVDS_SUCCESS) {
      snprintf(root, sizeof(root), " Root cause: %.*s.", (int)len, (char*)val);
      free(val);
    } else {
      snprintf(key, sizeof(key), HVDS_KEY_FAULT, rt->job);
      if (hvds__store_get_within(rt->store, key, 200, HVDS_STORE_STOPPING_REPLY_MS, &val, &len) ==
          HVDS_SUCCESS) {
        snprintf(root, sizeof(root), " First failure reported: %.*s.", (int)len, (char*)val);
        free(val);
      }
    }
  }
  snprintf(rt->fatal, sizeof(rt->fatal), "Communication failed on %s.%s", seen, root);
  HVDS_ERROR("%s", rt->fatal);
}
