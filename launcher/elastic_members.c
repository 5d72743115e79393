/* Membership bookkeeping of an elastic job; the keys are those of runtime/elastic_join.c. */
#include "elastic_members.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hvds_member_t* hvds__members_add(hvds_members_t* ms, const char* host, int slot) {
  if (ms->n == ms->cap) return NULL;
  hvds_member_t* m = &ms->m[ms->n++];
  memset(m, 0, sizeof(*m));
  snprintf(m->host, sizeof m->host, "%s", host);
  m->slot = slot;
  m->rank = -1;
  m->w.pid = -1;
  m->w.out_fd = m->w.err_fd = -1;
  return m;
}

hvds_member_t* hvds__members_live_on(hvds_members_t* ms, const char* host, int slot) {
  for (int i = 0; i < ms->n; i++)
    if (!ms->m[i].w.exited && ms->m[i].slot == slot && strcmp(ms->m[i].host, host) == 0)
      return &ms->m[i];
  return NULL;
}

int hvds__members_live(const hvds_members_t* ms) {
  int live = 0;
  for (int i = 0; i < ms->n; i++) live += !ms->m[i].w.exited && !ms->m[i].removed;
  return live;
}

int hvds__members_running(const hvds_members_t* ms) {
  int running = 0;
  for (int i = 0; i < ms->n; i++) running += !ms->m[i].w.exited;
  return running;
}

/* Order of the next membership: ranked survivors by rank, then the others by start order. */
static int order_before(const hvds_member_t* a, int ia, const hvds_member_t* b, int ib) {
  if ((a->rank >= 0) != (b->rank >= 0)) return a->rank >= 0;
  if (a->rank >= 0) return a->rank < b->rank;
  return ia < ib;
}

/* Fills rank, local and cross ranks of the live workers; returns the size. */
static int assign(hvds_members_t* ms, int* order) {
  int size = 0;
  for (int i = 0; i < ms->n; i++)
    if (!ms->m[i].w.exited && !ms->m[i].removed) order[size++] = i;
  for (int i = 1; i < size; i++)  // insertion sort: a few workers
    for (int j = i; j > 0 && order_before(&ms->m[order[j]], order[j], &ms->m[order[j - 1]],
                                          order[j - 1]); j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (int r = 0; r < size; r++) {
    hvds_member_t* m = &ms->m[order[r]];
    m->rank = r;
    m->local_rank = m->local_size = m->cross_rank = m->cross_size = 0;
    for (int q = 0; q < size; q++) {
      const hvds_member_t* o = &ms->m[order[q]];
      if (strcmp(o->host, m->host) != 0) continue;
      m->local_size++;
      if (q < r) m->local_rank++;
    }
  }
  // Cross ranks: among the workers with the same local rank, by rank.
  for (int r = 0; r < size; r++) {
    hvds_member_t* m = &ms->m[order[r]];
    for (int q = 0; q < size; q++) {
      const hvds_member_t* o = &ms->m[order[q]];
      if (o->local_rank != m->local_rank) continue;
      m->cross_size++;
      if (q < r) m->cross_rank++;
    }
  }
  for (int i = 0; i < ms->n; i++)
    if (ms->m[i].w.exited || ms->m[i].removed) ms->m[i].rank = -1;
  return size;
}

hvds_result_t hvds__members_publish(hvds_members_t* ms, hvds_store_server_t* store,
                                    const char* job_id, const char* reason) {
  int* order = calloc((size_t)(ms->n > 0 ? ms->n : 1), sizeof(int));
  if (order == NULL) return HVDS_SYSTEM_ERROR;
  int size = assign(ms, order);
  int epoch = ms->epoch + 1;
  hvds_result_t rc = HVDS_SUCCESS;
  char key[512], val[128];
  fprintf(stderr, "hvdsparse: elastic: membership %d, %d worker%s (%s):", epoch, size,
          size == 1 ? "" : "s", reason);
  for (int r = 0; r < size && rc == HVDS_SUCCESS; r++) {
    const hvds_member_t* m = &ms->m[order[r]];
    snprintf(key, sizeof key, "hvds/%s/elastic/e%d/%s:%d", job_id, epoch, m->host, m->slot);
    int len = snprintf(val, sizeof val, "%d,%d,%d,%d,%d,%d", m->rank, size, m->local_rank,
                       m->local_size, m->cross_rank, m->cross_size);
    rc = hvds__store_server_set(store, key, val, (size_t)len);
    fprintf(stderr, " %s:%d=rank %d%s", m->host, m->slot, m->rank, r + 1 < size ? "," : "");
  }
  fprintf(stderr, "\n");
  fflush(stderr);
  // The epoch last: a worker that sees it finds its line.
  snprintf(key, sizeof key, "hvds/%s/elastic/epoch", job_id);
  int len = snprintf(val, sizeof val, "%d", epoch);
  if (rc == HVDS_SUCCESS) rc = hvds__store_server_set(store, key, val, (size_t)len);
  if (rc == HVDS_SUCCESS) ms->epoch = epoch;
  free(order);
  return rc;
}
