/* Scheduling priority of the coordinator thread.
 *
 * The coordinator sleeps nearly all the time and works in short bursts that are on the critical
 * path of every rank: it answers the negotiation, pushes the next segment of a ring onto the wire
 * and reduces what arrived. When the training's compute threads fill every core (torch uses all
 * of them by default, or several ranks share a machine), each burst waits behind a compute
 * thread's time slice, a few milliseconds, once per ring step and per cycle, on every rank. The
 * lowest real-time priority (round-robin, 1) lets the burst run at once; since the thread gives
 * the core back as soon as it waits, compute loses only the microseconds the burst takes, and the
 * kernel's real-time throttling still leaves 5% of every core to other threads. Off by default:
 * a coordinator busy with a large reduction then holds its core against every other process of
 * the machine, which a shared machine may not want. */
#ifndef HVDS_RUNTIME_THREAD_PRIORITY_H_
#define HVDS_RUNTIME_THREAD_PRIORITY_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HVDS_PRIORITY_NORMAL,  /* as created: the default policy, the process's nice value */
  HVDS_PRIORITY_AUTO,    /* real-time round-robin 1 where allowed, else nice -10, else normal */
  HVDS_PRIORITY_REALTIME /* real-time round-robin 1, a warning where not allowed */
} hvds_priority_mode_t;

/* Parses "normal", "auto" or "realtime" (NULL or "" is normal); returns -1 for anything else. */
int hvds__priority_mode_parse(const char* text);
/* The text of a mode, as parse reads it. */
const char* hvds__priority_mode_name(int mode);

/* Applies mode to the calling thread. Writes what the thread now runs at ("real-time
 * round-robin 1", "nice -10", "normal") to got, and, when the mode asked for more than it got,
 * why to why (empty otherwise). Returns 0 when the thread runs as mode asks, -1 otherwise. */
int hvds__priority_raise_self(hvds_priority_mode_t mode, char* got, size_t got_len, char* why,
                              size_t why_len);

/* What a thread runs at, to be put back after a loan (below). */
typedef struct {
  int lent; /* 0: nothing was changed */
  int policy;
  int rt_priority;
  int nice;
} hvds_priority_saved_t;

/* What raise_self obtained, as a level: 0 normal, 1 nice, 2 real-time. */
int hvds__priority_level(const char* got);

/* Lends the calling thread the coordinator's level for as long as it does the coordinator's
 * work (a waiting caller that runs the cycle): a real-time peer that polls or yields while it
 * waits for this thread would otherwise keep the core from it. Does nothing at level 0. */
void hvds__priority_lend(int level, hvds_priority_saved_t* saved);

/* Puts back what lend() changed. */
void hvds__priority_restore(const hvds_priority_saved_t* saved);

/* Asks for real-time round-robin 1 for the calling thread; returns 0 or an errno. Replaceable
 * by tests, which cannot take the privilege away while keeping the one to lower nice. */
extern int (*hvds__priority_set_realtime)(void);

/* Puts the calling thread back to the default policy and nice 0 (for threads the coordinator
 * starts that are not latency-critical, such as the timeline's writer); lowering never needs a
 * privilege. */
void hvds__priority_drop_self(void);

#ifdef __cplusplus
}
#endif

#endif  // HVDS_RUNTIME_THREAD_PRIORITY_H_
