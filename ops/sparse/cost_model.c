/* Alpha-beta costs of the sparse allreduce algorithms (cost_model.h).
 *
 * Notation (design/papers/sparcml.md section 1): P ranks, L = floor(log2 P), P2 = 2^L,
 * rem = P - P2; N indices of row values; s = index bytes + row bytes per sparse entry; k the
 * largest per-rank entry count; K(m) the expected union of m supports. A stream of n entries
 * over a range of len indices costs min(n s, len row_bytes) bytes (the dense switch). Counts
 * travel before payloads, so each variable-size exchange is two messages. Every term follows the
 * implementation in the file named beside it; the preamble allreduce, common to all, is left out.
 */
#include "cost_model.h"

#include <float.h>

#include "sparse_stream.h"

typedef struct {
  int P, L, p2, rem;
  double N, rb, s, k;
  double idx; /* index bytes */
  double qrb; /* row bytes in a gather phase: quantized, or rb */
  double imb; /* index-range imbalance, in [1, P] */
  double alpha, beta, gamma, hash, qenc, qdec;
  double round; /* per synchronizing round, beyond alpha */
  int quant;    /* the gather phase is quantized */
  int packed;   /* indices delta-coded in the stream exchanges and the gather phase (always in
                   a quantized gather) */
} terms_t;

static terms_t terms(const hvds_sparse_problem_t* x, const hvds_sparse_net_t* net) {
  terms_t t;
  t.P = x->ranks > 0 ? x->ranks : 1;
  t.L = 0;
  while ((2 << t.L) <= t.P) t.L++;
  t.p2 = 1 << t.L;
  t.rem = t.P - t.p2;
  t.N = x->dim;
  t.rb = x->row * x->val_bytes;
  t.s = x->idx_bytes + t.rb;
  t.k = x->nnz < x->dim ? x->nnz : x->dim;
  // Quantized: bits per value and a float32 scale per 1024 values (ops/quantize.h).
  t.quant = x->quant_bits == 2 || x->quant_bits == 4 || x->quant_bits == 8;
  t.qrb = t.quant ? x->row * x->quant_bits / 8.0 + x->row / 1024.0 * 4.0 : t.rb;
  t.packed = 0;  // cost_as sets it
  t.idx = x->idx_bytes;
  t.imb = x->imbalance > 1 ? x->imbalance : 1;
  if (t.imb > t.P) t.imb = t.P;
  t.alpha = net != NULL && net->alpha > 0 ? net->alpha : HVDS_SPARSE_DEFAULT_ALPHA;
  t.beta = net != NULL && net->beta > 0 ? net->beta : HVDS_SPARSE_DEFAULT_BETA;
  t.gamma = net != NULL && net->gamma > 0 ? net->gamma : 0;
  t.hash = net != NULL && net->hash > 0 ? net->hash : 0;
  t.qenc = net != NULL && net->qenc > 0 ? net->qenc : 0;
  t.qdec = net != NULL && net->qdec > 0 ? net->qdec : 0;
  t.round = net != NULL && net->round > 0 ? net->round : 0;
  return t;
}

/* Bytes of a stream of n entries over len indices. */
static double stream_bytes(const terms_t* t, double n, double len) {
  double sparse = n * t->s, dense = len * t->rb;
  return sparse < dense ? sparse : dense;
}

/* Bytes of v as a LEB128 varint. */
static double varint_bytes(double v) {
  double b = 1;
  for (; v >= 128; v /= 128) b++;
  return b;
}

/* 1 when a stream of n entries over len indices is sparse by the byte rule. */
static int sparse_stream(const terms_t* t, double n, double len) { return n * t->s < len * t->rb; }

/* Bytes of such a stream as hvds__sparse_xchg sends it: packed (delta-coded indices, values as
 * they are) when t->packed and sparse, else as it is. */
static double sent_bytes(const terms_t* t, double n, double len) {
  if (!t->packed || !sparse_stream(t, n, len)) return stream_bytes(t, n, len);
  return n * (varint_bytes(n > 0 ? len / n : len) + t->rb);
}

/* Index bytes of n entries over len indices in a gather phase: full width, or packed (indices
 * travel as delta-coded gaps, sparse_quant.h) the varint of the average gap. */
static double gathered_index(const terms_t* t, double n, double len) {
  return t->packed ? varint_bytes(n > 0 ? len / n : len) : t->idx;
}

/* 1 when a reduced stream of n entries over len indices is gathered sparse (the dense switch
 * follows the packed sizes when packed, hvds__sparse_qdense_rule). */
static int gathered_sparse(const terms_t* t, double n, double len) {
  return n * (gathered_index(t, n, len) + t->qrb) < len * t->qrb;
}

/* Bytes of a reduced stream of n entries over len indices in a gather phase. */
static double gathered_bytes(const terms_t* t, double n, double len) {
  return gathered_sparse(t, n, len) ? n * (gathered_index(t, n, len) + t->qrb) : len * t->qrb;
}

double hvds__sparse_union(const hvds_sparse_problem_t* x, int m) {
  double N = x->dim, k = x->nnz < x->dim ? x->nnz : x->dim;
  if (N <= 0 || k <= 0 || m <= 0) return 0;
  if (x->overlap < 0) {
    // Independent uniform supports: an index is missed by all m with probability (1 - k/N)^m.
    double q = 1.0 - k / N, miss = 1.0;
    for (int i = 0; i < m; i++) miss *= q;
    return N * (1.0 - miss);
  }
  double w = x->overlap > 1 ? 1 : x->overlap;
  double u = k * (w + m * (1.0 - w));
  return u < N ? u : N;
}

double hvds__sparse_overlap_estimate(int ranks, double k, double union_size) {
  if (ranks <= 1 || k <= 0) return -1;
  double w = (ranks * k - union_size) / ((ranks - 1) * k);
  return w < 0 ? 0 : w > 1 ? 1 : w;
}

/* Fold and unfold around a power-of-two core (sparse_exchange.c): the partner receives one
 * input stream, later returns the result. */
static double fold_cost(const terms_t* t, const hvds_sparse_problem_t* x) {
  if (t->rem == 0) return 0;
  double in = sent_bytes(t, t->k, t->N), res = sent_bytes(t, hvds__sparse_union(x, t->P), t->N);
  return 4 * t->alpha + 2 * t->round + (in + res) * t->beta;
}

/* Inputs summed on the busiest virtual rank after the fold. */
static int folded_inputs(const terms_t* t) { return t->rem > 0 ? 2 : 1; }

/* dense_baseline.c: halving-doubling (with its fold) and the ring; the baseline runs the
 * cheaper (hvds__sparse_dense_rhd). */
static double cost_rhd(const terms_t* t) {
  double Nb = t->N * t->rb;
  double rhd = 2 * t->L * (t->alpha + t->round) + 2.0 * (t->p2 - 1) / t->p2 * Nb * t->beta;
  if (t->rem > 0) rhd += 2 * (t->alpha + t->round) + 2 * Nb * t->beta;
  return rhd;
}

static double cost_ring(const terms_t* t) {
  double Nb = t->N * t->rb;
  return 2.0 * (t->P - 1) * (t->alpha + t->round) + 2.0 * (t->P - 1) / t->P * Nb * t->beta;
}

static double cost_dense(const terms_t* t) {
  double rhd = cost_rhd(t), ring = cost_ring(t);
  return rhd < ring ? rhd : ring;
}

/* allgather_baseline.c: ring allgatherv of every rank's stream. */
static double cost_allgather(const terms_t* t) {
  return (t->P - 1) * (t->alpha + t->round + stream_bytes(t, t->k, t->N) * t->beta);
}

/* ssar_recursive_doubling.c: round i swaps the union of f 2^i inputs. */
static double cost_ssar_rd(const terms_t* t, const hvds_sparse_problem_t* x) {
  double c = fold_cost(t, x);
  for (int i = 0; i < t->L; i++) {
    int m = folded_inputs(t) << i;
    double K = hvds__sparse_union(x, m < t->P ? m : t->P);
    c += 2 * t->alpha + t->round + sent_bytes(t, K, t->N) * t->beta;  // count, then payload
  }
  return c;
}

/* Bytes the busiest rank receives when m ranges holding K entries in all are gathered by every
 * rank: the heaviest range (imb K / m entries) and all but the lightest other. */
static double gather_ranges(const terms_t* t, double K, int m, double part) {
  if (m <= 1) return 0;
  double heavy = t->imb * K / m;
  if (heavy > K) heavy = K;
  double light = (K - heavy) / (m - 1);
  return gathered_bytes(t, heavy, part) + (m - 2) * gathered_bytes(t, light, part);
}

/* ssar_split_allgather.c: pairwise split of the folded stream, then a recursive-doubling
 * allgather of counts and of the reduced ranges. With skewed indices the owner of the heavy
 * range receives imb times the average block. */
static double cost_ssar_sag(const terms_t* t, const hvds_sparse_problem_t* x) {
  double part = t->N / t->p2;
  double Kf = hvds__sparse_union(x, folded_inputs(t)), KP = hvds__sparse_union(x, t->P);
  // Counts and payloads go in separate exchanges: every message is a round.
  double split = 2.0 * (t->p2 - 1) * (t->alpha + t->round) +
                 (t->p2 - 1) * stream_bytes(t, t->imb * Kf / t->p2, part) * t->beta;
  double gather = 2.0 * t->L * (t->alpha + t->round) + gather_ranges(t, KP, t->p2, part) * t->beta;
  return fold_cost(t, x) + split + gather;
}

/* dsar_split_allgather.c: pairwise split, then the dense ring allgatherv (quantized when asked). */
static double cost_dsar(const terms_t* t) {
  double part = t->N / t->P;
  double split = 2.0 * (t->P - 1) * (t->alpha + t->round) +
                 (t->P - 1) * stream_bytes(t, t->imb * t->k / t->P, part) * t->beta;
  double gather = (t->P - 1) * (t->alpha + t->round) + (t->P - 1) * part * t->qrb * t->beta;
  return split + gather;
}

/* 1 when ZEN's owners pull per entries of a hashed range of part indices as a bitmap: smaller
 * than COO's indices (delta-coded when packed); the rows cost the same either way. */
static int zen_bitmap(const terms_t* t, double per, double part) {
  return part / 8 < per * gathered_index(t, per, t->N);
}

/* zen.c: COO push (its indices delta-coded when packed: k / P of them over the whole tensor), a
 * count allgather (halving-doubling), then the pull in the cheaper of COO and a hash bitmap per
 * owner. */
static double cost_zen(const terms_t* t, const hvds_sparse_problem_t* x) {
  double per = hvds__sparse_union(x, t->P) / t->P, part = t->N / t->P, block = t->k / t->P;
  double pulled = zen_bitmap(t, per, part) ? part / 8 + per * t->qrb
                                           : per * (gathered_index(t, per, t->N) + t->qrb);
  double push = 2.0 * (t->P - 1) * (t->alpha + t->round) +
                (t->P - 1) * block * (gathered_index(t, block, t->N) + t->rb) * t->beta;
  double counts = (2.0 * t->L + (t->rem > 0 ? 2 : 0)) * (t->alpha + t->round);
  double pull = (t->P - 1) * (t->alpha + t->round + pulled * t->beta);
  return push + counts + pull;
}

/* ---- Local work: entry steps (gamma each) and keyed hashes, the way the code runs ---- */

/* Steps to move or merge-step n entries: one per entry, one more per 16 bytes of values. */
static double carry(const terms_t* t, double n) { return n * (1.0 + t->rb / 16.0); }

/* Merge steps of m streams of e entries each over len indices, merged pairwise in a tree
 * (hvds__sstream_merge_many): each level's inputs are the unions of the level below, so
 * overlapping supports shrink the later levels (as recursive doubling's rounds). */
static double tree_merge_steps(const terms_t* t, const hvds_sparse_problem_t* x, double e,
                               double len, int m) {
  hvds_sparse_problem_t block = *x;
  block.nnz = e, block.dim = len;
  double w = 0;
  for (int s = 1; s < m; s *= 2) w += 2 * carry(t, (double)m / s * hvds__sparse_union(&block, s));
  return w;
}

/* Merge levels of P streams (ceil log2 P). */
static double levels(const terms_t* t) { return t->L + (t->rem > 0 ? 1 : 0); }

/* Dense passes over bytes: a step per 16 bytes. */
static double dense_steps(double bytes) { return bytes / 16.0; }

/* Counting the result's non-zero rows, its union size (sparse_allreduce.c: the runtime learns
 * the overlap from it): a pass over its rows, all N when it is dense. always: the algorithm's
 * result is dense whatever the union. */
static double count_steps(const terms_t* t, double KP, int always) {
  int dense = always || KP * t->s >= t->N * t->rb;
  return dense_steps((dense ? t->N : KP) * t->rb);
}

/* 1 when split-allgather's packed reduced ranges (KP entries over p2 ranges) are gathered
 * dense (hvds__sparse_qdense_rule). */
static int sag_dense_ranges(const terms_t* t, double KP) {
  return t->packed && !gathered_sparse(t, KP / t->p2, t->N / t->p2);
}

/* 1 when split-allgather's result is dense: its heaviest range turns dense on the way (the
 * stream byte rule; ssar_split_allgather.c then returns every position), or its packed ranges
 * are gathered dense. */
static int sag_dense_result(const terms_t* t, double KP) {
  return sag_dense_ranges(t, KP) || !sparse_stream(t, t->imb * KP / t->p2, t->N / t->p2);
}

/* DSAR's add of one block of n entries into a dense range of len rows: in place, or a dense add
 * when the block went dense. */
static double block_add(const terms_t* t, double n, double len) {
  return sparse_stream(t, n, len) ? carry(t, n) : dense_steps(len * t->rb * 2);
}

/* hvds__sparse_sort_rows_unique's steps for n rows over the whole range: by buckets, a count, a
 * mark and a listing per entry, each row moved twice, three passes over the range's words;
 * else the ranking, and each row written at its rank. */
static double sort_rows_steps(const terms_t* t, double n) {
  if (hvds__sparse_sort_rows_bucketed((size_t)n, (uint64_t)t->N - 1))
    return 3 * n + 2 * carry(t, n) + 3 * (t->N / 64);
  return hvds__sparse_sort_steps(n, t->N - 1, 1) + carry(t, n);
}

static double algo_steps(hvds_sparse_algo_t a, const terms_t* t, const hvds_sparse_problem_t* x) {
  double k = t->k, KP = hvds__sparse_union(x, t->P), Nb = t->N * t->rb, L = levels(t);
  switch (a) {
    case HVDS_SPARSE_DENSE:  // scatter, then the reduction's passes and the result
      return carry(t, k) + dense_steps(Nb * (2.0 + 2.0 * (t->P - 1) / t->P));
    case HVDS_SPARSE_ALLGATHER:  // every rank merges all P streams
      return tree_merge_steps(t, x, k, t->N, t->P) + carry(t, KP);
    case HVDS_SPARSE_SSAR_RD: {  // each round merges two streams into the next union
      double w = 0;
      for (int i = 0; i < t->L; i++) {
        int m = folded_inputs(t) << i;
        w += 2 * carry(t, 2 * hvds__sparse_union(x, m < t->P ? m : t->P));
      }
      return w + carry(t, KP);
    }
    case HVDS_SPARSE_SSAR_SAG: {  // split, merge one range's blocks (the heaviest), concatenate
      double part = t->N / t->p2;
      double w = carry(t, k) + tree_merge_steps(t, x, t->imb * k / t->p2, part, t->p2) +
                 carry(t, KP);
      // Quantized ranges that turn dense: the owner densifies its range, and every rank unpacks
      // N rows into the gather buffer, then zeroes the result and copies them in.
      if (sag_dense_ranges(t, KP)) w += dense_steps(Nb * (3.0 + 1.0 / t->p2));
      // A dense result: N rows zeroed, the gathered ranges copied in.
      else if (sag_dense_result(t, KP)) w += dense_steps(Nb * 2.0);
      return w;
    }
    case HVDS_SPARSE_DSAR: {  // split, add the range's P blocks into it, the dense result
      // One pass per block, no merge tree: a sparse block's entries are added in place, a dense
      // block is a dense add; the owner of the heaviest range gets P blocks of the heaviest size.
      double part = t->N / t->P;
      return carry(t, k) + t->P * block_add(t, t->imb * k / t->P, part) +
             dense_steps(Nb * (1.0 + 1.0 / t->P));
    }
    case HVDS_SPARSE_ZEN: {  // hash and partition, merge, encode the owned part, decode all
      double per = KP / t->P, part = t->N / t->P;
      int bitmap = zen_bitmap(t, per, part);
      double encode =
          bitmap ? hvds__sparse_sort_steps(per, part - 1, 1) + carry(t, per) : carry(t, per);
      // COO partitions merge (sorted, disjoint); with bitmaps among them the rows are sorted
      double decode = bitmap ? sort_rows_steps(t, KP) : 2 * carry(t, KP) * L;
      return carry(t, 2 * k) + tree_merge_steps(t, x, k / t->P, part, t->P) + encode + decode;
    }
    default:
      return 0;
  }
}

/* Packing and unpacking n entries of a sparse stream exchange (hvds__sparse_xchg, as sent_bytes
 * counts it): a step per entry each way for the indices, the rows copied in and out. */
static double xchg_pack_steps(const terms_t* t, double n) {
  return sparse_stream(t, n, t->N) ? 2 * n + dense_steps(2 * n * t->rb) : 0;
}

/* Packing: the gather phase's busiest owner delta-codes its indices and every rank decodes every
 * owner's, a step per entry each, at full precision with the rows copied in and out (dense
 * passes; quantized, quant_cost prices them); recursive doubling's rounds and the folds pack
 * what they send and unpack what they receive, and so does ZEN's push. */
static double pack_steps(hvds_sparse_algo_t a, const terms_t* t, const hvds_sparse_problem_t* x) {
  if (!t->packed) return 0;
  double KP = hvds__sparse_union(x, t->P), own = KP / t->P, all = KP, w = 0;
  if (t->rem > 0 && (a == HVDS_SPARSE_SSAR_RD || a == HVDS_SPARSE_SSAR_SAG))
    w += xchg_pack_steps(t, t->k) / 2 + xchg_pack_steps(t, KP) / 2;  // one way each
  switch (a) {
    case HVDS_SPARSE_SSAR_RD:
      for (int i = 0; i < t->L; i++) {
        int m = folded_inputs(t) << i;
        w += xchg_pack_steps(t, hvds__sparse_union(x, m < t->P ? m : t->P));
      }
      return w;
    case HVDS_SPARSE_SSAR_SAG: {
      double part = t->N / t->p2, heavy = t->imb * KP / t->p2;
      own = gathered_sparse(t, heavy, part) ? heavy : 0;
      all = gathered_sparse(t, KP / t->p2, part) ? KP : 0;
      break;
    }
    case HVDS_SPARSE_ZEN:  // the push's blocks too: packed here, unpacked by their owners
      w += xchg_pack_steps(t, t->k * (t->P - 1) / t->P);
      break;
    default:
      return 0;
  }
  return w + own + all + (t->quant ? 0 : dense_steps((own + all) * t->rb));
}

/* A dense input (sparse_detect): the dense allreduce has no entries to scatter; every other
 * algorithm extracts the non-zero rows first and scans them in. */
static double dense_input_steps(hvds_sparse_algo_t a, const terms_t* t) {
  if (a == HVDS_SPARSE_DENSE) return -carry(t, t->k);
  return dense_steps(t->N * t->rb) + 2 * carry(t, t->k);
}

static double work(hvds_sparse_algo_t a, const terms_t* t, const hvds_sparse_problem_t* x) {
  int always_dense =
      a == HVDS_SPARSE_DENSE || a == HVDS_SPARSE_DSAR ||
      (a == HVDS_SPARSE_SSAR_SAG && sag_dense_result(t, hvds__sparse_union(x, t->P)));
  double input = a == HVDS_SPARSE_DENSE && x->input_dense > 0 ? x->input_dense
                 : x->input > 0                               ? x->input
                                                              : 0;
  if (x->dense_input) input += dense_input_steps(a, t);
  return input + algo_steps(a, t, x) + pack_steps(a, t, x) +
         count_steps(t, hvds__sparse_union(x, t->P), always_dense);
}

/* Keyed hashes ZEN computes: every input entry, and with the bitmap pull every owned entry to
 * encode and every result entry to decode. */
static double hashes(hvds_sparse_algo_t a, const terms_t* t, const hvds_sparse_problem_t* x) {
  if (a != HVDS_SPARSE_ZEN) return 0;
  double KP = hvds__sparse_union(x, t->P), per = KP / t->P, part = t->N / t->P;
  int bitmap = zen_bitmap(t, per, part);
  return t->k + (bitmap ? per + KP : 0);
}

/* Quantization in the gather phase: the busiest owner encodes its reduced rows, and every rank
 * decodes every owner's (the sizes of gathered_bytes: dense ranges count all their rows). */
static double quant_cost(hvds_sparse_algo_t a, const terms_t* t, const hvds_sparse_problem_t* x) {
  if (!t->quant) return 0;
  double KP = hvds__sparse_union(x, t->P), own = 0, all = 0;
  switch (a) {
    case HVDS_SPARSE_DSAR:
      own = t->N / t->P, all = t->N;
      break;
    case HVDS_SPARSE_SSAR_SAG: {
      double part = t->N / t->p2, heavy = t->imb * KP / t->p2;
      own = gathered_sparse(t, heavy, part) ? heavy : part;
      all = gathered_sparse(t, KP / t->p2, part) ? KP : t->N;
      break;
    }
    case HVDS_SPARSE_ZEN:
      own = KP / t->P, all = KP;
      break;
    default:
      return 0;
  }
  return x->row * (own * t->qenc + all * t->qdec);
}

static double local_cost(hvds_sparse_algo_t a, const terms_t* t, const hvds_sparse_problem_t* x) {
  return work(a, t, x) * t->gamma + hashes(a, t, x) * t->hash + quant_cost(a, t, x);
}

int hvds__sparse_dense_rhd(const hvds_sparse_problem_t* x, const hvds_sparse_net_t* net) {
  terms_t t = terms(x, net);
  return cost_rhd(&t) < cost_ring(&t);
}

/* Algorithm a's predicted seconds with its streams packed or not. */
static double cost_as(hvds_sparse_algo_t a, const hvds_sparse_problem_t* x,
                      const hvds_sparse_net_t* net, int packed) {
  terms_t t = terms(x, net);
  t.packed = packed;  // hvds__sparse_packs: always for quantized gathers
  double local = local_cost(a, &t, x);
  switch (a) {
    case HVDS_SPARSE_DENSE:
      return cost_dense(&t) + local;
    case HVDS_SPARSE_ALLGATHER:
      return cost_allgather(&t) + local;
    case HVDS_SPARSE_SSAR_RD:
      return cost_ssar_rd(&t, x) + local;
    case HVDS_SPARSE_SSAR_SAG:
      return cost_ssar_sag(&t, x) + local;
    case HVDS_SPARSE_DSAR:
      return cost_dsar(&t) + local;
    case HVDS_SPARSE_ZEN:
      return cost_zen(&t, x) + local;
    default:
      return DBL_MAX;
  }
}

/* Algorithm a's predicted seconds, packed as hvds__sparse_packs decides (*packed): forced, or
 * priced both ways once and the cheaper taken (ties unpacked). */
static double priced(hvds_sparse_algo_t a, const hvds_sparse_problem_t* x,
                     const hvds_sparse_net_t* net, int* packed) {
  int forced = -1;  // the model decides
  if (a != HVDS_SPARSE_SSAR_RD && a != HVDS_SPARSE_SSAR_SAG && a != HVDS_SPARSE_ZEN)
    forced = 0;
  else if ((a != HVDS_SPARSE_SSAR_RD && terms(x, net).quant) || x->pack_indices > 0)
    forced = 1;
  else if (x->pack_indices < 0)
    forced = 0;
  if (forced >= 0) {
    *packed = forced;
    return cost_as(a, x, net, forced);
  }
  double with = cost_as(a, x, net, 1), without = cost_as(a, x, net, 0);
  *packed = with < without;
  return *packed ? with : without;
}

int hvds__sparse_packs(hvds_sparse_algo_t a, const hvds_sparse_problem_t* x,
                       const hvds_sparse_net_t* net) {
  int packed;
  priced(a, x, net, &packed);
  return packed;
}

double hvds__sparse_cost(hvds_sparse_algo_t a, const hvds_sparse_problem_t* x,
                         const hvds_sparse_net_t* net) {
  int packed;
  return priced(a, x, net, &packed);
}

hvds_sparse_algo_t hvds__sparse_select(const hvds_sparse_problem_t* x, const hvds_sparse_net_t* net,
                                       double costs[HVDS_SPARSE_ALGO_COUNT]) {
  return hvds__sparse_select_calibrated(x, net, NULL, costs);
}

hvds_sparse_algo_t hvds__sparse_select_calibrated(const hvds_sparse_problem_t* x,
                                                  const hvds_sparse_net_t* net,
                                                  const double calib[HVDS_SPARSE_ALGO_COUNT],
                                                  double costs[HVDS_SPARSE_ALGO_COUNT]) {
  hvds_sparse_algo_t best = HVDS_SPARSE_DENSE;
  double best_cost = DBL_MAX;
  for (int a = HVDS_SPARSE_DENSE; a < HVDS_SPARSE_ALGO_COUNT; a++) {
    double c = hvds__sparse_cost((hvds_sparse_algo_t)a, x, net);
    if (costs != NULL) costs[a] = c;
    if (calib != NULL && calib[a] > 0) c *= calib[a];
    if (c < best_cost) {
      best_cost = c;
      best = (hvds_sparse_algo_t)a;
    }
  }
  // One rank moves nothing: the input stream is already the result (recursive doubling with no
  // rounds), whereas dense would still scatter N values.
  if (x->ranks <= 1) best = HVDS_SPARSE_SSAR_RD, best_cost = 0;
  if (costs != NULL) costs[HVDS_SPARSE_AUTO] = best_cost;
  return best;
}
