/* Stall inspector (set rank 0): names the ranks that have not submitted tensors the others are
 * waiting on, and after the shutdown time fails those tensors on every rank instead of hanging. */
#include "stall.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "param.h"
#include "table.h"

#define MAX_NAMES_SHOWN 6

/* Appends "rank: [a, b, ...]" lines for every rank missing from a stalled record. */
static size_t describe(hvds_pset_t* s, double now, double limit, char* out, size_t len) {
  size_t off = 0;
  for (int32_t r = 0; r < s->n && off < len; r++) {
    int shown = 0, total = 0;
    for (size_t i = 0; i < s->table.cap; i++) {
      if (!hvds__name_map_live(&s->table, i)) continue;
      hvds_table_rec_t* rec = s->table.slots[i].value;
      if (now - rec->first_seen < limit || rec->reqs[r].name != NULL) continue;
      if (s->joined_ranks[r]) continue;
      if (total == 0) off += (size_t)snprintf(out + off, len - off, "%d: [", s->ranks[r]);
      if (shown < MAX_NAMES_SHOWN && off < len)
        off += (size_t)snprintf(out + off, len - off, "%s%s", shown ? ", " : "",
                                s->table.slots[i].key);
      shown += shown < MAX_NAMES_SHOWN;
      total++;
    }
    if (total > MAX_NAMES_SHOWN && off < len) off += (size_t)snprintf(out + off, len - off, " ...");
    if (total > 0 && off < len) off += (size_t)snprintf(out + off, len - off, "]\n");
  }
  return off;
}

/* Fails the tensor in table slot i everywhere: the ranks that submitted it get msg. */
static void fail_record(hvds_pset_t* s, size_t i, const char* msg, hvds_response_t** resps,
                        int32_t* nresps, int32_t* cap) {
  hvds_table_rec_t* rec = s->table.slots[i].value;
  hvds_response_t* r = hvds__resp_push(resps, nresps, cap);
  if (r == NULL) return;
  r->type = HVDS_MSG_ERROR;
  hvds__response_add_name(r, s->table.slots[i].key);
  r->error = strdup(msg);
  for (int32_t k = 0; k < s->n; k++) hvds__request_free(&rec->reqs[k]);
  free(rec->reqs);
  free(rec);
  hvds__name_map_remove(&s->table, s->table.slots[i].key);
}

/* Every rank waits for tensors that only some ranks submitted and nothing finishes anywhere:
 * no rank is left to submit the rest, so every waiting tensor fails now. */
static void end_deadlock(hvds_pset_t* s, double now, hvds_response_t** resps, int32_t* nresps,
                         int32_t* cap) {
  char msg[8192];
  size_t off = (size_t)snprintf(
      msg, sizeof(msg),
      "Deadlock: every rank of process set %d has waited more than %d seconds for tensors that "
      "other ranks have not submitted, and no operation is finishing on any rank. Missing "
      "ranks:\n",
      s->id, (int)s->rt->deadlock_s);
  off += describe(s, now, 0.0, msg + off, sizeof(msg) - off);
  if (off < sizeof(msg))
    snprintf(msg + off, sizeof(msg) - off,
             "HVDSPARSE_DEADLOCK_SHUTDOWN_SECONDS sets this time (0 waits forever).");
  HVDS_ERROR("%s", msg);
  for (size_t i = 0; i < s->table.cap; i++)
    if (hvds__name_map_live(&s->table, i)) fail_record(s, i, msg, resps, nresps, cap);
}

void hvds__stall_check(hvds_pset_t* s, hvds_response_t** resps, int32_t* nresps, int32_t* cap) {
  if (s->table.count == 0) return;
  double now = hvds__now();
  if (s->all_stuck) {
    end_deadlock(s, now, resps, nresps, cap);
    return;
  }
  if (hvds__param_int(HVDS_PARAM_STALL_CHECK_DISABLE) > 0) return;
  double warn = hvds__param_dbl(HVDS_PARAM_STALL_CHECK_TIME_SECONDS);
  double stop = hvds__param_dbl(HVDS_PARAM_STALL_SHUTDOWN_TIME_SECONDS);
  if (stop > 0 && stop < warn) stop = warn;
  if (now - s->last_stall_check < (warn < 1.0 ? warn : 1.0)) return;
  s->last_stall_check = now;

  int any_new = 0, any_fatal = 0;
  for (size_t i = 0; i < s->table.cap; i++) {
    if (!hvds__name_map_live(&s->table, i)) continue;
    hvds_table_rec_t* rec = s->table.slots[i].value;
    double age = now - rec->first_seen;
    if (age >= warn && !rec->warned) any_new = 1;
    if (stop > 0 && age >= stop) any_fatal = 1;
  }
  if (!any_new && !any_fatal) return;

  char msg[8192];
  size_t off = (size_t)snprintf(
      msg, sizeof(msg),
      "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
      "ranks and are waiting for remainder of ranks for more than %d seconds. This may indicate "
      "that different ranks are trying to submit different tensors or that only subset of ranks "
      "is submitting tensors, which will cause deadlock. \nMissing ranks:\n", (int)warn);
  off += describe(s, now, warn, msg + off, sizeof(msg) - off);
  if (any_fatal && off < sizeof(msg))
    snprintf(msg + off, sizeof(msg) - off,
             "One or more rank (marked by \"!\") is stalled for longer than %d seconds. Will "
             "shutdown.", (int)stop);
  if (any_fatal) HVDS_ERROR("%s", msg); else HVDS_WARN("%s", msg);

  for (size_t i = 0; i < s->table.cap; i++) {
    if (!hvds__name_map_live(&s->table, i)) continue;
    hvds_table_rec_t* rec = s->table.slots[i].value;
    double age = now - rec->first_seen;
    if (age >= warn) rec->warned = 1;
    if (stop > 0 && age >= stop) fail_record(s, i, msg, resps, nresps, cap);
  }
}
