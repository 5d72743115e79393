/* Allreduce straight through the shared segment (no rings, no messages).
 *
 * Algorithm: the buffer is processed in rounds of half a slot per rank (count elements in
 * rounds of C = coll_bytes / 2 bytes); round R uses half R % 2 of every rank's slot, so one
 * round's copy-in overlaps the previous round's copy-out on slower ranks. In round R rank r:
 *   0. waits until every rank copied out round R-2 (it used the same half);
 *   1. copies its input for the round into its slot, except part r (1/P of the round, element
 *      granularity), which only it reads; publishes arrived = R+1;
 *   2. waits for every rank's arrival, then reduces part r in blocks that stay in the cache:
 *      its own input's block, then every rank's slot in the order r+1, ..., r-1, into its own
 *      slot, and copies the block to its output; publishes reduced = R+1;
 *   3. copies every other part q of the result out of rank q's slot (waiting for its
 *      reduction), publishes done = R+1.
 * Per round: 3 publications per rank and no message; each byte is copied in once (its own part
 * not at all), read once by its reducer, copied out by every other rank: about 2 + 1 + 2 = 5
 * passes per rank over the buffer less 2/P, against about 8 for a ring over the rings (two
 * copies per hop).
 * Preconditions: op commutative and associative; identical count, dtype and op everywhere.
 * Results are identical on every rank: each part is reduced by one rank and copied by all.
 *
 * Slot ownership for P = 3 after each step of one round ("s1" = rank 1's input, "Σ" = the
 * reduction of the part over every rank):
 *
 *   step | slot of rank 0      | slot of rank 1      | slot of rank 2
 *   -----+---------------------+---------------------+--------------------
 *    1   | -- s0 s0            | s1 -- s1            | s2 s2 --
 *    2   | Σ  s0 s0            | s1 Σ  s1            | s2 s2 Σ
 *    3   | every rank copies part q from rank q's slot, q its own excepted
 *
 * Slot writes (steps 1 and 2) go through the caches or stream to memory, per allreduce size as
 * measured (shm_store_kind.h); streamed, step 2 reduces each block in a buffer of its own and
 * streams it to the slot, and a fence precedes each publication.
 *
 * Small rounds (up to 128 KiB; 4 KiB with more ranks than cores) skip step 2's publication:
 * every rank waits for every arrival and reduces the whole round itself, in rank order, from the
 * slots: one synchronisation instead of two, for P reads of a small buffer.
 *
 * Waiting: a wait polls (hvds__shm_coll_poll_default, or the transport's poll time for a
 * negotiation), then sleeps on its futex saying whose counter it waits for; a publication wakes
 * only the peers that wait for it. A sleeping wait checks the awaited rank's liveness and the
 * communicator's timeout.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "collectives.h"
#include "clock.h"
#include "copy.h"
#include "reduce.h"
#include "shm_internal.h"

/* Rounds up to this many bytes skip the reduced stage (see direct_rest). */
#define SHM_COLL_DIRECT_MAX ((size_t)128 << 10)
/* The same with more ranks than cores, where the processors' total work bounds the time: the
 * direct rest reduces every round P times over (once per rank), and from 4 KiB on that costs
 * more than the reduced stage's second synchronisation (np 4 on 2 cores, 16 KiB: 25 against
 * 32 us; 64 KiB: 36-40 against 43-58 us, medians of 5 runs). */
#define SHM_COLL_DIRECT_MAX_SHARED ((size_t)4 << 10)

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Which counter of shm_ctrl_t a wait is on. */
typedef enum { ARRIVED, REDUCED, DONE } stage_t;

static _Atomic uint64_t* counter(shm_t* s, int q, stage_t st) {
  shm_ctrl_t* c = &s->ctrl[q];
  return st == ARRIVED ? &c->arrived : st == REDUCED ? &c->reduced : &c->done;
}

static const char* stage_name(stage_t st) {
  return st == ARRIVED ? "copy its input in" : st == REDUCED ? "reduce its part" : "copy out";
}

/* The sleeping value of a rank that waits for rank q's counter st (1 means "anything"). */
static int32_t waiting_for(int q, stage_t st) { return 2 + q * 4 + (int32_t)st; }

/* Publishes this rank's counter and wakes the peers that sleep waiting for it (or for anything):
 * a peer waiting for another rank would only wake up to sleep again, which on a loaded host
 * costs a context switch each. */
static void publish(shm_t* s, stage_t st, uint64_t value) {
  int me = s->p->rank;
  atomic_store_explicit(counter(s, me, st), value, memory_order_release);
  atomic_thread_fence(memory_order_seq_cst);  // before reading the peers' sleeping flags
  for (int q = 0; q < s->p->size; q++) {
    int32_t v = q == me ? 0 : atomic_load(&s->ctrl[q].sleeping);
    if (v == 1 || v == waiting_for(me, st)) hvds__shm_wake(s, q, 1);
  }
}

/* After a sleep: fails when rank q died or closed, or the timeout passed, before it got to
 * target. */
static hvds_result_t check_after_sleep(shm_t* s, int q, stage_t st, uint64_t target,
                                       int64_t deadline, int64_t* last_check) {
  if (atomic_load_explicit(counter(s, q, st), memory_order_acquire) >= target) return HVDS_SUCCESS;
  hvds_result_t rc = hvds__shm_check_remote(s);  // a published failure explains the rest
  if (rc != HVDS_SUCCESS) return rc;
  int64_t now = hvds__now_us();
  int dead = 0;
  if (now - *last_check >= SHM_LIVENESS_MS * 1000) {
    *last_check = now;
    dead = hvds__shm_peer_dead(s, q);
  }
  int closed = atomic_load(&s->ctrl[q].state) == SHM_STATE_CLOSED;
  // What q published before it went counts: read its counter after its state.
  if ((dead || closed) && atomic_load_explicit(counter(s, q, st), memory_order_acquire) >= target)
    return HVDS_SUCCESS;
  if (dead)
    return hvds__shm_fail(s, HVDS_REMOTE_ERROR, q,
                          "rank %d (pid %d) exited without closing the shared memory "
                          "communicator",
                          q, (int)atomic_load(&s->ctrl[q].pid));
  if (closed)
    return hvds__shm_fail(s, HVDS_REMOTE_ERROR, q,
                          "rank %d closed the shared memory communicator during an allreduce", q);
  if (deadline > 0 && now >= deadline)
    return hvds__shm_fail(s, HVDS_TIMEOUT, q, "timed out after %d ms waiting for rank %d to %s",
                          s->p->timeout_ms, q, stage_name(st));
  return HVDS_SUCCESS;
}

/* Waits until rank q's counter st reaches target. */
static hvds_result_t wait_for(shm_t* s, int q, stage_t st, uint64_t target) {
  _Atomic uint64_t* c = counter(s, q, st);
  if (atomic_load_explicit(c, memory_order_acquire) >= target) return HVDS_SUCCESS;
  int64_t start = hvds__now_us(), last_check = start;
  int64_t poll_until = start + s->wait_poll_us;
  int64_t deadline = s->p->timeout_ms > 0 ? start + (int64_t)s->p->timeout_ms * 1000 : 0;
  for (;;) {
    if (atomic_load_explicit(c, memory_order_acquire) >= target) return HVDS_SUCCESS;
    hvds_result_t rc = hvds__shm_check_remote(s);
    if (rc != HVDS_SUCCESS) return rc;
    if (hvds__now_us() < poll_until) {
      if (s->yield) {
        sched_yield();
      } else {
        CPU_RELAX();
      }
      continue;
    }
    uint32_t seq = atomic_load(&s->me->wake_seq);
    // seq_cst: the publisher sees what we wait for, or we see its value.
    atomic_store(&s->me->sleeping, waiting_for(q, st));
    if (atomic_load_explicit(c, memory_order_acquire) < target &&
        atomic_load(&s->hdr->failed) == 0) {
      int64_t ms = SHM_LIVENESS_MS;
      if (deadline > 0 && (deadline - hvds__now_us()) / 1000 < ms)
        ms = (deadline - hvds__now_us()) / 1000;
      hvds__shm_sleep(s, seq, (int)(ms > 0 ? ms : 1));
    }
    atomic_store(&s->me->sleeping, 0);
    rc = check_after_sleep(s, q, st, target, deadline, &last_check);
    if (rc != HVDS_SUCCESS) return rc;
  }
}

static char* slot(shm_t* s, int q, uint64_t round) {
  return s->coll + (size_t)q * s->coll_bytes + (size_t)(round % 2) * (s->coll_bytes / 2);
}

/* The caller's tensors as one byte range [0, total): piece i covers the next pieces[i].bytes. A
 * round copies its range in from the inputs and the result out to the outputs, so a fused
 * allreduce needs no fusion buffer: each byte is copied in once and out once. */
typedef struct {
  const hvds_coll_piece_t* v;
  int n;
} pieces_t;

/* Runs body for every piece's part of [off, off + len) with pc (the piece), in_piece (offset in
 * it), bytes and in_range (offset in [off, off + len)). body must not break or continue. */
#define FOR_PIECES(L, off, len, body)                                           \
  do {                                                                          \
    size_t at_ = 0;                                                             \
    for (int i_ = 0; i_ < (L)->n && at_ < (off) + (len); i_++) {                \
      size_t b_ = (L)->v[i_].bytes;                                             \
      size_t lo_ = (off) > at_ ? (off) : at_;                                   \
      size_t hi_ = (off) + (len) < at_ + b_ ? (off) + (len) : at_ + b_;         \
      if (hi_ > lo_) {                                                          \
        const hvds_coll_piece_t* pc = &(L)->v[i_];                              \
        size_t in_piece = lo_ - at_, bytes = hi_ - lo_, in_range = lo_ - (off); \
        body;                                                                   \
      }                                                                         \
      at_ += b_;                                                                \
    }                                                                           \
  } while (0)

static void gather(const pieces_t* L, size_t off, size_t len, char* dst) {
  FOR_PIECES(L, off, len, {
    if (pc->in != NULL)
      hvds__copy(dst + in_range, (const char*)pc->in + in_piece, bytes);
    else
      memset(dst + in_range, 0, bytes);  // a rank without this tensor contributes zeros
  });
}

/* gather() into this rank's slot, with the stores of the running allreduce's kind. */
static void gather_to_slot(shm_t* s, const pieces_t* L, size_t off, size_t len, char* dst) {
  if (s->store_kind != HVDS_STORE_STREAMED) {
    gather(L, off, len, dst);
    return;
  }
  FOR_PIECES(L, off, len, {
    if (pc->in != NULL)
      hvds__stream_copy(dst + in_range, (const char*)pc->in + in_piece, bytes);
    else
      memset(dst + in_range, 0, bytes);
  });
}

static void scatter(const pieces_t* L, size_t off, size_t len, const char* src) {
  FOR_PIECES(L, off, len, {
    if (pc->out != NULL) hvds__copy((char*)pc->out + in_piece, src + in_range, bytes);
  });
}

/* Bytes of output a small round reduces from every slot before it moves on: small enough to
 * stay in the first-level cache while the P slots are added into it. */
#define DIRECT_BLOCK_BYTES ((size_t)8 << 10)

/* The rest of a small round: every rank reduces the whole round itself, from every slot in rank
 * order (so every rank computes identical bits), into the outputs, which spares the wait for the
 * reducers. The output is reduced block by block, so it is written to memory once rather than
 * once per rank. */
static hvds_result_t direct_rest(shm_t* s, const pieces_t* L, size_t off, size_t n, size_t esz,
                                 hvds_dtype_t dtype, hvds_reduce_op_t op, uint64_t R) {
  hvds_result_t rc = HVDS_SUCCESS;
  int P = s->p->size;
  for (int q = 0; q < P && rc == HVDS_SUCCESS; q++) rc = wait_for(s, q, ARRIVED, R + 1);
  if (rc != HVDS_SUCCESS) return rc;
  size_t block = DIRECT_BLOCK_BYTES / esz * esz;
  FOR_PIECES(L, off, n * esz, {
    char* to = (char*)pc->out;
    for (size_t b = 0; to != NULL && b < bytes && rc == HVDS_SUCCESS; b += block) {
      size_t len = bytes - b < block ? bytes - b : block;
      hvds__copy(to + in_piece + b, slot(s, 0, R) + in_range + b, len);
      for (int q = 1; q < P && rc == HVDS_SUCCESS; q++)
        rc = hvds__reduce(to + in_piece + b, slot(s, q, R) + in_range + b, len / esz, dtype, op);
    }
  });
  if (rc == HVDS_SUCCESS) publish(s, DONE, R + 1);
  return rc;
}

/* One round: n elements starting at byte off of the pieces. */
static hvds_result_t one_round(shm_t* s, const pieces_t* L, size_t off, size_t n, size_t esz,
                               hvds_dtype_t dtype, hvds_reduce_op_t op) {
  int P = s->p->size, me = s->p->rank;
  uint64_t R = s->round++;
  hvds_result_t rc = HVDS_SUCCESS;
  // 0. The half this round writes was last read in round R-2.
  for (int q = 0; q < P && R >= 2 && rc == HVDS_SUCCESS; q++) rc = wait_for(s, q, DONE, R - 1);
  if (rc != HVDS_SUCCESS) return rc;
  char* mine = slot(s, me, R);
  if (n * esz <= (s->yield ? SHM_COLL_DIRECT_MAX_SHARED : SHM_COLL_DIRECT_MAX)) {
    gather(L, off, n * esz, mine);  // 1. Copy in.
    publish(s, ARRIVED, R + 1);
    return direct_rest(s, L, off, n, esz, dtype, op, R);
  }
  // 1. Copy in the parts the other ranks reduce; this rank's own part is read from its input.
  size_t lo = n * (size_t)me / (size_t)P, hi = n * (size_t)(me + 1) / (size_t)P;
  gather_to_slot(s, L, off, lo * esz, mine);
  gather_to_slot(s, L, off + hi * esz, (n - hi) * esz, mine + hi * esz);
  hvds__store_fence();
  publish(s, ARRIVED, R + 1);
  // 2. Reduce part `me`, block by block so that each block stays in the cache: this rank's
  // input, then every other rank's slot starting after this rank, into this rank's slot for the
  // others and into its own output.
  for (int k = 1; k < P && rc == HVDS_SUCCESS; k++) rc = wait_for(s, (me + k) % P, ARRIVED, R + 1);
  if (rc != HVDS_SUCCESS) return rc;
  size_t block = SHM_REDUCE_BLOCK_BYTES / esz * esz;
  int streamed = s->store_kind == HVDS_STORE_STREAMED;
  for (size_t b = lo * esz; b < hi * esz && rc == HVDS_SUCCESS; b += block) {
    size_t len = hi * esz - b < block ? hi * esz - b : block;
    char* acc = streamed ? s->block : mine + b;  // streamed: reduced here, then streamed
    gather(L, off + b, len, acc);
    for (int k = 1; k < P && rc == HVDS_SUCCESS; k++)
      rc = hvds__reduce(acc, slot(s, (me + k) % P, R) + b, len / esz, dtype, op);
    if (rc == HVDS_SUCCESS) scatter(L, off + b, len, acc);
    if (rc == HVDS_SUCCESS && streamed) hvds__stream_copy(mine + b, acc, len);
  }
  if (rc != HVDS_SUCCESS) return rc;
  hvds__store_fence();
  publish(s, REDUCED, R + 1);
  // 3. Copy the other reduced parts out (this rank's own is in its output already).
  for (int k = 1; k < P && rc == HVDS_SUCCESS; k++) {
    int q = (me + k) % P;
    size_t qlo = n * (size_t)q / (size_t)P, qhi = n * (size_t)(q + 1) / (size_t)P;
    rc = wait_for(s, q, REDUCED, R + 1);
    if (rc == HVDS_SUCCESS && qhi > qlo)
      scatter(L, off + qlo * esz, (qhi - qlo) * esz, slot(s, q, R) + qlo * esz);
  }
  if (rc == HVDS_SUCCESS) publish(s, DONE, R + 1);
  return rc;
}

static hvds_result_t allreduce_polling(hvds_p2p_t* p, const hvds_coll_piece_t* pieces, int npieces,
                                       hvds_dtype_t dtype, hvds_reduce_op_t op, int agree) {
  if (!hvds__shm_p2p_is(p)) return HVDS_INVALID_ARGUMENT;
  hvds_result_t rc = hvds__coll_check(p, dtype, op);
  size_t esz = hvds__dtype_bytes(dtype), total = 0;
  for (int i = 0; i < npieces; i++) {
    if (rc == HVDS_SUCCESS && pieces[i].bytes % esz != 0) {
      snprintf(p->error, sizeof p->error, "shared memory allreduce: piece %d of %zu bytes is not "
               "a whole number of %zu-byte elements", i, pieces[i].bytes, esz);
      rc = HVDS_INVALID_ARGUMENT;
    }
    total += pieces[i].bytes;
  }
  size_t count = esz ? total / esz : 0;
  if (rc != HVDS_SUCCESS || p->size == 1) {
    // One rank: the result is the input.
    for (int i = 0; rc == HVDS_SUCCESS && i < npieces; i++)
      if (pieces[i].out != NULL && pieces[i].out != pieces[i].in && pieces[i].bytes > 0) {
        if (pieces[i].in != NULL)
          memmove(pieces[i].out, pieces[i].in, pieces[i].bytes);
        else
          memset(pieces[i].out, 0, pieces[i].bytes);
      }
    return rc;
  }
  if (count == 0) return HVDS_SUCCESS;
  shm_t* s = (shm_t*)p->impl;
  if ((rc = hvds__shm_check_remote(s)) != HVDS_SUCCESS) return rc;
  // A negotiation is a handful of bytes: with more ranks than cores its waits poll (yielding)
  // like the collective's, since a futex sleep per cycle costs each rank a scheduler round trip.
  s->wait_poll_us = agree && !s->yield ? s->poll_us : s->coll_poll_us;
  pieces_t L = {pieces, npieces};
  size_t per_round = s->coll_bytes / 2 / esz;
  s->store_kind = hvds__store_choice_pick(&s->store, total);
  int timed = total >= HVDS_STORE_CHOICE_MIN_BYTES;  // the sizes whose kind is chosen
  int64_t start = timed ? hvds__now_us() : 0;
  for (size_t first = 0; first < count && rc == HVDS_SUCCESS; first += per_round) {
    size_t n = count - first < per_round ? count - first : per_round;
    rc = one_round(s, &L, first * esz, n, esz, dtype, op);
  }
  if (rc == HVDS_SUCCESS && timed)
    hvds__store_choice_record(&s->store, total, s->store_kind, hvds__now_us() - start);
  return rc;
}

hvds_result_t hvds__shm_allreduce_pieces(hvds_p2p_t* p, const hvds_coll_piece_t* pieces,
                                         int npieces, hvds_dtype_t dtype, hvds_reduce_op_t op) {
  return allreduce_polling(p, pieces, npieces, dtype, op, 0);
}

hvds_result_t hvds__shm_allreduce(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                                  hvds_reduce_op_t op) {
  hvds_coll_piece_t whole = {buf, buf, count * hvds__dtype_bytes(dtype)};
  return allreduce_polling(p, &whole, 1, dtype, op, 0);
}

hvds_result_t hvds__shm_agree(hvds_p2p_t* p, void* buf, size_t count, hvds_dtype_t dtype,
                              hvds_reduce_op_t op) {
  hvds_coll_piece_t whole = {buf, buf, count * hvds__dtype_bytes(dtype)};
  return allreduce_polling(p, &whole, 1, dtype, op, 1);
}

void hvds__shm_force_store_kind_for_test(hvds_p2p_t* p, int kind) {
  if (hvds__shm_p2p_is(p)) ((shm_t*)p->impl)->store.forced = kind;
}
