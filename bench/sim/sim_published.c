/* hvdsparse-sim published: the sparse cost model (ops/sparse/cost_model.c) and the dense model
 * against two published sets of figures, as digested in design/papers/:
 *   - SparCML's alpha-beta model table (sparcml.md section 3.6): N = 2^24 f32 values with u32
 *     indices, uniform random supports, alpha 1.5 us, 9.5 GB/s;
 *   - ZEN's communication time for the LSTM LM at 16 machines and 25 Gbit/s (zen.md section 4:
 *     6.77x over AllReduce), under stated assumptions about what the paper does not give.
 */
#include <string.h>

#include "sim_cli.h"

typedef struct {
  int P;
  double d;
  double kn, rd, sag, dsar; /* E[K]/N and milliseconds, as printed in the digest */
  const char* best;
  double gain; /* best vs dense */
} sparcml_row_t;

static const sparcml_row_t kSparcml[] = {
    {8, 1e-3, 0.008, 0.10, 0.13, 6.2, "ssar_recursive_doubling", 120},
    {8, 1e-2, 0.077, 0.98, 1.09, 6.3, "ssar_recursive_doubling", 12.6},
    {8, 5e-2, 0.34, 4.71, 4.79, 6.8, "RD ~ SAG", 2.6},
    {64, 1e-3, 0.062, 0.89, 0.98, 7.1, "ssar_recursive_doubling", 15.6},
    {64, 1e-2, 0.47, 8.06, 6.84, 7.2, "ssar_split_allgather", 2.0},
    {64, 5e-2, 0.96, 23.6, 7.75, 7.75, "dsar_split_allgather", 1.8},
};

static void cell_pair(char* buf, size_t len, double published, double ours) {
  snprintf(buf, len, "%.3g / %.3g", published, ours);
}

/* The cheapest of SparCML's three algorithms (the digest's set), by the cost model. */
static hvds_sparse_algo_t best_of_three(const double* c) {
  hvds_sparse_algo_t a = HVDS_SPARSE_SSAR_RD;
  if (c[HVDS_SPARSE_SSAR_SAG] < c[a]) a = HVDS_SPARSE_SSAR_SAG;
  if (c[HVDS_SPARSE_DSAR] < c[a]) a = HVDS_SPARSE_DSAR;
  return a;
}

static void sparcml(const sim_opts_t* o) {
  const double N = 16777216;
  hvds_sparse_net_t net = {1.5e-6, 1.0 / 9.5e9, 0, 0, 0, 0, 0};
  hvds_sim_net_t dn = {net.alpha, net.beta, 0, 0, 1, 0};
  printf(
      "\nSparCML model table (sparcml.md 3.6): N = 2^24, f32 values, u32 indices, uniform "
      "supports, alpha 1.5 us, 9.5 GB/s, gamma 0. Cells: digest / ours (ms); 'best' among "
      "RD, SAG, DSAR as in the digest; 'selector' over all six of ops/sparse.\n\n");
  const char* head[] = {"P",     "d",    "E[K]/N",   "RD",       "SAG",     "DSAR",
                        "dense", "best", "vs dense", "selector", "vs dense"};
  sim_row(stdout, o->markdown, 11, head);
  sim_rule(stdout, o->markdown, 11);
  for (size_t i = 0; i < sizeof kSparcml / sizeof kSparcml[0]; i++) {
    const sparcml_row_t* r = &kSparcml[i];
    // As published: full-width indices on the wire (pack_indices -1).
    hvds_sparse_problem_t x = {r->P, N, 1, 4, 4, r->d * N, -1, 0, 0, 0, -1, 0, 0};
    double c[HVDS_SPARSE_ALGO_COUNT];
    hvds_sparse_algo_t a = hvds__sparse_select(&x, &net, c), b3 = best_of_three(c);
    hvds_coll_opts_t opt = hvds_sim_runtime_opts(&o->cfg, (size_t)N * 4, r->P);
    const char* dalgo;
    double dense = hvds_sim_allreduce(&dn, r->P, (size_t)N, 4, &opt, &dalgo);
    double digest_dense = r->P == 8 ? 12.4 : 13.9;
    char p[8], d[16], kn[32], rd[32], sag[32], ds[32], de[40], pk[64], g[32], sel[32], g2[16];
    snprintf(p, sizeof p, "%d", r->P);
    snprintf(d, sizeof d, "%g", r->d);
    cell_pair(kn, sizeof kn, r->kn, hvds__sparse_union(&x, r->P) / N);
    cell_pair(rd, sizeof rd, r->rd, c[HVDS_SPARSE_SSAR_RD] * 1e3);
    cell_pair(sag, sizeof sag, r->sag, c[HVDS_SPARSE_SSAR_SAG] * 1e3);
    cell_pair(ds, sizeof ds, r->dsar, c[HVDS_SPARSE_DSAR] * 1e3);
    snprintf(de, sizeof de, "%.3g / %.3g %s", digest_dense, dense * 1e3, dalgo);
    snprintf(pk, sizeof pk, "%s / %s", r->best, hvds_sim_sparse_name(b3));
    snprintf(g, sizeof g, "%.3gx / %.3gx", r->gain, dense / c[b3]);
    snprintf(sel, sizeof sel, "%s", hvds_sim_sparse_name(a));
    snprintf(g2, sizeof g2, "%.3gx", dense / c[a]);
    const char* row[] = {p, d, kn, rd, sag, ds, de, pk, g, sel, g2};
    sim_row(stdout, o->markdown, 11, row);
  }
}

/* ---- ZEN ---- */

typedef struct {
  const char* name;
  double density; /* per machine, before the cross-machine sync */
  double overlap; /* cost-model overlap; < 0 uniform */
} zen_case_t;

static void zen_row(const sim_opts_t* o, const zen_case_t* z, const hvds_sim_net_t* dn,
                    const hvds_sparse_net_t* net) {
  const int P = 16;
  const double emb = 793471.0 * 512, mlp = 20e6;
  // As published: full-width indices on the wire (pack_indices -1).
  hvds_sparse_problem_t x = {P, emb, 1, 4, 4, z->density * emb, z->overlap, 0, 0, 0, -1, 0, 0};
  double c[HVDS_SPARSE_ALGO_COUNT];
  hvds_sparse_algo_t a = hvds__sparse_select(&x, net, c);
  hvds_coll_opts_t oe = hvds_sim_runtime_opts(&o->cfg, (size_t)emb * 4, P);
  hvds_coll_opts_t om = hvds_sim_runtime_opts(&o->cfg, (size_t)mlp * 4, P);
  double t_mlp = hvds_sim_allreduce(dn, P, (size_t)mlp, 4, &om, NULL);
  double t_ar = hvds_sim_allreduce(dn, P, (size_t)emb, 4, &oe, NULL) + t_mlp;
  double t_zen = c[HVDS_SPARSE_ZEN] + t_mlp, t_rd = c[HVDS_SPARSE_SSAR_RD] + t_mlp;
  double t_ag = c[HVDS_SPARSE_ALLGATHER] + t_mlp;
  char d[16], kn[16], zen[24], ar[24], r1[16], r2[16], r3[16];
  snprintf(d, sizeof d, "%.3g%%", z->density * 100);
  snprintf(kn, sizeof kn, "%.3g", hvds__sparse_union(&x, P) / emb);
  sim_fmt_time(t_zen, zen, sizeof zen);
  sim_fmt_time(t_ar, ar, sizeof ar);
  snprintf(r1, sizeof r1, "%.2fx", t_ar / t_zen);
  snprintf(r2, sizeof r2, "%.2fx", t_rd / t_zen);
  snprintf(r3, sizeof r3, "%.2fx", t_ag / t_zen);
  const char* row[] = {z->name, d, kn, zen, ar, r1, r2, r3, hvds_sim_sparse_name(a)};
  sim_row(stdout, o->markdown, 9, row);
}

static void zen(const sim_opts_t* o) {
  hvds_sparse_net_t net = {o->alpha, 8.0 / 25e9, 0, 0, 0, 0, 0};
  hvds_sim_net_t dn = {net.alpha, net.beta, 0, 0, 1, 0};  // GPU reduction: gamma left out
  printf(
      "\nZEN, LSTM LM at 16 machines, 25 Gbit/s (zen.md 4: communication 6.77x over AllReduce)."
      "\nEmbedding 793471x512 = 406M values (f32, u32 indices, COO per element as ZEN hashes "
      "flat indices), 20M dense values allreduced in both; alpha %g s, gamma 0.\n"
      "Columns: per-machine density, union over 16 machines / N, ZEN step, AllReduce step, "
      "AllReduce/ZEN, SparCML RD/ZEN, AGsparse/ZEN, the selector's pick.\n\n",
      o->alpha);
  // 8 GPUs per machine at 1.13% each: the machine's support is the union of 8.
  double d8 = 1, q = 1 - 0.0113;
  for (int i = 0; i < 8; i++) d8 *= q;
  d8 = 1 - d8;
  const zen_case_t cases[] = {
      {"d 1.13%, uniform supports", 0.0113, -1},
      {"d 1.13%, overlap 0.5", 0.0113, 0.5},
      {"d 1.13%, overlap 0.9", 0.0113, 0.9},
      {"d 1.13%, disjoint", 0.0113, 0},
      {"8 GPUs/machine merged, uniform", d8, -1},
      {"8 GPUs/machine merged, overlap 0.5", 0.0113 * (0.5 + 8 * 0.5), 0.5},
  };
  const char* head[] = {"case",   "d",      "K16/N",  "ZEN", "AllReduce",
                        "AR/ZEN", "RD/ZEN", "AG/ZEN", "pick"};
  sim_row(stdout, o->markdown, 9, head);
  sim_rule(stdout, o->markdown, 9);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) zen_row(o, &cases[i], &dn, &net);
}

int sim_cmd_published(const sim_opts_t* o) {
  sparcml(o);
  zen(o);
  return 0;
}
