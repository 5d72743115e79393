/* A string-keyed hash map (open addressing). Keys are copied; values are the caller's.
 * Not thread-safe: each map has one owning thread or an outside lock. */
#ifndef HVDS_NAME_MAP_H_
#define HVDS_NAME_MAP_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  char* key;     /* owned copy; NULL = empty slot */
  void* value;
  uint64_t hash; /* of key: most probes compare this instead of the strings */
  int tomb;      /* 1 = deleted slot (keeps probe chains intact, and its key for a revival) */
} hvds_name_slot_t;

typedef struct {
  hvds_name_slot_t* slots;
  size_t cap;   /* power of two, or 0 before first insert */
  size_t count; /* live keys */
  size_t used;  /* live + tombstones */
} hvds_name_map_t;

/* Returns 0, or -1 when out of memory. Replaces the value of an existing key. */
int hvds__name_map_put(hvds_name_map_t* m, const char* key, void* value);
void* hvds__name_map_get(const hvds_name_map_t* m, const char* key); /* NULL if absent */
void* hvds__name_map_remove(hvds_name_map_t* m, const char* key);    /* old value or NULL */
/* Removes key only while it maps to value. Returns 1 when it did. */
int hvds__name_map_remove_if(hvds_name_map_t* m, const char* key, const void* value);
void hvds__name_map_clear(hvds_name_map_t* m);                        /* frees keys and slots */

/* Iteration: for (size_t i = 0; i < m->cap; i++) if (hvds__name_map_live(m, i)) ... */
static inline int hvds__name_map_live(const hvds_name_map_t* m, size_t i) {
  return m->slots[i].key != NULL && !m->slots[i].tomb;
}

#ifdef __cplusplus
}
#endif
#endif /* HVDS_NAME_MAP_H_ */
