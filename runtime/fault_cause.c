/* Root cause of a communication failure, worked out through the store (fault_cause.h).
 *
 * Each failing rank sets "<job>/g<gen>/blame/<rank>" to "<peer> T" (it timed out waiting for
 * peer), "<peer> C" (peer's connection closed or broke, or a transport passed on another rank's
 * failure naming peer) or "-1 C" (no peer known); a timeout also counts one more in
 * "<job>/g<gen>/timeouts/<peer>". Following those reports from the peer this rank lost:
 *
 *   1 -> 0 -> 3 -> 2     rank 1 saw 0 abort, 0 timed out on 3, 3 timed out on 2, 2 said nothing
 *
 * ends at the rank that reported nothing. If the launcher recorded that rank's exit, that is the
 * cause ("rank 2 exited with signal 9"); if some rank timed out waiting for it, it stopped
 * responding; otherwise it closed its connections without a word. A rank that reports is only a
 * link, even when it exited afterwards (its report is written before it exits).
 *
 * The reports can loop back: a rank still waiting for a hung peer may be aborted by a neighbour
 * whose own wait (on it) timed out first, and then it reports that neighbour. Every report also
 * counts in "<job>/g<gen>/reported"; when the chain is inconclusive, the ranks that have not
 * reported once the others have (or after a second) are the cause.
 *
 * A rank found unresponsive (timed out on, or silent while every other rank failed) is also
 * written to "hvds/<job>/silent": an elastic launcher ends that worker, whose process may still
 * run (hung, or cut off the network), so that the job can re-form without it. */
#include "fault_cause.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "store_keys.h"

#define POLL_MS 20
/* How long a rank that was timed out on gets to publish its own report: the ranks of a chain
 * time out at about the same moment, the one nearest the cause first. */
#define REPORT_WAIT_MS 1000
/* How long a rank whose connection closed gets to report, or the launcher to record its exit
 * (seconds on a loaded machine). */
#define EXIT_WAIT_MS 2000
/* How long any one store request may go unanswered (a request that times out breaks the
 * connection, and every later one fails at once). */
#define REPLY_MS HVDS_STORE_STOPPING_REPLY_MS

static void sleep_ms(int ms) {
  struct timespec ts = {0, (long)ms * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Rank r's report, without waiting: 1 and *peer, *kind when there is one. */
static int report_of(hvds_store_t* st, const char* prefix, int r, int* peer, char* kind) {
  char key[320];
  snprintf(key, sizeof(key), HVDS_KEY_BLAME, prefix, r);
  void* val = NULL;
  size_t len = 0;
  if (hvds__store_get_within(st, key, 0, REPLY_MS, &val, &len) != HVDS_SUCCESS) return 0;
  int ok = sscanf((const char*)val, "%d %c", peer, kind) == 2;
  free(val);
  return ok;
}

/* 1 when the launcher recorded that rank r exited; its words go to text. */
static int exit_of(hvds_store_t* st, const char* launcher_key, int r, char* text, size_t len) {
  if (launcher_key == NULL) return 0;
  void* val = NULL;
  size_t n = 0;
  if (hvds__store_get_within(st, launcher_key, 0, REPLY_MS, &val, &n) != HVDS_SUCCESS) return 0;
  int who = -1;
  int ok = sscanf((const char*)val, "rank %d", &who) == 1 && who == r;
  if (ok) snprintf(text, len, "%.*s", (int)n, (const char*)val);
  free(val);
  return ok;
}

/* How many ranks reported timing out waiting for rank r (0 when none or unknown). */
static int64_t timeouts_on(hvds_store_t* st, const char* prefix, int r) {
  char key[320];
  snprintf(key, sizeof(key), HVDS_KEY_TIMEOUTS, prefix, r);
  int64_t n = 0;
  return hvds__store_add_within(st, key, 0, &n, REPLY_MS) == HVDS_SUCCESS ? n : 0;
}

/* Records rank r as unresponsive for the launcher (store_keys.h: HVDS_KEY_SILENT). */
static void mark_silent(hvds_store_t* st, const char* job, int r) {
  char key[320], val[16];
  snprintf(key, sizeof(key), HVDS_KEY_SILENT, job);
  int len = snprintf(val, sizeof(val), "%d", r);
  hvds__store_set_within(st, key, val, (size_t)len, REPLY_MS);
}

typedef enum { LINK, EXITED, SILENT } verdict_t;

/* Waits for rank r's report (LINK, *peer and *kind set) or the launcher's record of its exit
 * (EXITED, text set); SILENT when neither came in time. The time is REPORT_WAIT_MS once some rank
 * timed out waiting for r (*timeouts > 0 then), EXIT_WAIT_MS otherwise. */
static verdict_t hear_from(hvds_store_t* st, const char* prefix, const char* launcher_key, int r,
                           int* peer, char* kind, int64_t* timeouts, char* text, size_t len) {
  int64_t start = hvds__now_ms();
  for (;;) {
    if (report_of(st, prefix, r, peer, kind)) return LINK;
    if (exit_of(st, launcher_key, r, text, len)) return EXITED;
    if (*timeouts == 0) *timeouts = timeouts_on(st, prefix, r);
    int64_t wait = *timeouts > 0 ? REPORT_WAIT_MS : EXIT_WAIT_MS;
    if (hvds__now_ms() - start >= wait || hvds__store_lost(st) != NULL) return SILENT;
    sleep_ms(POLL_MS);
  }
}

/* Publishes this rank's report; returns 0 when the store failed. */
static int publish(hvds_store_t* store, const char* prefix, int rank, int peer, char edge) {
  char key[320], val[32];
  int64_t n;
  snprintf(key, sizeof(key), HVDS_KEY_BLAME, prefix, rank);
  snprintf(val, sizeof(val), "%d %c", peer, edge);
  if (hvds__store_set_within(store, key, val, strlen(val), REPLY_MS) != HVDS_SUCCESS) return 0;
  snprintf(key, sizeof(key), HVDS_KEY_REPORTED, prefix);
  hvds__store_add_within(store, key, 1, &n, REPLY_MS);
  if (edge == 'T' && peer >= 0) {
    snprintf(key, sizeof(key), HVDS_KEY_TIMEOUTS, prefix, peer);
    hvds__store_add_within(store, key, 1, &n, REPLY_MS);
  }
  return 1;
}

/* Follows the reports from peer (lost with edge) until a rank that reported nothing; writes the
 * verdict to out, or leaves it empty when the reports loop back (a rank aborted by a peer before
 * its own wait timed out reports that peer, not the rank it was waiting for). */
static void follow(hvds_store_t* store, const char* job, const char* prefix,
                   const char* launcher_key, int rank, int size, int peer, char edge, char* out,
                   size_t outlen) {
  unsigned char* seen = calloc((size_t)size, 1);
  if (seen == NULL) return;
  seen[rank] = 1;
  char chain[200], text[256];
  int used = snprintf(chain, sizeof(chain), "%d", rank);
  for (int cur = peer; cur >= 0 && cur < size && !seen[cur];) {
    seen[cur] = 1;
    if (used < (int)sizeof(chain))
      used += snprintf(chain + used, sizeof(chain) - (size_t)used, " -> %d", cur);
    int next = -1;
    char kind = 'C';
    int64_t timeouts = edge == 'T';  // this rank's own timeout counts before the store has it
    verdict_t v = hear_from(store, prefix, launcher_key, cur, &next, &kind, &timeouts, text,
                            sizeof(text));
    if (v == SILENT) {  // the count may have grown since it was first read
      int64_t now = timeouts_on(store, prefix, cur);
      if (now > timeouts) timeouts = now;
    }
    if (v == EXITED)
      snprintf(out, outlen, " Root cause: %s (failures followed: %s).", text, chain);
    else if (v == SILENT && timeouts > 0) {
      mark_silent(store, job, cur);
      snprintf(out, outlen,
               " Root cause: rank %d stopped responding: %lld rank%s timed out waiting for it and "
               "it reported no error of its own (stopped or hung?; failures followed: %s).",
               cur, (long long)timeouts, timeouts == 1 ? "" : "s", chain);
    } else if (v == SILENT)
      snprintf(out, outlen,
               " Root cause: rank %d closed its connections without reporting an error (did it "
               "die?; failures followed: %s).", cur, chain);
    if (v != LINK) break;
    cur = next;
    edge = kind;
  }
  free(seen);
}

/* When the reports loop back: waits up to REPORT_WAIT_MS for every other rank to report, then
 * names the ranks that did not (at most a few; only for jobs of up to SCAN_MAX_RANKS, since it
 * reads one key per rank). */
#define SCAN_MAX_RANKS 1024
#define SILENT_MAX 4
static void find_silent(hvds_store_t* store, const char* job, const char* prefix,
                        const char* launcher_key, int size, char* out, size_t outlen) {
  if (size > SCAN_MAX_RANKS) return;
  char key[320];
  snprintf(key, sizeof(key), HVDS_KEY_REPORTED, prefix);
  int64_t start = hvds__now_ms(), reported = 0;
  while (hvds__store_add_within(store, key, 0, &reported, REPLY_MS) == HVDS_SUCCESS &&
         reported < size - 1 &&
         hvds__now_ms() - start < REPORT_WAIT_MS)
    sleep_ms(POLL_MS);
  int silent[SILENT_MAX], n = 0, peer;
  char kind;
  for (int r = 0; r < size; r++)
    if (!report_of(store, prefix, r, &peer, &kind) && n++ < SILENT_MAX) silent[n - 1] = r;
  if (n == 0 || n > SILENT_MAX) return;
  char names[64] = "", text[256];
  if (n == 1 && exit_of(store, launcher_key, silent[0], text, sizeof(text))) {
    snprintf(out, outlen, " Root cause: %s.", text);
    return;
  }
  if (n == 1) mark_silent(store, job, silent[0]);
  for (int i = 0, used = 0; i < n; i++)
    used += snprintf(names + used, sizeof(names) - (size_t)used, "%s%d",
                     i == 0 ? "" : i == n - 1 ? " and " : ", ", silent[i]);
  snprintf(out, outlen,
           " Root cause: rank%s %s reported no error while every other rank failed (stopped, "
           "hung or cut off?).", n == 1 ? "" : "s", names);
}

void hvds__fault_root_cause(hvds_store_t* store, const char* job, int generation, int rank,
                            int size, int peer, hvds_result_t rc, const char* launcher_key,
                            char* out, size_t outlen) {
  out[0] = '\0';
  if (store == NULL || size <= 0) return;
  char prefix[256];
  snprintf(prefix, sizeof(prefix), HVDS_KEY_GEN, job, generation);
  if (peer < 0 || peer >= size || peer == rank) peer = -1;
  char edge = rc == HVDS_TIMEOUT ? 'T' : 'C';
  if (!publish(store, prefix, rank, peer, edge)) return;
  if (peer >= 0) follow(store, job, prefix, launcher_key, rank, size, peer, edge, out, outlen);
  if (out[0] == '\0') find_silent(store, job, prefix, launcher_key, size, out, outlen);
}
