/* hvdsparse-sim commands: collective, step, models, gamma; and the table helpers (sim_cli.h). */
#include <stdlib.h>
#include <string.h>

#include "sim_cli.h"

/* ---- formatting ---- */

int sim_parse_sizes(const char* s, size_t* lo, size_t* hi, size_t* factor) {
  size_t v[3] = {0, 0, 8};
  int n = 0;
  while (n < 3 && *s) {
    char* end;
    double d = strtod(s, &end);
    if (end == s || d <= 0) return -1;
    size_t mult = *end == 'K' ? 1024 : *end == 'M' ? (1u << 20) : *end == 'G' ? (1u << 30) : 1;
    if (mult > 1) end++;
    v[n++] = (size_t)(d * (double)mult);
    if (*end != ':' && *end != '\0') return -1;
    s = *end == ':' ? end + 1 : end;
  }
  if (n < 2 || v[0] > v[1] || v[2] < 2) return -1;
  *lo = v[0], *hi = v[1], *factor = v[2];
  return 0;
}

const char* sim_fmt_size(size_t bytes, char* buf, size_t len) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  snprintf(buf, len, v == (double)(long long)v ? "%.0f %s" : "%.3g %s", v, units[u]);
  return buf;
}

const char* sim_fmt_time(double s, char* buf, size_t len) {
  if (s < 1e-3)
    snprintf(buf, len, "%.3g us", s * 1e6);
  else if (s < 1)
    snprintf(buf, len, "%.3g ms", s * 1e3);
  else
    snprintf(buf, len, "%.3g s", s);
  return buf;
}

void sim_row(FILE* f, int markdown, int ncells, const char* const* cells) {
  for (int i = 0; i < ncells; i++) {
    if (markdown)
      fprintf(f, "| %s ", cells[i]);
    else
      fprintf(f, i == 0 ? "%-14s" : " %18s", cells[i]);
  }
  fprintf(f, markdown ? "|\n" : "\n");
}

void sim_rule(FILE* f, int markdown, int ncells) {
  if (!markdown) return;
  for (int i = 0; i < ncells; i++) fprintf(f, "|---");
  fprintf(f, "|\n");
}

static hvds_sim_net_t net_for(const sim_opts_t* o, double gbit) {
  hvds_sim_net_t n = hvds_sim_net_at(gbit, o->alpha, o->gamma);
  n.overhead = o->overhead;
  n.copy = o->copy;
  return n;
}

static void print_params(const sim_opts_t* o) {
  printf(
      "# alpha %g s, gamma %g s/B, copy %g s/B, runtime overhead %g s per collective; rhd up "
      "to %zu B, ring segment %s, fusion %zu B\n",
      o->alpha, o->gamma, o->copy, o->overhead, o->cfg.rhd_max_bytes,
      o->cfg.ring_chunk_bytes ? "forced" : "1/4 block in 256 KiB..(2 ms of link, at most 1 MiB)", o->cfg.fusion_bytes);
}

/* ---- collective ---- */

static int coll_wanted(const sim_opts_t* o, hvds_sim_coll_t c) {
  if (o->colls == NULL) return 1;
  const char* name = hvds_sim_coll_name(c);
  size_t n = strlen(name);
  for (const char* p = o->colls; (p = strstr(p, name)) != NULL; p += n)
    if ((p == o->colls || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
  return 0;
}

static void coll_table(const sim_opts_t* o, hvds_sim_coll_t c, double gbit) {
  hvds_sim_net_t n = net_for(o, gbit);
  printf("\n%s at %g Gbit/s: time per operation (algorithm)\n\n", hvds_sim_coll_name(c), gbit);
  char head[SIM_MAX_LIST + 1][32];
  const char* cells[SIM_MAX_LIST + 1];
  snprintf(head[0], sizeof head[0], "size");
  for (int i = 0; i < o->nranks; i++)
    snprintf(head[i + 1], sizeof head[i + 1], "P=%d", o->ranks[i]);
  for (int i = 0; i <= o->nranks; i++) cells[i] = head[i];
  sim_row(stdout, o->markdown, o->nranks + 1, cells);
  sim_rule(stdout, o->markdown, o->nranks + 1);
  for (size_t b = o->size_lo; b <= o->size_hi; b *= o->size_factor) {
    sim_fmt_size(b, head[0], sizeof head[0]);
    for (int i = 0; i < o->nranks; i++) {
      const char* algo = "";
      char t[24];
      double s = hvds_sim_runtime_coll(&n, &o->cfg, c, o->ranks[i], b, 4, &algo);
      snprintf(head[i + 1], sizeof head[i + 1], "%s (%s)", sim_fmt_time(s, t, sizeof t), algo);
    }
    sim_row(stdout, o->markdown, o->nranks + 1, cells);
    if (b > o->size_hi / o->size_factor) break;
  }
}

int sim_cmd_collective(const sim_opts_t* o) {
  print_params(o);
  for (int c = 0; c < HVDS_SIM_COLL_COUNT; c++) {
    if (!coll_wanted(o, (hvds_sim_coll_t)c)) continue;
    for (int g = 0; g < o->ngbit; g++) coll_table(o, (hvds_sim_coll_t)c, o->gbit[g]);
  }
  return 0;
}

/* ---- step ---- */

/* The sparse picks of a step at P ranks, e.g. "zen", into buf ("" when all dense). */
static const char* picks(const hvds_sim_net_t* n, const sim_opts_t* o, const hvds_sim_model_t* m,
                         int P, char* buf, size_t len) {
  buf[0] = '\0';
  for (int i = 0; i < m->n; i++) {
    if (m->b[i].density >= 1) continue;
    hvds_sim_bucket_pred_t bp;
    hvds_sim_bucket_predict(n, &o->cfg, &m->b[i], P, &bp);
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", used ? "+" : "", hvds_sim_sparse_name(bp.sparse));
  }
  return buf;
}

static void step_table(const sim_opts_t* o, const hvds_sim_model_t* m) {
  printf(
      "\nmodel %s: %s\ncommunication per step: dense allreduce of every bucket / the runtime's "
      "choice (sparse pick) / speedup\n\n",
      m->name, m->about);
  char txt[1 + 3 * SIM_MAX_LIST][128];
  const char* cells[1 + 3 * SIM_MAX_LIST];
  int nc = 1 + 3 * o->ngbit;
  for (int i = 0; i < nc; i++) cells[i] = txt[i];
  snprintf(txt[0], sizeof txt[0], "ranks");
  for (int g = 0; g < o->ngbit; g++) {
    snprintf(txt[1 + 3 * g], sizeof txt[0], "%g Gb/s dense", o->gbit[g]);
    snprintf(txt[2 + 3 * g], sizeof txt[0], "%g Gb/s chosen", o->gbit[g]);
    snprintf(txt[3 + 3 * g], sizeof txt[0], "speedup");
  }
  sim_row(stdout, o->markdown, nc, cells);
  sim_rule(stdout, o->markdown, nc);
  for (int r = 0; r < o->nranks; r++) {
    int P = o->ranks[r];
    snprintf(txt[0], sizeof txt[0], "%d", P);
    for (int g = 0; g < o->ngbit; g++) {
      hvds_sim_net_t n = net_for(o, o->gbit[g]);
      hvds_sim_step_pred_t s = hvds_sim_step_predict(&n, &o->cfg, m, P);
      char t[24], pk[96];
      sim_fmt_time(s.dense_s, txt[1 + 3 * g], sizeof txt[0]);
      picks(&n, o, m, P, pk, sizeof pk);
      snprintf(txt[2 + 3 * g], sizeof txt[0], "%s%s%s", sim_fmt_time(s.chosen_s, t, sizeof t),
               pk[0] ? " " : "", pk);
      snprintf(txt[3 + 3 * g], sizeof txt[0], "%.2fx", s.dense_s / s.chosen_s);
    }
    sim_row(stdout, o->markdown, nc, cells);
  }
}

/* Per-bucket breakdown at P ranks for every rate. */
static void detail_table(const sim_opts_t* o, const hvds_sim_model_t* m, int P) {
  for (int g = 0; g < o->ngbit; g++) {
    hvds_sim_net_t n = net_for(o, o->gbit[g]);
    printf("\n%s at P=%d, %g Gbit/s, per bucket\n\n", m->name, P, o->gbit[g]);
    const char* head[] = {"bucket", "values", "density", "dense", "chosen", "pick"};
    sim_row(stdout, o->markdown, 6, head);
    sim_rule(stdout, o->markdown, 6);
    for (int i = 0; i < m->n; i++) {
      hvds_sim_bucket_pred_t bp;
      hvds_sim_bucket_predict(&n, &o->cfg, &m->b[i], P, &bp);
      char v[24], d[24], t1[32], t2[24], t3[24];
      snprintf(v, sizeof v, "%.4g", m->b[i].elems);
      snprintf(d, sizeof d, "%.4g", m->b[i].density);
      snprintf(t1, sizeof t1, "%s (%s)", sim_fmt_time(bp.dense_s, t3, sizeof t3), bp.dense_algo);
      sim_fmt_time(bp.chosen_s, t2, sizeof t2);
      const char* row[] = {m->b[i].name, v, d, t1, t2, hvds_sim_sparse_name(bp.sparse)};
      sim_row(stdout, o->markdown, 6, row);
    }
  }
}

static int load_model(const char* path, hvds_sim_model_t* m) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "no preset or file named '%s'\n", path);
    return -1;
  }
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  char err[160];
  if (hvds_sim_model_parse(text, m, err, sizeof err) != 0) {
    fprintf(stderr, "%s: %s\n", path, err);
    return -1;
  }
  snprintf(m->name, sizeof m->name, "%.31s", path);
  snprintf(m->about, sizeof m->about, "buckets from %.150s", path);
  return 0;
}

int sim_cmd_step(const sim_opts_t* o, const char* file) {
  const char* which = o->model ? o->model : file;
  if (which == NULL) {
    print_params(o);
    for (int i = 0; i < hvds_sim_preset_count(); i++) {
      step_table(o, hvds_sim_preset(i));
      if (o->detail > 0) detail_table(o, hvds_sim_preset(i), o->detail);
    }
    return 0;
  }
  static hvds_sim_model_t loaded;
  const hvds_sim_model_t* m = hvds_sim_preset_find(which);
  if (m == NULL) {
    if (load_model(which, &loaded) != 0) return 1;
    m = &loaded;
  }
  print_params(o);
  step_table(o, m);
  if (o->detail > 0) detail_table(o, m, o->detail);
  return 0;
}

/* ---- models, gamma ---- */

int sim_cmd_models(const sim_opts_t* o) {
  for (int i = 0; i < hvds_sim_preset_count(); i++) {
    const hvds_sim_model_t* m = hvds_sim_preset(i);
    printf("\n%s: %s\n\n", m->name, m->about);
    const char* head[] = {"bucket", "values", "bytes", "density", "row", "overlap"};
    sim_row(stdout, o->markdown, 6, head);
    sim_rule(stdout, o->markdown, 6);
    for (int b = 0; b < m->n; b++) {
      const hvds_sim_bucket_t* x = &m->b[b];
      char v[24], by[24], d[24], r[24], w[24];
      snprintf(v, sizeof v, "%.0f", x->elems);
      sim_fmt_size((size_t)(x->elems * x->val_bytes), by, sizeof by);
      snprintf(d, sizeof d, "%g", x->density);
      snprintf(r, sizeof r, "%g", x->row);
      snprintf(w, sizeof w, x->density >= 1 ? "-" : x->overlap < 0 ? "uniform" : "%g", x->overlap);
      const char* row[] = {x->name, v, by, d, r, w};
      sim_row(stdout, o->markdown, 6, row);
    }
  }
  return 0;
}

int sim_cmd_gamma(const sim_opts_t* o) {
  (void)o;
  double cp = hvds_sim_measure_copy(1.0);
  printf("copy %.4g s/B (%.3g GB/s) memcpy into a fresh 64 MiB buffer, page faults included\n", cp,
         cp > 0 ? 1e-9 / cp : 0);
  static const size_t segs[] = {256u << 10, 1u << 20, 4u << 20};
  for (size_t i = 0; i < sizeof segs / sizeof segs[0]; i++) {
    double g = hvds_sim_measure_gamma(segs[i], 1.0);
    printf("gamma %.4g s/B (%.3g GB/s) float32 sum, %zu KiB segments into a 64 MiB buffer\n", g,
           g > 0 ? 1e-9 / g : 0, segs[i] >> 10);
  }
  return 0;
}
