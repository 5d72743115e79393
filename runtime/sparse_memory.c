/* Per-name memory of the sparse allreduces (sparse_memory.h). */
#include "sparse_memory.h"

#include <stdlib.h>

#include "state.h"

const hvds_sparse_memory_t* hvds__sparse_memory_find(hvds_pset_t* s, const char* name) {
  return hvds__name_map_get(&s->sparse_memory, name);
}

hvds_sparse_memory_t* hvds__sparse_memory_get(hvds_pset_t* s, const char* name) {
  hvds_name_map_t* map = &s->sparse_memory;
  hvds_sparse_memory_t* m = hvds__name_map_get(map, name);
  if (m != NULL) return m;
  if (map->count >= HVDS_SPARSE_MEMORY_NAMES) hvds__sparse_memory_clear(s);
  m = calloc(1, sizeof *m);
  if (m == NULL || hvds__name_map_put(map, name, m) != 0) {
    free(m);
    return NULL;
  }
  m->overlap = -1.0;
  return m;
}

void hvds__sparse_memory_learn_cost(hvds_sparse_memory_t* m, hvds_sparse_algo_t a,
                                    double measured_s, double predicted_s) {
  if (m == NULL || a <= HVDS_SPARSE_AUTO || a >= HVDS_SPARSE_ALGO_COUNT || !(measured_s > 0) ||
      !(predicted_s > 0))
    return;
  if (m->runs[a]++ == 0) return;
  double r = measured_s / predicted_s;
  if (!(m->calib[a] > 0) || r < m->calib[a]) m->calib[a] = r;
}

void hvds__sparse_memory_clear(hvds_pset_t* s) {
  hvds_name_map_t* map = &s->sparse_memory;
  for (size_t i = 0; i < map->cap; i++)
    if (hvds__name_map_live(map, i)) free(map->slots[i].value);
  hvds__name_map_clear(map);
}
