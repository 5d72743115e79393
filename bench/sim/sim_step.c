/* Training steps: gradient buckets, the built-in model presets, the bucket-file format, and the
 * per-bucket prediction through the runtime's dense rule and the sparse cost model (sim.h).
 *
 * A sparse bucket is priced as the sparse allreduce would run it (ops/sparse/sparse_allreduce.c):
 * the runtime's per-collective cost, the preamble (a halving-doubling allreduce of 6 int64 per
 * rank), then the algorithm hvds__sparse_select() picks at its predicted cost. When the pick is
 * dense, the dense baseline's allreduce is priced with this simulator's dense model under the
 * options the sparse path passes (AUTO with the ops/ defaults), since that is what would run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sparse_allreduce.h"

#define PRESET_FUSION ((size_t)128 << 20) /* params.def's FUSION_THRESHOLD default */

const char* hvds_sim_sparse_name(hvds_sparse_algo_t a) {
  if (a == HVDS_SPARSE_AUTO) return "auto";
  const char* s = hvds__sparse_algo_name(a);
  return s != NULL ? s : "?";
}

/* ---- models ---- */

static hvds_sim_bucket_t* add_bucket(hvds_sim_model_t* m, const char* name) {
  if (m->n >= HVDS_SIM_MAX_BUCKETS) return NULL;
  hvds_sim_bucket_t* b = &m->b[m->n++];
  memset(b, 0, sizeof *b);
  snprintf(b->name, sizeof b->name, "%s", name);
  b->density = 1;
  b->row = 1;
  b->overlap = -1;
  b->val_bytes = 4;
  b->idx_bytes = 4;
  return b;
}

int hvds_sim_model_add_dense(hvds_sim_model_t* m, const char* name, double dense_elems,
                             double val_bytes, size_t fusion_bytes) {
  double per = fusion_bytes > 0 ? (double)(fusion_bytes / (size_t)val_bytes) : dense_elems;
  int i = 0;
  for (double left = dense_elems; left > 0; left -= per, i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "%s.%d", name, i);
    hvds_sim_bucket_t* b = add_bucket(m, nm);
    if (b == NULL) return -1;
    b->elems = left < per ? left : per;
    b->val_bytes = val_bytes;
  }
  return 0;
}

static hvds_sim_bucket_t* add_sparse(hvds_sim_model_t* m, const char* name, double elems,
                                     double density, double overlap) {
  hvds_sim_bucket_t* b = add_bucket(m, name);
  b->elems = elems;
  b->density = density;
  b->overlap = overlap;
  return b;
}

static hvds_sim_model_t presets[4];
static int presets_built;

/* The presets. Sizes are documented in docs/simulator.md with their sources. */
static void build_presets(void) {
  if (presets_built) return;
  hvds_sim_model_t* m = &presets[0];
  snprintf(m->name, sizeof m->name, "lstm");
  snprintf(m->about, sizeof m->about,
           "ZEN's LSTM LM (One Billion Word): 20M dense + embedding 793471x512 = 406M at "
           "d=1.13%%, element COO");
  hvds_sim_model_add_dense(m, "dense", 20e6, 4, PRESET_FUSION);
  add_sparse(m, "embedding", 793471.0 * 512, 0.0113, -1);

  m = &presets[1];
  snprintf(m->name, sizeof m->name, "dlrm");
  snprintf(m->about, sizeof m->about,
           "DLRM-like CTR model sized as ZEN's DeepFM (Criteo): 68M dense + 214M embedding "
           "values at d=2.80%%");
  hvds_sim_model_add_dense(m, "dense", 68e6, 4, PRESET_FUSION);
  add_sparse(m, "embedding", 214e6, 0.028, -1);

  m = &presets[2];
  snprintf(m->name, sizeof m->name, "resnet50");
  snprintf(m->about, sizeof m->about,
           "ResNet-50: 25,557,032 dense fp32 parameters, fused by the 128 MiB threshold");
  hvds_sim_model_add_dense(m, "dense", 25557032, 4, PRESET_FUSION);

  m = &presets[3];
  snprintf(m->name, sizeof m->name, "bert");
  snprintf(m->about, sizeof m->about,
           "BERT-large: 303.9M dense in 128 MiB buckets + word embedding 30522x1024 at "
           "d=1.06%%, overlap 0.705 (ZEN: 1.06%% -> 40.8%% over 128 GPUs)");
  hvds_sim_model_add_dense(m, "dense", 335141888.0 - 30522.0 * 1024, 4, PRESET_FUSION);
  add_sparse(m, "embedding", 30522.0 * 1024, 0.0106, 0.705);
  presets_built = 1;
}

int hvds_sim_preset_count(void) { return (int)(sizeof presets / sizeof presets[0]); }

const hvds_sim_model_t* hvds_sim_preset(int i) {
  build_presets();
  return i >= 0 && i < hvds_sim_preset_count() ? &presets[i] : NULL;
}

const hvds_sim_model_t* hvds_sim_preset_find(const char* name) {
  for (int i = 0; i < hvds_sim_preset_count(); i++)
    if (strcmp(hvds_sim_preset(i)->name, name) == 0) return hvds_sim_preset(i);
  return NULL;
}

/* ---- bucket files ---- */

/* Parses one "key=value" option of a bucket line into b. */
static int parse_opt(const char* tok, hvds_sim_bucket_t* b) {
  const char* eq = strchr(tok, '=');
  if (eq == NULL) return -1;
  char* end;
  double v = strtod(eq + 1, &end);
  if (end == eq + 1 || *end != '\0') return -1;
  size_t k = (size_t)(eq - tok);
  if (k == 3 && !strncmp(tok, "row", 3) && v >= 1)
    b->row = v;
  else if (k == 7 && !strncmp(tok, "overlap", 7) && v <= 1)
    b->overlap = v;
  else if (k == 3 && !strncmp(tok, "val", 3) && v > 0)
    b->val_bytes = v;
  else if (k == 3 && !strncmp(tok, "idx", 3) && v > 0)
    b->idx_bytes = v;
  else
    return -1;
  return 0;
}

static int parse_line(char* line, hvds_sim_model_t* m, int lineno, char* err, size_t errlen) {
  char* hash = strchr(line, '#');
  if (hash) *hash = '\0';
  char* save = NULL;
  char* tok[8];
  int nt = 0;
  for (char* t = strtok_r(line, " \t\r", &save); t && nt < 8; t = strtok_r(NULL, " \t\r", &save))
    tok[nt++] = t;
  if (nt == 0) return 0;
  char *e1, *e2;
  double elems = nt >= 3 ? strtod(tok[1], &e1) : 0, dens = nt >= 3 ? strtod(tok[2], &e2) : 0;
  if (nt < 3 || *e1 || *e2 || elems <= 0 || dens <= 0) {
    snprintf(err, errlen, "line %d: want 'name elements density [key=value...]'", lineno);
    return -1;
  }
  hvds_sim_bucket_t* b = add_bucket(m, tok[0]);
  if (b == NULL) {
    snprintf(err, errlen, "line %d: more than %d buckets", lineno, HVDS_SIM_MAX_BUCKETS);
    return -1;
  }
  b->elems = elems;
  b->density = dens;
  for (int i = 3; i < nt; i++)
    if (parse_opt(tok[i], b) != 0) {
      snprintf(err, errlen, "line %d: bad option '%s' (row=R>=1 overlap=W<=1 val=B idx=B)", lineno,
               tok[i]);
      return -1;
    }
  return 0;
}

int hvds_sim_model_parse(const char* text, hvds_sim_model_t* m, char* err, size_t errlen) {
  memset(m, 0, sizeof *m);
  snprintf(m->name, sizeof m->name, "file");
  char* copy = strdup(text);
  if (copy == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = 0, lineno = 0;
  // Lines are split by hand (not strtok) so that empty lines still count in the messages.
  for (char* p = copy; p != NULL && rc == 0;) {
    char* nl = strchr(p, '\n');
    if (nl) *nl = '\0';
    rc = parse_line(p, m, ++lineno, err, errlen);
    p = nl ? nl + 1 : NULL;
  }
  free(copy);
  if (rc == 0 && m->n == 0) {
    snprintf(err, errlen, "no buckets");
    rc = -1;
  }
  return rc;
}

/* ---- predictions ---- */

/* The runtime's per-collective cost: overhead plus the negotiation. */
static double per_op(const hvds_sim_net_t* n, const hvds_sim_cfg_t* c, int P) {
  return n->overhead + hvds_sim_negotiation(n, c, P);
}

void hvds_sim_bucket_predict(const hvds_sim_net_t* n, const hvds_sim_cfg_t* c,
                             const hvds_sim_bucket_t* b, int P, hvds_sim_bucket_pred_t* out) {
  memset(out, 0, sizeof *out);
  size_t esize = (size_t)b->val_bytes, count = (size_t)b->elems;
  hvds_coll_opts_t o = hvds_sim_runtime_opts(c, count * esize, P);
  // A dense bucket is fused from many tensors: copied into the fusion buffer and back out. (A
  // sparse bucket's dense alternative is one tensor, reduced in place.)
  double pass = (double)(count * esize) * n->copy;
  out->dense_s = per_op(n, c, P) + (b->density >= 1 ? 2 * pass : 0) +
                 hvds_sim_allreduce(n, P, count, esize, &o, &out->dense_algo);
  out->chosen_s = out->dense_s;
  out->sparse = HVDS_SPARSE_DENSE;
  if (b->density >= 1 || P <= 1) return;
  hvds_sparse_problem_t x = {P,
                             b->elems / b->row,
                             b->row,
                             b->val_bytes,
                             b->idx_bytes,
                             b->density * (b->elems / b->row),
                             b->overlap,
                             0,
                             0,
                             0,
                             0,
                             0,
                             0};
  hvds_sparse_net_t net = {n->alpha, n->beta, 0, 0,
                           0,        0,       0};  // the simulator prices the network only
  out->sparse = hvds__sparse_select(&x, &net, out->sparse_costs);
  // sparse_allreduce.c: the preamble, a halving-doubling allreduce of 6 int64 per rank.
  hvds_coll_opts_t sopt = {0, HVDS_ALGO_RHD, 0, 0};
  double pre = per_op(n, c, P) + hvds_sim_allreduce(n, P, (size_t)P * 6, 8, &sopt, NULL);
  if (out->sparse == HVDS_SPARSE_DENSE) {
    hvds_coll_opts_t dopt = {0, HVDS_ALGO_AUTO, 0, 0};  // the dense baseline's options
    // dense_baseline.c scatters the entries into a fresh zero-filled tensor first.
    out->chosen_s = pre + pass + hvds_sim_allreduce(n, P, count, esize, &dopt, NULL);
  } else {
    out->chosen_s = pre + out->sparse_costs[out->sparse];
  }
}

hvds_sim_step_pred_t hvds_sim_step_predict(const hvds_sim_net_t* n, const hvds_sim_cfg_t* c,
                                           const hvds_sim_model_t* m, int P) {
  hvds_sim_step_pred_t s = {0, 0};
  for (int i = 0; i < m->n; i++) {
    hvds_sim_bucket_pred_t bp;
    hvds_sim_bucket_predict(n, c, &m->b[i], P, &bp);
    s.dense_s += bp.dense_s;
    s.chosen_s += bp.chosen_s;
  }
  return s;
}
