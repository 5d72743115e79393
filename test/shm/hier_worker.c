/* The worker of hier_test.cc: allreduces through whatever path the runtime chose for this job's
 * layout (shared-memory world, hierarchical, flat), checked element by element, including sizes
 * that span several chunks of the two-host pipeline and odd sizes that leave blocks uneven or
 * empty. Prints "mode <hier_mode> world <transport> local <transport>" and exits 0 when every
 * result is right. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvdsparse.h"
#include "p2p.h"
#include "state.h"

static int rank_, size_;

#define FAIL(...)                        \
  do {                                   \
    fprintf(stderr, "rank %d: ", rank_); \
    fprintf(stderr, __VA_ARGS__);        \
    fprintf(stderr, "\n");               \
    exit(1);                             \
  } while (0)

static void run(hvds_tensor_t* t, hvds_reduce_op_t op, const char* name) {
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = name;
  o.op = op;
  hvds_handle_t h = 0;
  hvds_result_t rc = hvds_allreduce_async(t, t, &o, &h);
  if (rc == HVDS_SUCCESS) rc = hvds_wait(h, 120000);
  if (rc != HVDS_SUCCESS) FAIL("%s: %s: %s", name, hvds_result_str(rc), hvds_handle_error(h));
  hvds_release(h);
}

/* float32 Sum and Average and Max, int64 Sum, of n elements. */
static void check_size(size_t n) {
  char name[64];
  float* f = malloc(n * sizeof(float) + 1);
  int64_t* l = malloc(n * sizeof(int64_t) + 1);
  for (hvds_reduce_op_t op = HVDS_AVERAGE; op <= HVDS_MAX; op++) {
    if (op == HVDS_ADASUM || op == HVDS_MIN) continue;
    for (size_t i = 0; i < n; i++) f[i] = (float)((rank_ + 1) * (int)(i % 17));
    hvds_tensor_t t = {f, HVDS_FLOAT32, -1, 1, {(int64_t)n}};
    snprintf(name, sizeof name, "f.%zu.%d", n, (int)op);
    run(&t, op, name);
    for (size_t i = 0; i < n; i++) {
      double k = (double)(i % 17), want = op == HVDS_MAX   ? size_ * k
                                          : op == HVDS_SUM ? k * size_ * (size_ + 1) / 2
                                                           : k * (size_ + 1) / 2.0;
      if (f[i] < want - 1e-3 * (want + 1) || f[i] > want + 1e-3 * (want + 1))
        FAIL("%s: element %zu is %g, expected %g", name, i, f[i], want);
    }
  }
  for (size_t i = 0; i < n; i++) l[i] = (int64_t)(rank_ + 1) << 33 | (int64_t)(i % 1000);
  hvds_tensor_t t = {l, HVDS_INT64, -1, 1, {(int64_t)n}};
  snprintf(name, sizeof name, "l.%zu", n);
  run(&t, HVDS_SUM, name);
  for (size_t i = 0; i < n; i++) {
    int64_t want = ((int64_t)size_ * (size_ + 1) / 2 << 33) + (int64_t)size_ * (int64_t)(i % 1000);
    if (l[i] != want)
      FAIL("%s: element %zu is %lld, expected %lld", name, i, (long long)l[i], (long long)want);
  }
  free(f);
  free(l);
}

int main(void) {
  if (hvds_init() != HVDS_SUCCESS) {
    fprintf(stderr, "init failed: %s\n", hvds_last_error());
    return 1;
  }
  rank_ = hvds_rank();
  size_ = hvds_size();
  const size_t sizes[] = {0, 1, 3, 1000, 65537, (size_t)(1 << 20) + 7, (size_t)(3 << 20) + 5};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) check_size(sizes[k]);
  printf("rank %d mode %d world %s local %s\n", rank_, hvds__rt.hier_mode,
         hvds__rt.world->ops->name, hvds__rt.local->ops->name);
  fflush(stdout);
  hvds_shutdown();
  return 0;
}
