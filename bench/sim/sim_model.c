/* The dense collectives of ops/ as alpha-beta-gamma costs (sim.h).
 *
 * Each function walks the same steps as the algorithm file it names and prices every step with
 * hvds_sim_exchange(), the model of hvds__p2p_sendrecv_seg(), or, for the ring phases, the whole
 * phase with ring_stream(), the model of hvds__ring_stream(). Steps are taken on the busiest rank:
 * where ranks move blocks that differ by one element, the larger block is priced.
 *
 *   algorithm (file)               steps                    bytes per step (busiest rank)
 *   ring allreduce (allreduce_ring) P-1 reduce + P-1 copy    ceil(count/P) elements each way
 *   rhd allreduce (allreduce_rhd)   [fold] 2 log2 P2 [unfold] halves: ceil(len/2), then back up
 *                                   count < P2: log2 P2 full-vector swaps (recursive doubling)
 *   reduce-scatter (reducescatter_ring) P-1 reduce           the largest block
 *   allgather (allgather_ring)      P-1 copy                 the largest block
 *   broadcast (broadcast_tree)      ceil(log2 P) levels      root's upload carries every child
 */
#include <stdlib.h>
#include <string.h>

#include "param.h"
#include "sim.h"

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }
static size_t max_sz(size_t a, size_t b) { return a > b ? a : b; }
static double max_d(double a, double b) { return a > b ? a : b; }

static const char* const kCollNames[HVDS_SIM_COLL_COUNT] = {"allreduce", "reducescatter",
                                                            "allgather", "broadcast"};

const char* hvds_sim_coll_name(hvds_sim_coll_t c) {
  return (unsigned)c < HVDS_SIM_COLL_COUNT ? kCollNames[c] : "?";
}

int hvds_sim_coll_parse(const char* s) {
  for (int c = 0; c < HVDS_SIM_COLL_COUNT; c++)
    if (strcmp(s, kCollNames[c]) == 0) return c;
  return -1;
}

void hvds_sim_cfg_runtime(hvds_sim_cfg_t* c) {
  // The same knobs and the same parsing as hvds_init (api_lifecycle.c).
  const char* algo = hvds__param_str(HVDS_PARAM_ALLREDUCE_ALGORITHM);
  c->algorithm = algo && !strcmp(algo, "ring")  ? HVDS_ALGO_RING
                 : algo && !strcmp(algo, "rhd") ? HVDS_ALGO_RHD
                                                : HVDS_ALGO_AUTO;
  long long rhd = hvds__param_int(HVDS_PARAM_RHD_MAX_BYTES);
  long long chunk = hvds__param_int(HVDS_PARAM_RING_CHUNK_BYTES);
  long long fusion = hvds__param_int(HVDS_PARAM_FUSION_THRESHOLD);
  long long cache = hvds__param_int(HVDS_PARAM_CACHE_CAPACITY);
  // A knob of 0 gives the ops' default, as hvds__rhd_max() passes it on; unset (-1) is 0 here.
  c->rhd_max_bytes = rhd > 0 ? (size_t)rhd : rhd == 0 ? HVDS_COLL_DEFAULT_RHD_MAX_BYTES : 0;
  c->ring_chunk_bytes = chunk > 0 ? (size_t)chunk : 0;
  c->fusion_bytes = fusion > 0 ? (size_t)fusion : 0;
  c->cache_capacity = cache > 0 ? (size_t)cache : 0;
  double gbps = hvds__param_dbl(HVDS_PARAM_NET_GBPS);  // else the simulated link's (runtime_coll)
  c->link_beta = gbps > 0 ? 8.0 / (gbps * 1e9) : 0;
}

hvds_sim_net_t hvds_sim_net_at(double rate_gbit, double alpha, double gamma) {
  hvds_sim_net_t n = {alpha, 8.0 / (rate_gbit * 1e9), gamma, 0, 1, 0};
  return n;
}

/* ---- one exchange step ---- */

static size_t seg_len(size_t total, size_t seg, size_t j) {
  size_t off = j * seg;
  return off >= total ? 0 : min_sz(total - off, seg);
}

double hvds_sim_exchange(const hvds_sim_net_t* n, size_t sbytes, size_t rbytes, size_t seg,
                         int reduce) {
  size_t most = max_sz(sbytes, rbytes);
  if (most == 0) return 0;
  if (seg == 0 || seg > most) seg = most;
  size_t nseg = (most + seg - 1) / seg;
  double g = reduce ? n->gamma * (n->cpu_share > 1 ? n->cpu_share : 1) : 0;
  // Segment j is posted when segment j-2 has been reduced (j < 2: at once). The link carries the
  // posted segments in order, both directions at once; each arrives alpha after its last byte
  // left; reduction follows arrival, one segment at a time. With only two segments in flight,
  // a latency above one segment's transfer leaves the link idle between pairs.
  double link_free = 0, red_end = 0, red_end_prev2 = 0, red_end_prev1 = 0;
  for (size_t j = 0; j < nseg; j++) {
    double post = j < 2 ? 0 : red_end_prev2;
    double xfer = (double)max_sz(seg_len(sbytes, seg, j), seg_len(rbytes, seg, j)) * n->beta;
    link_free = max_d(post, link_free) + xfer;
    red_end = max_d(link_free + n->alpha, red_end) + (double)seg_len(rbytes, seg, j) * g;
    red_end_prev2 = red_end_prev1;
    red_end_prev1 = red_end;
  }
  return red_end;
}

/* The P-1 steps of a ring phase as one stream (ring_stream.c): unit u = segment j of step k is
 * posted when unit u-2 has finished (two in flight) and, from step 1 on, when segment j of step
 * k-1 has arrived and been reduced (it is what unit u sends). Every rank runs the same schedule,
 * so the neighbour's send of a unit leaves when this rank's does. */
static double ring_stream(const hvds_sim_net_t* n, int steps, size_t block, size_t seg,
                          int reduce) {
  if (steps <= 0 || block == 0) return 0;
  if (seg == 0 || seg > block) seg = block;
  size_t nseg = (block + seg - 1) / seg, units = (size_t)steps * nseg;
  double g = reduce ? n->gamma * (n->cpu_share > 1 ? n->cpu_share : 1) : 0;
  double* done = malloc(units * sizeof(double));
  if (done == NULL) return -1;
  double link_free = 0, prev_done = 0;
  for (size_t u = 0; u < units; u++) {
    size_t j = u % nseg, len = seg_len(block, seg, j);
    double post = u >= 2 ? done[u - 2] : 0;
    if (u >= nseg) post = max_d(post, done[u - nseg]);
    link_free = max_d(post, link_free) + (double)len * n->beta;
    done[u] = max_d(link_free + n->alpha, prev_done) + (double)len * g;
    prev_done = done[u];
  }
  free(done);
  return prev_done;
}

/* ---- allreduce: ring ---- */

int hvds_sim_ring_steps(int P, size_t count) { return (P <= 1 || count == 0) ? 0 : 2 * (P - 1); }

double hvds_sim_reducescatter(const hvds_sim_net_t* n, int P, size_t count, size_t esize,
                              size_t seg) {
  if (P <= 1 || count == 0) return 0;
  size_t block = (count / (size_t)P + (count % (size_t)P ? 1 : 0)) * esize;
  return ring_stream(n, P - 1, block, seg, 1);
}

double hvds_sim_allgather(const hvds_sim_net_t* n, int P, size_t total, size_t seg) {
  if (P <= 1 || total == 0) return 0;
  size_t block = total / (size_t)P + (total % (size_t)P ? 1 : 0);
  return ring_stream(n, P - 1, block, seg, 0);
}

double hvds_sim_ring_allreduce(const hvds_sim_net_t* n, int P, size_t count, size_t esize,
                               size_t seg) {
  if (P <= 1 || count == 0) return 0;
  // allreduce_ring.c: blocks of count/P elements, the first count % P one longer; the
  // allgather moves the same blocks as bytes.
  size_t block = (count / (size_t)P + (count % (size_t)P ? 1 : 0)) * esize;
  return hvds_sim_reducescatter(n, P, count, esize, seg) + ring_stream(n, P - 1, block, seg, 0);
}

/* ---- allreduce: recursive halving-doubling ---- */

static int pow2_below(int P) {
  int p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  return p2;
}

static int log2_int(int p2) {
  int L = 0;
  while ((1 << L) < p2) L++;
  return L;
}

int hvds_sim_rhd_steps(int P, size_t count) {
  if (P <= 1 || count == 0) return 0;
  int p2 = pow2_below(P), L = log2_int(p2);
  return (P > p2 ? 2 : 0) + (count < (size_t)p2 ? L : 2 * L);
}

double hvds_sim_rhd_allreduce(const hvds_sim_net_t* n, int P, size_t count, size_t esize,
                              size_t seg) {
  if (P <= 1 || count == 0) return 0;
  int p2 = pow2_below(P), L = log2_int(p2);
  size_t bytes = count * esize;
  if (seg > bytes) seg = bytes;  // allreduce_rhd.c caps the segment at the vector
  double t = 0;
  // Fold: the odd rank of each low pair receives and reduces its partner's whole vector.
  if (P > p2) t += hvds_sim_exchange(n, 0, bytes, seg, 1);
  if (count < (size_t)p2) {
    // Recursive doubling: log2 P2 whole-vector swaps, each reduced.
    t += L * hvds_sim_exchange(n, bytes, bytes, seg, 1);
  } else {
    // Halving: the rank keeping the upper half keeps ceil(len / 2) and gives the rest; the
    // busiest rank always kept the larger half. Doubling retraces the same sizes as copies.
    size_t len[33];
    len[0] = count;
    for (int s = 0; s < L; s++) {
      size_t keep = len[s] - len[s] / 2;
      t += hvds_sim_exchange(n, (len[s] - keep) * esize, keep * esize, seg, 1);
      len[s + 1] = keep;
    }
    for (int s = L - 1; s >= 0; s--)
      t += hvds_sim_exchange(n, len[s + 1] * esize, (len[s] - len[s + 1]) * esize, seg, 0);
  }
  // Unfold: the result goes back to the even rank.
  if (P > p2) t += hvds_sim_exchange(n, bytes, 0, seg, 0);
  return t;
}

/* ---- broadcast ---- */

/* Children of tree rank v (root 0) in broadcast_tree.c's binomial tree of P ranks. */
static int tree_children(int v, int P, int* first) {
  int low = 1;
  while (low < P && !(v & low)) low <<= 1;
  int c = 0;
  *first = -1;
  for (int m = low >> 1; m >= 1; m >>= 1)
    if (v + m < P) {
      if (*first < 0) *first = v + m;  // the largest subtree: the deepest path goes through it
      c++;
    }
  return c;
}

double hvds_sim_broadcast(const hvds_sim_net_t* n, int P, size_t bytes, size_t seg) {
  if (P <= 1 || bytes == 0) return 0;
  if (seg == 0 || seg > bytes) seg = bytes;
  // A rank sends each segment to all its children at once, so its upload carries fan-out copies
  // of it. Along the deepest path (root, then each first child) the segments flow as through a
  // flow shop: rank i forwards segment j once it has it and has forwarded segment j-1.
  int fan[32], depth = 0, next;
  for (int v = 0; v >= 0 && depth < 32; v = next) {
    fan[depth] = tree_children(v, P, &next);
    if (fan[depth] == 0) break;
    depth++;
  }
  double done[32] = {0};  // done[i]: when rank i of the path finished forwarding the last segment
  size_t nseg = (bytes + seg - 1) / seg;
  for (size_t j = 0; j < nseg; j++) {
    double len = (double)seg_len(bytes, seg, j), have = 0;
    for (int i = 0; i < depth; i++) {
      done[i] = max_d(have, done[i]) + fan[i] * len * n->beta;
      have = done[i];
    }
  }
  return depth * n->alpha + done[depth - 1];
}

/* ---- the runtime's choices ---- */

/* exec_shared.c's hvds__ring_chunk(), on the simulator's configuration instead of a runtime's:
 * the knob, else the ops' rule for the link. */
static size_t ring_chunk(const hvds_sim_cfg_t* c, size_t bytes, int P) {
  if (c->ring_chunk_bytes > 0) return c->ring_chunk_bytes;
  return hvds__coll_ring_segment(bytes, P, c->link_beta);
}

/* exec_shared.c's hvds__rhd_max(): the knob, else the ops' rule for the link. */
static size_t rhd_max(const hvds_sim_cfg_t* c) {
  return c->rhd_max_bytes > 0 ? c->rhd_max_bytes : hvds__coll_rhd_max_for_link(c->link_beta);
}

hvds_coll_opts_t hvds_sim_runtime_opts(const hvds_sim_cfg_t* c, size_t bytes, int P) {
  hvds_coll_opts_t o = {0, c->algorithm, ring_chunk(c, bytes, P), rhd_max(c)};
  return o;
}

const char* hvds_sim_allreduce_choice(const hvds_sim_cfg_t* c, int P, size_t bytes) {
  hvds_coll_opts_t o = hvds_sim_runtime_opts(c, bytes, P);
  hvds_p2p_t p;
  memset(&p, 0, sizeof p);
  p.size = P;
  return hvds__allreduce_choice(&p, bytes, &o);
}

double hvds_sim_allreduce(const hvds_sim_net_t* n, int P, size_t count, size_t esize,
                          const hvds_coll_opts_t* o, const char** algo) {
  hvds_p2p_t p;
  memset(&p, 0, sizeof p);
  p.size = P;
  const char* a = hvds__allreduce_choice(&p, count * esize, o);  // the runtime's own rule
  if (algo != NULL) *algo = a;
  size_t seg = hvds__coll_segment(o, esize);
  return strcmp(a, "rhd") == 0 ? hvds_sim_rhd_allreduce(n, P, count, esize, seg)
                               : hvds_sim_ring_allreduce(n, P, count, esize, seg);
}

double hvds_sim_negotiation(const hvds_sim_net_t* n, const hvds_sim_cfg_t* c, int P) {
  // controller.c: one int64 AND over 1 + cache_capacity/64 words, options {tag, AUTO, 0, 0}.
  size_t words = 1 + (c->cache_capacity + 63) / 64;
  hvds_coll_opts_t o = {0, HVDS_ALGO_AUTO, 0, 0};
  return hvds_sim_allreduce(n, P, words, 8, &o, NULL);
}

double hvds_sim_runtime_coll(const hvds_sim_net_t* n, const hvds_sim_cfg_t* c, hvds_sim_coll_t coll,
                             int P, size_t bytes, size_t esize, const char** algo) {
  double t = n->overhead + hvds_sim_negotiation(n, c, P);
  double copy = n->copy, own = (double)bytes / (P > 0 ? P : 1);
  hvds_coll_opts_t def = {0, HVDS_ALGO_AUTO, 0, 0};  // execute_gather.c: default segments
  size_t seg = hvds__coll_segment(&def, 1);
  if (algo != NULL) *algo = "ring";
  switch (coll) {
    case HVDS_SIM_ALLREDUCE: {
      hvds_sim_cfg_t linked = *c;  // the runtime sizes ring segments for the link it measured
      if (linked.link_beta <= 0) linked.link_beta = n->beta;
      hvds_coll_opts_t o = hvds_sim_runtime_opts(&linked, bytes, P);
      return t + hvds_sim_allreduce(n, P, bytes / esize, esize, &o, algo);
    }
    case HVDS_SIM_REDUCESCATTER:
      // execute_gather.c: input into the fusion buffer; the output allocated and copied out.
      t += copy * ((double)bytes + 2 * own);
      return t +
             hvds_sim_reducescatter(n, P, bytes / esize, esize, hvds__coll_segment(&def, esize));
    case HVDS_SIM_ALLGATHER:
      // execute_gather.c: the output allocated (first touch), this rank's block copied in.
      t += copy * ((double)bytes + own);
      return t + hvds_sim_allgather(n, P, bytes, seg);
    case HVDS_SIM_BROADCAST:
      if (algo != NULL) *algo = "tree";
      return t + hvds_sim_broadcast(n, P, bytes, seg);
    default:
      return t;
  }
}
