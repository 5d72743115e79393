/* The store server's key-value table: a chained hash table with size limits.
 * Not thread-safe; the server guards it with its mutex. */
#ifndef HVDS_STORE_TABLE_H_
#define HVDS_STORE_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hvds_store_entry hvds_store_entry_t;

typedef struct {
  hvds_store_entry_t** buckets;
  size_t nbuckets; /* power of two, or 0 before the first set */
  size_t count;    /* keys held */
  size_t bytes;    /* key plus value bytes held */
} hvds_store_table_t;

/* Copies key (key_len bytes, no NUL inside) and val. HVDS_INVALID_ARGUMENT when the table would
 * exceed HVDS_STORE_MAX_KEYS or HVDS_STORE_MAX_BYTES, HVDS_SYSTEM_ERROR when allocation fails;
 * the table is unaltered on error. */
hvds_result_t hvds__store_table_set(hvds_store_table_t* t, const char* key, size_t key_len,
                                    const void* val, size_t len);
/* Finds key; returns 1 and points val and len at the stored bytes (valid until the next change),
 * or 0 when absent. */
int hvds__store_table_get(const hvds_store_table_t* t, const char* key, size_t key_len,
                          const void** val /* OUT */, size_t* len /* OUT */);
/* Adds delta to the decimal integer at key (absent = 0) and stores the result as decimal text.
 * HVDS_INVALID_ARGUMENT if the value is not an integer or the sum overflows. */
hvds_result_t hvds__store_table_add(hvds_store_table_t* t, const char* key, size_t key_len,
                                    int64_t delta, int64_t* result /* OUT */);
/* Removes every key starting with prefix; returns how many. */
size_t hvds__store_table_delete_prefix(hvds_store_table_t* t, const char* prefix,
                                       size_t prefix_len);
/* Frees every entry. Accepts NULL. */
void hvds__store_table_free(hvds_store_table_t* t);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_STORE_TABLE_H_ */
