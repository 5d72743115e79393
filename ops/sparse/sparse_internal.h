/* What the sparse algorithm files share: the call context, the algorithm signature and
 * registry, and the exchange steps built on the point-to-point interface (sparse_exchange.c).
 * Not for use outside ops/sparse/. */
#ifndef HVDS_SPARSE_INTERNAL_H_
#define HVDS_SPARSE_INTERNAL_H_

#include "collectives.h"
#include "sparse_allreduce.h"
#include "sparse_input.h"
#include "sparse_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One sparse allreduce in progress. */
typedef struct {
  hvds_p2p_t* p;
  hvds_sparse_layout_t lay;
  hvds_reduce_op_t op;       /* as given (Average included); sparse algorithms always sum */
  uint64_t tag;              /* every message of the call carries it */
  hvds_coll_opts_t coll;     /* options for the dense collectives used inside (same tag) */
  uint64_t zen_seed;         /* rank 0's ZEN key (agreed in the preamble), never 0 */
  const uint64_t* nnz;       /* entries of every rank's input stream (agreed in the preamble) */
  hvds_sparse_result_t* res; /* algorithms may fill the imbalance fields */
  int quant_bits;            /* the width of the gather phase after the full-precision reduce
                                (DSAR's and split-allgather's allgather, ZEN's pull): 2, 4, 8;
                                0: full precision; already 0 for integers and a single rank */
  int packed;                /* hvds__sparse_packs, the same on every rank: stream exchanges
                                (hvds__sparse_xchg: recursive doubling's rounds, the folds) and
                                split-allgather's gather and ZEN's push and pull go as packed blocks
                                (sparse_quant.h: indices delta-coded; the gathers' values
                                quantized when quant_bits is set, the others' as they are) */
  int64_t union_rows;        /* >= 0: the result's non-zero rows before quantization, set by a
                                quantized gather; -1: counted from the result */
  hvds_sparse_input_t* unordered; /* the dense baseline's input when its ordering was deferred
                                     (the stream passed is then empty), else NULL */
  void* dense_target; /* the caller's dense output when a dense result may be built in it (it
                         overlaps no input), else NULL */
} hvds_sparse_ctx_t;

/* An algorithm: in is this rank's stream over [0, dim) (sorted, dense by the byte rule); out is
 * the sum over all ranks, over [0, dim), owned (or a dense view of c->dense_target), identical on
 * every rank. The algorithm may take
 * in's memory (leaving in empty); the caller frees whatever in still holds. On failure p->error
 * is set and out is empty. */
typedef hvds_result_t (*hvds_sparse_run_fn)(hvds_sparse_ctx_t* c, hvds_sstream_t* in,
                                            hvds_sstream_t* out /* OUT */);

typedef struct {
  hvds_sparse_algo_t id;
  const char* name;
  int any_op; /* 1: every reduce op; 0: Sum and Average only */
  hvds_sparse_run_fn run;
} hvds_sparse_algo_info_t;

/* The registry entry for a (not AUTO) id, or NULL. */
const hvds_sparse_algo_info_t* hvds__sparse_algo_info(hvds_sparse_algo_t a);

hvds_result_t hvds__sparse_run_dense(hvds_sparse_ctx_t* c, hvds_sstream_t* in, hvds_sstream_t* out);
hvds_result_t hvds__sparse_run_allgather(hvds_sparse_ctx_t* c, hvds_sstream_t* in,
                                         hvds_sstream_t* out);
hvds_result_t hvds__sparse_run_ssar_rd(hvds_sparse_ctx_t* c, hvds_sstream_t* in,
                                       hvds_sstream_t* out);
hvds_result_t hvds__sparse_run_ssar_sag(hvds_sparse_ctx_t* c, hvds_sstream_t* in,
                                        hvds_sstream_t* out);
hvds_result_t hvds__sparse_run_dsar(hvds_sparse_ctx_t* c, hvds_sstream_t* in, hvds_sstream_t* out);
hvds_result_t hvds__sparse_run_zen(hvds_sparse_ctx_t* c, hvds_sstream_t* in, hvds_sstream_t* out);

/* ---- Exchange steps (sparse_exchange.c); each blocks and sets p->error on failure ---- */

/* Sets p->error to "<what>: out of memory" and returns HVDS_SYSTEM_ERROR. */
hvds_result_t hvds__sparse_nomem(hvds_sparse_ctx_t* c, const char* what);

/* Sends stream s to `to` and receives a stream over [lo, lo + len) from `from` into r: the
 * entry counts travel first, then the payloads (sparse ones packed when c->packed). to < 0 sends
 * nothing, from < 0 receives nothing (r is then left empty). Ranged streams only (dense iff
 * n == len). */
hvds_result_t hvds__sparse_xchg(hvds_sparse_ctx_t* c, int to, const hvds_sstream_t* s, int from,
                                size_t lo, size_t len, hvds_sstream_t* r /* OUT */);

/* Pairwise personalized exchange among m ranks: this rank is virtual rank v, virtual rank j is
 * real rank map[j] (map NULL: j itself). Block j (sbytes[j] bytes at sbuf + soff[j]) goes to j;
 * block from j (rbytes[j]) lands at rbuf + roff[j]. Zero-byte blocks are not sent (both sides
 * know the sizes); the own block is copied. */
hvds_result_t hvds__sparse_alltoallv(hvds_sparse_ctx_t* c, const int* map, int m, int v,
                                     const char* sbuf, const size_t* soff, const size_t* sbytes,
                                     char* rbuf, const size_t* roff, const size_t* rbytes);
/* One uint64 to and from each of the m virtual ranks (the size exchange before a payload). */
hvds_result_t hvds__sparse_alltoall_u64(hvds_sparse_ctx_t* c, const int* map, int m, int v,
                                        const uint64_t* send, uint64_t* recv);
/* Personalized exchange of sparse streams over the whole index space, in the stream layout:
 * block j (scount[j] entries, sbytes[j] bytes at sbuf + soff[j]) goes to virtual rank j (as in
 * hvds__sparse_alltoallv); the block from j lands in *rbuf (allocated here, the caller frees it
 * with hvds__sparse_buf_free) at roff[j]: rcount[j] entries, rbytes[j] bytes. The counts travel
 * first; with c->packed each block but the own one goes packed (indices delta-coded, values as
 * they are, sparse_quant.h) and its packed bytes travel with its count. *sent: the bytes this
 * rank sent. A count over the index space or a block that does not decode fails naming the
 * rank. */
hvds_result_t hvds__sparse_alltoall_streams(hvds_sparse_ctx_t* c, const int* map, int m, int v,
                                            const char* sbuf, const size_t* soff,
                                            const size_t* sbytes, const uint64_t* scount,
                                            char** rbuf /* OUT */, size_t* roff /* OUT */,
                                            size_t* rbytes /* OUT */, uint64_t* rcount /* OUT */,
                                            size_t* sent /* OUT */);
/* Allgather of blocks by recursive doubling among p2 (a power of two) virtual ranks: block j
 * occupies [off[j], off[j + 1]) of buf, this rank's is filled on entry, all are on return. */
hvds_result_t hvds__sparse_rd_allgather(hvds_sparse_ctx_t* c, const int* map, int p2, int v,
                                        char* buf, const size_t* off);
/* Allgather of m uint64 per rank over all of p (all[r * m + i] = rank r's mine[i]), as one small
 * halving-doubling allreduce of a vector that is zero outside each rank's slot. */
hvds_result_t hvds__sparse_allgather_u64(hvds_sparse_ctx_t* c, const uint64_t* mine, int m,
                                         uint64_t* all /* OUT: P * m */);

/* The fold to a power of two (MPICH's pattern, as in SparCML): with P2 the largest power of two
 * <= P and rem = P - P2, each even rank below 2 rem hands its stream to the odd rank above it and
 * sits out; the P2 others are virtual ranks 0..P2-1 (odd r < 2 rem -> r / 2, r >= 2 rem ->
 * r - rem). */
typedef struct {
  int p2, rem;
  int v; /* this rank's virtual rank, -1 if it sits out */
} hvds_sparse_fold_t;

void hvds__sparse_fold_plan(int size, int rank, hvds_sparse_fold_t* f /* OUT */);
int hvds__sparse_fold_real(const hvds_sparse_fold_t* f, int v);
/* Fills map[0..p2-1] with the real ranks (map holds p2 ints). */
void hvds__sparse_fold_map(const hvds_sparse_fold_t* f, int* map);
/* Fold step on acc (over [0, dim)): a rank that sits out sends acc and frees it; its partner
 * merges it in. */
hvds_result_t hvds__sparse_fold(hvds_sparse_ctx_t* c, const hvds_sparse_fold_t* f,
                                hvds_sstream_t* acc);
/* Unfold step: the partner sends the result back; the rank that sat out receives it into acc. */
hvds_result_t hvds__sparse_unfold(hvds_sparse_ctx_t* c, const hvds_sparse_fold_t* f,
                                  hvds_sstream_t* acc);
/* An algorithm's part among the p2 virtual ranks: reduces acc in place. */
typedef hvds_result_t (*hvds_sparse_folded_fn)(hvds_sparse_ctx_t* c, const hvds_sparse_fold_t* f,
                                               hvds_sstream_t* acc);
/* Fold, body on the virtual ranks, unfold: takes in's memory, and out gets the result on every
 * rank. */
hvds_result_t hvds__sparse_run_folded(hvds_sparse_ctx_t* c, hvds_sstream_t* in, hvds_sstream_t* out,
                                      hvds_sparse_folded_fn body);
/* Merges received (then freed) into acc over [0, dim); what names the algorithm in the
 * out-of-memory message. */
hvds_result_t hvds__sparse_merge_in(hvds_sparse_ctx_t* c, hvds_sstream_t* acc,
                                    hvds_sstream_t* received, const char* what);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SPARSE_INTERNAL_H_ */
