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

/* Where key lives, or where to put it: a deleted slot that held the same key (the names of a
 * training step come back every step, so reviving it spares a copy), else the first deleted
 * slot, else the empty slot that ends the chain. */
static size_t find_slot(const hvds_name_slot_t* slots, size_t cap, const char* key, uint64_t h,
                        int* found) {
  size_t i = h & (cap - 1);
  size_t first_tomb = SIZE_MAX, same_tomb = SIZE_MAX;
  for (;;) {
    const hvds_name_slot_t* s = &slots[i];
    if (s->key == NULL) {
      *found = 0;
      if (same_tomb != SIZE_MAX) return same_tomb;
      return first_tomb != SIZE_MAX ? first_tomb : i;
    }
    int same = s->hash == h && strcmp(s->key, key) == 0;
    if (s->tomb) {
      if (first_tomb == SIZE_MAX) first_tomb = i;
      if (same && same_tomb == SIZE_MAX) same_tomb = i;
    } else if (same) {
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
    size_t j = find_slot(slots, cap, s->key, s->hash, &found);
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
  uint64_t h = hash_str(key);
  size_t i = find_slot(m->slots, m->cap, key, h, &found);
  hvds_name_slot_t* s = &m->slots[i];
  if (!found && s->tomb && s->hash == h && strcmp(s->key, key) == 0) { /* revived */
    s->tomb = 0;
  } else if (!found) {
    char* copy = strdup(key);
    if (copy == NULL) return -1;
    if (s->tomb) {
      free(s->key);
    } else {
      m->used++;
    }
    s->key = copy;
    s->hash = h;
    s->tomb = 0;
  }
  if (!found) m->count++;
  s->value = value;
  return 0;
}

void* hvds__name_map_get(const hvds_name_map_t* m, const char* key) {
  if (m->cap == 0) return NULL;
  int found;
  size_t i = find_slot(m->slots, m->cap, key, hash_str(key), &found);
  return found ? m->slots[i].value : NULL;
}

void* hvds__name_map_remove(hvds_name_map_t* m, const char* key) {
  if (m->cap == 0) return NULL;
  int found;
  size_t i = find_slot(m->slots, m->cap, key, hash_str(key), &found);
  if (!found) return NULL;
  void* v = m->slots[i].value;
  m->slots[i].tomb = 1;
  m->slots[i].value = NULL;
  m->count--;
  return v;
}

int hvds__name_map_remove_if(hvds_name_map_t* m, const char* key, const void* value) {
  if (m->cap == 0) return 0;
  int found;
  size_t i = find_slot(m->slots, m->cap, key, hash_str(key), &found);
  if (!found || m->slots[i].value != value) return 0;
  m->slots[i].tomb = 1;
  m->slots[i].value = NULL;
  m->count--;
  return 1;
}

void hvds__name_map_clear(hvds_name_map_t* m) {
  for (size_t i = 0; i < m->cap; i++) free(m->slots[i].key);
  free(m->slots);
  memset(m, 0, sizeof(*m));
}
