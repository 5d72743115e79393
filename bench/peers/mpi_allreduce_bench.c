/* mpi_allreduce_bench: MPI_Allreduce (in place, float32, MPI_SUM) over the same size sweep,
 * timing and output as hvdsparse-perf, for comparison. Run it under mpirun, e.g.
 *   mpirun -np 4 --mca btl tcp,self mpi_allreduce_bench -b 1M -e 256M -f 4 --csv
 * (TCP, like for like with hvdsparse and Gloo) or with Open MPI's defaults (shared memory). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static int rank_, size_;

// Runs one size of count floats and fills *row; returns 0, or -1 when out of memory.
static int run_size(const hvds_bench_sweep_t* s, size_t count, double* stats,
                    hvds_bench_row_t* row) {
  float* buf = malloc(count * sizeof(float));
  if (buf == NULL) return -1;
  hvds_bench_fill_f32(buf, count, rank_);
  int n = (int)count;
  for (int i = 0; i < s->warmup; i++)
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < s->iters; i++) {
    double t0 = hvds_bench_now_us();
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    stats[i] = hvds_bench_now_us() - t0;
  }
  long wrong = -1;
  double max_err = 0;
  if (s->check) {  // the timed iterations reduced their own results again: start afresh
    hvds_bench_fill_f32(buf, count, rank_);
    MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    wrong = hvds_bench_check_sum_f32(buf, count, size_, &max_err);
  }
  free(buf);
  stats[s->iters] = max_err;
  MPI_Allreduce(MPI_IN_PLACE, stats, s->iters + 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (wrong >= 0) MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  row->wrong = wrong;
  row->max_err = stats[s->iters];
  hvds_bench_row_times(row, stats, s->iters);
  hvds_bench_row_bandwidth(row);
  return 0;
}

static int parse(int argc, char** argv, hvds_bench_sweep_t* s) {
  hvds_bench_sweep_defaults(s, "mpi");
  for (int i = 1; i < argc; i++) {
    int rc = hvds_bench_parse_sweep_opt(argc, argv, &i, s);
    if (rc < 0) return -1;
    if (rc == 0) {
      if (rank_ == 0) {
        fprintf(stderr, "usage: mpirun -np N mpi_allreduce_bench [options]\n");
        hvds_bench_sweep_usage(stderr);
      }
      return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? -1 : 1;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  hvds_bench_sweep_t s;
  int rc = parse(argc, argv, &s);
  if (rc != 0) {
    MPI_Finalize();
    return rc > 0 ? 0 : 2;
  }
  char version[MPI_MAX_LIBRARY_VERSION_STRING], info[256];
  int len = 0;
  MPI_Get_library_version(version, &len);
  version[strcspn(version, ",\n")] = '\0';
  snprintf(info, sizeof(info), "dtype float32, op sum, in place, %.200s", version);
  if (rank_ == 0) hvds_bench_print_header(stdout, "mpi_allreduce_bench allreduce", info, &s, size_);
  double* stats = malloc(sizeof(double) * (size_t)(s.iters + 1));
  long wrong_total = 0;
  double bw_sum = 0;
  int rows = 0, failed = stats == NULL;
  for (size_t bytes = s.min_bytes ? s.min_bytes : 4; !failed && bytes <= s.max_bytes;
       bytes *= s.factor) {
    size_t count = bytes / sizeof(float);
    if (count > 0) {
      hvds_bench_row_t row = {0};
      row.impl = s.label;
      row.coll = "allreduce";
      row.np = size_;
      row.bytes = count * sizeof(float);
      row.count = count;
      row.dtype = "float32";
      row.redop = "sum";
      failed = run_size(&s, count, stats, &row) != 0;
      if (failed) break;
      if (rank_ == 0) hvds_bench_print_row(stdout, &row, s.csv);
      wrong_total += row.wrong > 0 ? row.wrong : 0;
      bw_sum += row.busbw;
      rows++;
    }
    if (bytes > s.max_bytes / s.factor) break;
  }
  if (rank_ == 0) hvds_bench_print_footer(stdout, wrong_total, rows ? bw_sum / rows : 0, s.check);
  free(stats);
  if (failed) {
    fprintf(stderr, "rank %d: out of memory\n", rank_);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return wrong_total > 0 ? 1 : 0;
}
