/* hvdsparse-sim: an alpha-beta-gamma model of the collectives exactly as ops/ runs them, with the
 * runtime's own selectors (hvds__allreduce_choice for dense, hvds__sparse_select for sparse).
 *
 * Model (docs/simulator.md): every algorithm is a sequence of exchange steps
 * (hvds__p2p_sendrecv_seg); a step's segments go through a two-stage pipeline (transfer at beta
 * seconds per byte per link direction, arriving alpha later, then reduction at gamma seconds per
 * received byte; two segments in flight, as p2p.c keeps them), so a step costs alpha once when
 * alpha is below a segment's transfer. Steps run in lock step (each waits for its neighbour's
 * previous step), so an algorithm's time is the sum of its steps' times on the busiest rank. What
 * hvdsparse-perf measures adds the runtime's per-collective cost: a fixed overhead (thread
 * hand-offs), the negotiation (one small bit-vector allreduce) and the runtime's copies.
 *
 * Plain C; every function is pure (no I/O, no globals) and thread-safe, except
 * hvds_sim_cfg_runtime, which reads the runtime's knobs (param.c caches them), the presets (built
 * on first use; call hvds_sim_preset once before using them from several threads) and the
 * hvds_sim_measure_* timers. Nothing here allocates memory the caller must free.
 */
#ifndef HVDS_SIM_H_
#define HVDS_SIM_H_

#include <stddef.h>

#include "collectives.h"
#include "cost_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The machine. */
typedef struct {
  double alpha;     /* seconds from a segment's last byte sent to its arrival being acted on */
  double beta;      /* seconds per byte on one direction of a rank's link */
  double gamma;     /* seconds per byte reduced (bytes of the received operand), one core */
  double overhead;  /* seconds per runtime collective outside the algorithm (hand-offs, cycle) */
  double cpu_share; /* ranks per core, >= 1: multiplies gamma when ranks share cores */
  double copy;      /* seconds per byte the runtime copies or first-touches around the algorithm
                       (fusion buffer in and out, a fresh output) */
} hvds_sim_net_t;

/* The runtime's configuration: what execute.c and controller.c pass to the algorithms. */
typedef struct {
  hvds_algo_t algorithm;   /* HVDSPARSE_ALLREDUCE_ALGORITHM, or HVDS_ALGO_AUTO */
  size_t rhd_max_bytes;    /* HVDSPARSE_RHD_MAX_BYTES: AUTO runs halving-doubling up to this;
                              0: unset, the runtime's rule for link_beta */
  size_t ring_chunk_bytes; /* HVDSPARSE_RING_CHUNK_BYTES: forced segment, 0 = execute.c's rule */
  size_t fusion_bytes;     /* HVDSPARSE_FUSION_THRESHOLD: largest fused bucket */
  size_t cache_capacity;   /* HVDSPARSE_CACHE_CAPACITY: sets the negotiation vector's length */
  double link_beta;        /* the link the runtime measured at init (s/B), for the ring segment
                              and the halving-doubling switch point; 0: unknown (segments
                              capped at 1 MiB, halving-doubling up to 1 MiB) */
} hvds_sim_cfg_t;

/* Collectives the simulator models. */
typedef enum {
  HVDS_SIM_ALLREDUCE = 0,
  HVDS_SIM_REDUCESCATTER = 1,
  HVDS_SIM_ALLGATHER = 2,
  HVDS_SIM_BROADCAST = 3,
  HVDS_SIM_COLL_COUNT = 4
} hvds_sim_coll_t;

/* Name ("allreduce", ...) of c, and the collective named s (-1 when none). */
const char* hvds_sim_coll_name(hvds_sim_coll_t c);
int hvds_sim_coll_parse(const char* s);

/* Fills *c with the runtime's knobs as hvds_init reads them (environment, else params.def's
 * defaults), through the runtime's own param.c. */
void hvds_sim_cfg_runtime(hvds_sim_cfg_t* c /* OUT */);

/* A network at rate_gbit Gbit/s with the given alpha and gamma; no runtime overhead, no copies. */
hvds_sim_net_t hvds_sim_net_at(double rate_gbit, double alpha, double gamma);

/* ---- Building blocks (seconds) ---- */

/* One hvds__p2p_sendrecv_seg: send sbytes and receive rbytes at once, both cut into seg-byte
 * segments, the received ones reduced when reduce != 0. Pipeline: segment j+1 is posted before j
 * is reduced, segment j+2 only after, as p2p.c does; each segment arrives alpha after its
 * transfer. 0 when nothing moves. */
double hvds_sim_exchange(const hvds_sim_net_t* n, size_t sbytes, size_t rbytes, size_t seg,
                         int reduce);

/* The allreduce algorithms of ops/ on count elements of esize bytes, with the segment seg. */
double hvds_sim_ring_allreduce(const hvds_sim_net_t* n, int P, size_t count, size_t esize,
                               size_t seg);
double hvds_sim_rhd_allreduce(const hvds_sim_net_t* n, int P, size_t count, size_t esize,
                              size_t seg);
/* Ring reduce-scatter of count elements in P blocks split as allreduce_ring.c splits them. */
double hvds_sim_reducescatter(const hvds_sim_net_t* n, int P, size_t count, size_t esize,
                              size_t seg);
/* Ring allgather of total bytes in P equal blocks (bytes / P each, the remainder in the first). */
double hvds_sim_allgather(const hvds_sim_net_t* n, int P, size_t total, size_t seg);
/* Pipelined binomial-tree broadcast of bytes (broadcast_tree.c). */
double hvds_sim_broadcast(const hvds_sim_net_t* n, int P, size_t bytes, size_t seg);

/* Exchange steps (messages on the busiest rank) of the same algorithms: their alpha count. */
int hvds_sim_rhd_steps(int P, size_t count);
int hvds_sim_ring_steps(int P, size_t count);

/* ---- The runtime's choices ---- */

/* The options execute.c builds for a fused allreduce of bytes on P ranks: AUTO or the forced
 * algorithm, rhd_max_bytes, and ring_chunk()'s segment. */
hvds_coll_opts_t hvds_sim_runtime_opts(const hvds_sim_cfg_t* c, size_t bytes, int P);

/* hvds__allreduce_choice() itself ("ring" or "rhd") for bytes on P ranks under c. */
const char* hvds_sim_allreduce_choice(const hvds_sim_cfg_t* c, int P, size_t bytes);

/* The allreduce algorithm alone, as hvds__allreduce would run it for these options. *algo gets
 * "ring" or "rhd" when not NULL. */
double hvds_sim_allreduce(const hvds_sim_net_t* n, int P, size_t count, size_t esize,
                          const hvds_coll_opts_t* o, const char** algo /* OUT */);

/* The runtime's negotiation per cycle: the bit-vector allreduce of controller.c. */
double hvds_sim_negotiation(const hvds_sim_net_t* n, const hvds_sim_cfg_t* c, int P);

/* One collective as the runtime runs it (what hvdsparse-perf times): overhead + negotiation +
 * the runtime's copies (copy per byte, not scaled by cpu_share) + the algorithm. bytes is
 * hvdsparse-perf's size: the allreduce and broadcast tensor (one tensor, in place: no copy), the
 * allgather output (first-touched, own block copied in), the reducescatter input (copied into the
 * fusion buffer; output first-touched and copied out); esize the element size. *algo as above. */
double hvds_sim_runtime_coll(const hvds_sim_net_t* n, const hvds_sim_cfg_t* c, hvds_sim_coll_t coll,
                             int P, size_t bytes, size_t esize, const char** algo /* OUT */);

/* Seconds per byte of the float32 sum kernel (hvds__reduce) over seg-byte segments, timed here
 * for about budget_s seconds; the median of several runs. */
double hvds_sim_measure_gamma(size_t seg, double budget_s);
/* Seconds per byte of a copy into a freshly allocated 64 MiB buffer (page faults included), as
 * the runtime does into a new output; the median of several runs. */
double hvds_sim_measure_copy(double budget_s);

/* ---- Training steps ---- */

/* One gradient bucket: a fused dense bucket, or one sparse tensor. */
typedef struct {
  char name[32];
  double elems;     /* dense size in values: dim x row */
  double density;   /* fraction of the dim indices non-zero on each rank; >= 1: dense */
  double row;       /* values per index (1: COO over elements; D: row-sparse embedding) */
  double overlap;   /* pairwise overlap for the cost model, < 0: independent uniform supports */
  double val_bytes; /* bytes per value */
  double idx_bytes; /* bytes per index */
} hvds_sim_bucket_t;

#define HVDS_SIM_MAX_BUCKETS 64

typedef struct {
  char name[32];
  char about[200]; /* where the sizes come from */
  int n;
  hvds_sim_bucket_t b[HVDS_SIM_MAX_BUCKETS];
} hvds_sim_model_t;

/* Built-in presets: index 0..count-1; NULL past the end. */
int hvds_sim_preset_count(void);
const hvds_sim_model_t* hvds_sim_preset(int i);
const hvds_sim_model_t* hvds_sim_preset_find(const char* name);

/* Appends dense_elems values of dense gradient as fused buckets of at most fusion_bytes (the
 * runtime's threshold). Returns 0, or -1 when the model is full. */
int hvds_sim_model_add_dense(hvds_sim_model_t* m, const char* name, double dense_elems,
                             double val_bytes, size_t fusion_bytes);

/* Parses a bucket file: one bucket per line, "name elements density [row=R] [overlap=W]
 * [val=B] [idx=B]"; '#' starts a comment. Returns 0, or -1 with a message in err. */
int hvds_sim_model_parse(const char* text, hvds_sim_model_t* m /* OUT */, char* err, size_t errlen);

/* Prediction for one bucket on P ranks. */
typedef struct {
  double dense_s;            /* the runtime's dense allreduce of the whole bucket, fused: copied
                                into the fusion buffer and back out */
  double chosen_s;           /* the runtime's choice: dense, or the sparse selector's pick */
  const char* dense_algo;    /* "ring" / "rhd" */
  hvds_sparse_algo_t sparse; /* the selector's pick (HVDS_SPARSE_DENSE for dense buckets) */
  double sparse_costs[HVDS_SPARSE_ALGO_COUNT]; /* the cost model's predictions */
} hvds_sim_bucket_pred_t;

void hvds_sim_bucket_predict(const hvds_sim_net_t* n, const hvds_sim_cfg_t* c,
                             const hvds_sim_bucket_t* b, int P,
                             hvds_sim_bucket_pred_t* out /* OUT */);

/* A step: the sum over buckets (communication only, nothing overlapped with compute). */
typedef struct {
  double dense_s;  /* every bucket by dense allreduce */
  double chosen_s; /* sparse buckets by the runtime's sparse selector */
} hvds_sim_step_pred_t;

hvds_sim_step_pred_t hvds_sim_step_predict(const hvds_sim_net_t* n, const hvds_sim_cfg_t* c,
                                           const hvds_sim_model_t* m, int P);

/* Name of a sparse algorithm id ("dense", "allgather", "ssar_rd", ...). */
const char* hvds_sim_sparse_name(hvds_sparse_algo_t a);

/* ---- Calibration ---- */

/* One measured row: hvdsparse-perf's median time of coll at bytes on P ranks. */
typedef struct {
  hvds_sim_coll_t coll;
  int P;
  size_t bytes;
  double measured_s;
  double predicted_s; /* filled by hvds_sim_fit_predict */
  const char* algo;   /* filled by hvds_sim_fit_predict */
  int used_in_fit;    /* filled by hvds_sim_fit */
} hvds_sim_obs_t;

/* How the fit treats the rows. */
typedef struct {
  size_t small_max; /* rows up to this size fit alpha and overhead (allreduce only) */
  double gamma;     /* measured separately (hvds_sim_measure_gamma) */
  int cores;        /* cores shared by all ranks: cpu_share = max(1, P / cores) */
  double beta0; /* beta for the small rows' byte terms (0: a shaper's burst lets them through) */
} hvds_sim_fit_opts_t;

#define HVDS_SIM_FIT_MAX_P 16

/* A fitted test bed. alpha is fitted per rank count: on a shared machine the latency of a step
 * is mostly scheduling (a rank waking up), which grows with the ranks per core. */
typedef struct {
  hvds_sim_net_t net; /* overhead, beta, gamma, copy; alpha of the smallest P */
  int nP;
  int P[HVDS_SIM_FIT_MAX_P];
  double alpha[HVDS_SIM_FIT_MAX_P]; /* alpha at P[i] */
} hvds_sim_fit_t;

/* The network a row at P ran on: fit's alpha for P (the smallest P's when P was not fitted) and
 * cpu_share for P. */
hvds_sim_net_t hvds_sim_fit_net(const hvds_sim_fit_t* fit, const hvds_sim_fit_opts_t* f, int P);

/* Fits the runtime overhead and alpha by least squares over the small allreduces at the smallest
 * P, alpha at every other P over its small allreduces (overhead fixed), then beta so that the
 * largest allreduce at the smallest P is predicted exactly, then copy so that the largest
 * allgather (else reducescatter) at the smallest P is (copy 0 without one). Marks the rows it
 * used. Returns 0, or -1 when the rows do not determine the fit (fewer than two small sizes at
 * the smallest P, or no larger allreduce there). */
int hvds_sim_fit(hvds_sim_obs_t* rows, int n, const hvds_sim_cfg_t* c, const hvds_sim_fit_opts_t* f,
                 hvds_sim_fit_t* fit /* OUT */);

/* Fills every row's prediction under fit. */
void hvds_sim_fit_predict(hvds_sim_obs_t* rows, int n, const hvds_sim_cfg_t* c,
                          const hvds_sim_fit_opts_t* f, const hvds_sim_fit_t* fit);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_SIM_H_ */
