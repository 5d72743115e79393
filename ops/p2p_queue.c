/* Request and unexpected-message queues of the byte-stream transports (p2p_queue.h). */
#include "p2p_queue.h"

#include <stdlib.h>
#include <string.h>

hvds_p2p_req_t* hvds__req_take(hvds_req_pool_t* pool) {
  hvds_p2p_req_t* r = pool->free;
  if (r != NULL) {
    pool->free = r->next;
    pool->n--;
  } else {
    r = malloc(sizeof *r);
    if (r == NULL) return NULL;
  }
  memset(r, 0, sizeof *r);
  return r;
}

void hvds__req_release(hvds_req_pool_t* pool, hvds_p2p_req_t* r) {
  if (pool->n >= HVDS_REQ_POOL_MAX) {
    free(r);
    return;
  }
  r->next = pool->free;
  pool->free = r;
  pool->n++;
}

void hvds__req_pool_clear(hvds_req_pool_t* pool) {
  while (pool->free != NULL) {
    hvds_p2p_req_t* r = pool->free;
    pool->free = r->next;
    free(r);
  }
  pool->n = 0;
}

void hvds__req_append(hvds_req_fifo_t* q, hvds_p2p_req_t* r) {
  r->next = NULL;
  if (q->tail != NULL) {
    q->tail->next = r;
  } else {
    q->head = r;
  }
  q->tail = r;
}

void hvds__req_pop(hvds_req_fifo_t* q) {
  hvds_p2p_req_t* r = q->head;
  q->head = r->next;
  if (q->head == NULL) q->tail = NULL;
  r->next = NULL;
}

/* Unlinks r, whose predecessor is prev (NULL: r is the head). */
static void unlink_after(hvds_req_fifo_t* q, hvds_p2p_req_t* prev, hvds_p2p_req_t* r) {
  if (prev == NULL) {
    q->head = r->next;
  } else {
    prev->next = r->next;
  }
  if (q->tail == r) q->tail = prev;
  r->next = NULL;
}

int hvds__req_unlink(hvds_req_fifo_t* q, hvds_p2p_req_t* r) {
  hvds_p2p_req_t* prev = NULL;
  for (hvds_p2p_req_t* x = q->head; x != NULL; prev = x, x = x->next) {
    if (x != r) continue;
    unlink_after(q, prev, x);
    return 1;
  }
  return 0;
}

hvds_p2p_req_t* hvds__req_take_tag(hvds_req_fifo_t* q, uint64_t tag) {
  hvds_p2p_req_t* prev = NULL;
  for (hvds_p2p_req_t* x = q->head; x != NULL; prev = x, x = x->next) {
    if (x->tag != tag) continue;
    unlink_after(q, prev, x);
    return x;
  }
  return NULL;
}

hvds_ux_t* hvds__ux_push(hvds_ux_list_t* l, uint64_t tag, size_t len) {
  hvds_ux_t* ux = calloc(1, sizeof *ux);
  char* data = len > 0 ? malloc(len) : NULL;
  if (ux == NULL || (len > 0 && data == NULL)) {
    free(ux);
    free(data);
    return NULL;
  }
  ux->tag = tag;
  ux->len = len;
  ux->data = data;
  if (l->tail != NULL) {
    l->tail->next = ux;
  } else {
    l->head = ux;
  }
  l->tail = ux;
  return ux;
}

hvds_ux_t* hvds__ux_find(const hvds_ux_list_t* l, uint64_t tag) {
  hvds_ux_t* ux = l->head;
  while (ux != NULL && ux->tag != tag) ux = ux->next;
  return ux;
}

void hvds__ux_drop(hvds_ux_list_t* l, hvds_ux_t* ux) {
  hvds_ux_t* prev = NULL;
  for (hvds_ux_t* x = l->head; x != NULL && x != ux; x = x->next) prev = x;
  if (prev == NULL) {
    l->head = ux->next;
  } else {
    prev->next = ux->next;
  }
  if (l->tail == ux) l->tail = prev;
  free(ux->data);
  free(ux);
}

void hvds__ux_clear(hvds_ux_list_t* l) {
  for (hvds_ux_t* ux = l->head; ux != NULL;) {
    hvds_ux_t* next = ux->next;
    free(ux->data);
    free(ux);
    ux = next;
  }
  l->head = l->tail = NULL;
}
