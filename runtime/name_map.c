/* Open-addressing string map with linear probing and tombstones. */
#include "name_map.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char* s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static size_t find_slot(const hvds_name_slot_t* slots, size_t cap, const char* key, int* found) {
  size_t i = hash_str(key) & (cap - 1);
  size_t first_tomb = SIZE_MAX;
  for (;;) {
    const hvds_name_slot_t* s = &slots[i];
    if (s->key == NULL) {
      *found = 0;
      return first_tomb != SIZE_MAX ? first_tomb : i;
    }
    if (s->tomb) {
      if (first_tomb == SIZE_MAX) first_tomb = i;
    } else if (strcmp(s->key, key) == 0) {
      *found = 1;
      return i;
    }
    i = (i + 1) & (cap - 1);
  }
}

static int grow(hvds_name_map_t* m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  /* Only rehash to the same size when tombstones, not live keys, fill the table. */
  if (m->cap && m->count * 4 < m->cap) cap = m->cap;
  hvds_name_slot_t* slots = calloc(cap, sizeof(*slots));
  if (slots == NULL) return -1;
  for (size_t i = 0; i < m->cap; i++) {
    hvds_name_slot_t* s = &m->slots[i];
    if (s->key == NULL) continue;
    if (s->tomb) {
      free(s->key);
      continue;
    }
    int found;
    size_t j = find_slot(slots, cap, s->key, &found);
    slots[j] = *s;
  }
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  m->used = m->count;
  return 0;
}

int hvds__name_map_put(hvds_name_map_t* m, const char* key, void* value) {
  if ((m->used + 1) * 4 > m->cap * 3 && grow(m) != 0) return -1;
  int found;
  size_t i = find_slot(m->slots, m->cap, key, &found);
  hvds_name_slot_t* s = &m->slots[i];
  if (found) {
    s->value = value;
    return 0;
  }
  char* copy = strdup(key);
  if (copy == NULL) return -1;
  if (s->tomb) {
    free(s->key);
  } else {
    m->used++;
  }
  s->key = copy;
  s->tomb = 0;
  s->value = value;
  m->count++;
  return 0;
}

void* hvds__name_map_get(const hvds_name_map_t* m, const char* key) {
  if (m->cap == 0) return NULL;
  int found;
  size_t i = find_slot(m->slots, m->cap, key, &found);
  return found ? m->slots[i].value : NULL;
}

void* hvds__name_map_remove(hvds_name_map_t* m, const char* key) {
  if (m->cap == 0) return NULL;
  int found;
  size_t i = find_slot(m->slots, m->cap, key, &found);
  if (!found) return NULL;
  void* v = m->slots[i].value;
  m->slots[i].tomb = 1;
  m->slots[i].value = NULL;
  m->count--;
  return v;
}

void hvds__name_map_clear(hvds_name_map_t* m) {
  for (size_t i = 0; i < m->cap; i++) free(m->slots[i].key);
  free(m->slots);
  memset(m, 0, sizeof(*m));
}
