/* hvdsparse-sim fit: reads hvdsparse-perf CSV rows (every impl,coll,np,bytes,...,time_us line;
 * other lines are skipped), fits alpha, beta and the runtime overhead (gamma given), and prints
 * the model's prediction for every row next to the measurement, as a table, a CSV and markdown.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_cli.h"

#define MAX_ROWS 1024

/* Parses one hvdsparse-perf CSV line into r. Returns 0, or -1 for a header or other line. */
static int parse_row(char* line, hvds_sim_obs_t* r) {
  char* f[13];
  int n = 0;
  for (char* p = line; n < 13;) {
    f[n++] = p;
    p = strchr(p, ',');
    if (p == NULL) break;
    *p++ = '\0';
  }
  if (n < 8) return -1;
  int c = hvds_sim_coll_parse(f[1]);
  char *e1, *e2, *e3;
  long np = strtol(f[2], &e1, 10);
  double bytes = strtod(f[3], &e2), us = strtod(f[7], &e3);
  if (c < 0 || *e1 || *e2 || np < 1 || bytes <= 0 || us <= 0) return -1;
  memset(r, 0, sizeof *r);
  r->coll = (hvds_sim_coll_t)c;
  r->P = (int)np;
  r->bytes = (size_t)bytes;
  r->measured_s = us * 1e-6;
  (void)e3;
  return 0;
}

static int read_rows(const char* path, hvds_sim_obs_t* rows, int max) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  char line[512];
  int n = 0;
  while (n < max && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (parse_row(line, &rows[n]) == 0) n++;
  }
  fclose(f);
  return n;
}

static double err_pct(const hvds_sim_obs_t* r) {
  return 100.0 * (r->predicted_s - r->measured_s) / r->measured_s;
}

static void write_csv(FILE* f, const hvds_sim_obs_t* rows, int n) {
  fprintf(f, "coll,np,bytes,algo,measured_us,predicted_us,error_pct,used_in_fit\n");
  for (int i = 0; i < n; i++) {
    const hvds_sim_obs_t* r = &rows[i];
    fprintf(f, "%s,%d,%zu,%s,%.2f,%.2f,%.1f,%d\n", hvds_sim_coll_name(r->coll), r->P, r->bytes,
            r->algo, r->measured_s * 1e6, r->predicted_s * 1e6, err_pct(r), r->used_in_fit);
  }
}

static void write_table(FILE* f, int markdown, const hvds_sim_obs_t* rows, int n) {
  const char* head[] = {"coll", "P", "size", "algo", "measured", "predicted", "error", "fit"};
  sim_row(f, markdown, 8, head);
  sim_rule(f, markdown, 8);
  for (int i = 0; i < n; i++) {
    const hvds_sim_obs_t* r = &rows[i];
    char p[16], sz[24], m[24], pr[24], e[24];
    snprintf(p, sizeof p, "%d", r->P);
    sim_fmt_size(r->bytes, sz, sizeof sz);
    sim_fmt_time(r->measured_s, m, sizeof m);
    sim_fmt_time(r->predicted_s, pr, sizeof pr);
    snprintf(e, sizeof e, "%+.1f%%", err_pct(r));
    const char* row[] = {hvds_sim_coll_name(r->coll), p, sz, r->algo, m, pr, e,
                         r->used_in_fit ? "fit" : ""};
    sim_row(f, markdown, 8, row);
  }
}

/* Worst and median |error| per P over rows of at least min_bytes that were not fitted. */
static void summary(FILE* f, const char* bullet, const hvds_sim_obs_t* rows, int n,
                    size_t min_bytes) {
  int seen[64], ns = 0;
  for (int i = 0; i < n && ns < 64; i++) {
    int dup = 0;
    for (int k = 0; k < ns; k++) dup |= seen[k] == rows[i].P;
    if (!dup) seen[ns++] = rows[i].P;
  }
  for (int k = 0; k < ns; k++) {
    double worst = 0, sum = 0;
    int cnt = 0, within = 0;
    for (int i = 0; i < n; i++) {
      const hvds_sim_obs_t* r = &rows[i];
      if (r->P != seen[k] || r->bytes < min_bytes || r->used_in_fit) continue;
      double e = fabs(err_pct(r));
      if (e > worst) worst = e;
      sum += e, cnt++, within += e <= 25.0;
    }
    if (cnt > 0)
      fprintf(f,
              "%sP=%d, sizes >= %zu B, not fitted: %d rows, %d within 25%%, mean |error| %.1f%%, "
              "worst %.1f%%\n",
              bullet, seen[k], min_bytes, cnt, within, sum / cnt, worst);
  }
}

int sim_cmd_fit(const sim_opts_t* o, const char* file) {
  if (file == NULL) {
    fprintf(stderr, "fit needs a CSV file of hvdsparse-perf rows\n");
    return 2;
  }
  static hvds_sim_obs_t rows[MAX_ROWS];
  int n = read_rows(file, rows, MAX_ROWS);
  if (n <= 0) {
    fprintf(stderr, "%s: no hvdsparse-perf rows\n", file);
    return 1;
  }
  hvds_sim_fit_opts_t f = {o->small_max, o->gamma, o->cores, o->beta0};
  hvds_sim_fit_t fit;
  if (hvds_sim_fit(rows, n, &o->cfg, &f, &fit) != 0) {
    fprintf(stderr,
            "%s: need two or more small allreduce sizes (<= %zu B, different step "
            "counts) and one larger allreduce at the smallest rank count\n",
            file, o->small_max);
    return 1;
  }
  hvds_sim_fit_predict(rows, n, &o->cfg, &f, &fit);
  const hvds_sim_net_t* net = &fit.net;
  char alphas[256] = "";
  for (int i = 0; i < fit.nP; i++) {
    size_t used = strlen(alphas);
    snprintf(alphas + used, sizeof alphas - used, "%s%.3g us at P=%d", i ? ", " : "",
             fit.alpha[i] * 1e6, fit.P[i]);
  }
  printf(
      "# fit: alpha %s; beta %.4g s/B (%.4g Gbit/s), copy %.3g s/B, runtime overhead %.3g s; "
      "gamma %.3g s/B (given), cores %d\n",
      alphas, net->beta, 8e-9 / net->beta, net->copy, net->overhead, net->gamma, o->cores);
  write_table(stdout, o->markdown, rows, n);
  summary(stdout, "", rows, n, 0);
  summary(stdout, "", rows, n, 4u << 20);
  if (o->csv_out != NULL) {
    FILE* c = fopen(o->csv_out, "w");
    if (c == NULL) return 1;
    write_csv(c, rows, n);
    fclose(c);
  }
  if (o->md_out != NULL) {
    FILE* m = fopen(o->md_out, "w");
    if (m == NULL) return 1;
    fprintf(m,
            "Fitted: alpha %s; beta %.4g ns/B (%.4g Gbit/s); copy %.3g ns/B; runtime overhead "
            "%.3g us. Measured locally: gamma %.3g ns/B. %d cores.\n\n",
            alphas, net->beta * 1e9, 8e-9 / net->beta, net->copy * 1e9, net->overhead * 1e6,
            net->gamma * 1e9, o->cores);
    write_table(m, 1, rows, n);
    fprintf(m, "\n");
    summary(m, "- ", rows, n, 0);
    summary(m, "- ", rows, n, 4u << 20);
    fclose(m);
  }
  return 0;
}
