/* Timeline: a Chrome trace (JSON array) of what the coordinator did with each tensor, in the
 * format Horovod's timeline uses, so the same viewers and scripts work.
 *
 * Each tensor name is a trace "process" (pid = 1-based index in order of first use) that gets
 * process_name and process_sort_index metadata on first use. Per tensor the coordinator emits
 *   B "NEGOTIATE_<REQ>"  X "<rank>" per ready rank  E
 *   B "<RESP>"  ( B "<ACTIVITY>" E )*  E {"dtype":..,"shape":..}
 * Timestamps are microseconds since open; the first event carries
 * start_time_since_epoch_in_micros.
 *
 * Threading: the event calls only format into a memory buffer under a mutex; a writer thread
 * owns the file and flushes about every 100 ms, or sooner when the buffer grows. After open and
 * after every flush the file is a complete JSON array ending in "]"; flushes hold flock(LOCK_EX)
 * on the file, so a reader that takes flock(LOCK_SH) never sees one half written (a reader
 * without the lock may, for the microseconds a flush takes). On a write error the
 * timeline logs one warning, stops writing, keeps the last complete content and counts the
 * events it drops from then on; buffered memory is capped the same way. Training never blocks
 * on the timeline and never fails because of it. */
#ifndef HVDS_TIMELINE_H_
#define HVDS_TIMELINE_H_

#include <stddef.h>

#include "clock.h"
#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_timeline hvds_timeline_t;

/* Creates or truncates the file at path, writes the opening metadata so the file is valid
 * JSON at once, and starts the writer thread. mark_cycles != 0 enables CYCLE_START markers.
 * On success *out (OUT) owns the timeline; release it with hvds__timeline_close().
 * On failure returns HVDS_INVALID_ARGUMENT (NULL or empty path, a directory, a pipe or socket)
 * or HVDS_SYSTEM_ERROR (open, write or thread creation failed), writes a message naming the
 * path and the reason into err (when err != NULL and errlen > 0), and leaves *out NULL.
 * Does file I/O; call it off the hot path. */
hvds_result_t hvds__timeline_open(const char* path, int mark_cycles, hvds_timeline_t** out,
                                  char* err, size_t errlen);

/* The event calls below never do file I/O and never fail: a NULL timeline, a timeline that
 * hit a write error, or a full buffer makes them no-ops (the last two count dropped events).
 * They may be called from any thread; the coordinator thread is the intended caller.
 * tensor is the tensor name; any bytes are allowed, they are escaped for JSON. */

/* B "NEGOTIATE_<req_type>", e.g. req_type "ALLREDUCE" gives "NEGOTIATE_ALLREDUCE". */
void hvds__timeline_negotiate_start(hvds_timeline_t* tl, const char* tensor, const char* req_type);
/* X event of zero duration named by the rank number ("0", "1", ...) that reported ready. */
void hvds__timeline_negotiate_rank_ready(hvds_timeline_t* tl, const char* tensor, int rank);
/* E closing the negotiation; a no-op when the tensor is not negotiating. */
void hvds__timeline_negotiate_end(hvds_timeline_t* tl, const char* tensor);

/* B "<resp_type>" (e.g. "ALLREDUCE") opening the operation. args_json, when not NULL or empty,
 * must be a JSON object (e.g. {"algorithm":"ring"}) and is copied verbatim as the event's
 * args. An unfinished negotiation of the tensor is closed first. */
void hvds__timeline_start(hvds_timeline_t* tl, const char* tensor, const char* resp_type,
                          const char* args_json);
/* B "<activity>" (e.g. "MEMCPY_IN_FUSION_BUFFER") nested in the operation; an activity still
 * open on the tensor is ended first. */
void hvds__timeline_activity_start(hvds_timeline_t* tl, const char* tensor, const char* activity);
/* E closing the current activity; a no-op when none is open. */
void hvds__timeline_activity_end(hvds_timeline_t* tl, const char* tensor);
/* X "<activity>" nested in the operation, for an activity whose name is known only once it is
 * over: it began at start_s and ended at end_s (CLOCK_MONOTONIC seconds, as hvds__now()).
 * args_json as for hvds__timeline_start. An activity still open on the tensor is ended first. */
void hvds__timeline_activity_span(hvds_timeline_t* tl, const char* tensor, const char* activity,
                                  double start_s, double end_s, const char* args_json);
/* Final E of the operation with args {"dtype":dtype_name,"shape":shape_text}, e.g.
 * "FLOAT32" and "[3, 4]" (either may be NULL). Ends an open activity first. */
void hvds__timeline_end(hvds_timeline_t* tl, const char* tensor, const char* dtype_name,
                        const char* shape_text);

/* Instant event {"ph":"i","name":"CYCLE_START","ts":..,"s":"g"}; only when opened with
 * mark_cycles. */
void hvds__timeline_mark_cycle(hvds_timeline_t* tl);

/* Stops the writer after a last flush, closes the file (left as valid JSON) and frees tl.
 * Blocks for at most one flush. Accepts NULL; cannot fail. */
void hvds__timeline_close(hvds_timeline_t* tl);

/* Events dropped so far because of a write error or the memory cap (0 for NULL). Any thread. */
int hvds__timeline_dropped(hvds_timeline_t* tl);

/* Test only: overrides the flush threshold and the cap on buffered bytes (0 keeps a value).
 * Call right after open. */
void hvds__timeline_set_limits(hvds_timeline_t* tl, size_t flush_bytes, size_t max_buffered);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_TIMELINE_H_ */
