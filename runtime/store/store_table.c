/* The store server's key-value table: FNV-1a hashing, chaining, doubling on load factor 1. */
#include "store_table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_proto.h"

struct hvds_store_entry {
  hvds_store_entry_t* next;
  uint64_t hash;
  size_t key_len;
  size_t len;
  uint8_t* val;
  char key[]; /* key_len bytes plus a NUL */
};

static uint64_t hash_key(const char* key, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) {
    h ^= (uint8_t)key[i];
    h *= 1099511628211ull;
  }
  return h;
}

static hvds_store_entry_t** find_slot(const hvds_store_table_t* t, const char* key, size_t len,
                                      uint64_t h) {
  if (t->nbuckets == 0) return NULL;
  hvds_store_entry_t** slot = &t->buckets[h & (t->nbuckets - 1)];
  while (*slot != NULL) {
    hvds_store_entry_t* e = *slot;
    if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0) return slot;
    slot = &e->next;
  }
  return slot;
}

static hvds_result_t grow(hvds_store_table_t* t) {
  size_t n = t->nbuckets ? t->nbuckets * 2 : 64;
  hvds_store_entry_t** b = calloc(n, sizeof(*b));
  if (b == NULL) return HVDS_SYSTEM_ERROR;
  for (size_t i = 0; i < t->nbuckets; i++) {
    hvds_store_entry_t* e = t->buckets[i];
    while (e != NULL) {
      hvds_store_entry_t* next = e->next;
      size_t j = e->hash & (n - 1);
      e->next = b[j];
      b[j] = e;
      e = next;
    }
  }
  free(t->buckets);
  t->buckets = b;
  t->nbuckets = n;
  return HVDS_SUCCESS;
}

hvds_result_t hvds__store_table_set(hvds_store_table_t* t, const char* key, size_t key_len,
                                    const void* val, size_t len) {
  if (t->count >= t->nbuckets && grow(t) != HVDS_SUCCESS) return HVDS_SYSTEM_ERROR;
  uint64_t h = hash_key(key, key_len);
  hvds_store_entry_t** slot = find_slot(t, key, key_len, h);
  hvds_store_entry_t* old = *slot;
  size_t old_bytes = old ? old->key_len + old->len : 0;
  if (old == NULL && t->count >= HVDS_STORE_MAX_KEYS) return HVDS_INVALID_ARGUMENT;
  if (t->bytes - old_bytes + key_len + len > HVDS_STORE_MAX_BYTES) return HVDS_INVALID_ARGUMENT;

  uint8_t* copy = malloc(len ? len : 1);
  if (copy == NULL) return HVDS_SYSTEM_ERROR;
  if (len) memcpy(copy, val, len);
  if (old != NULL) {
    free(old->val);
    old->val = copy;
    old->len = len;
  } else {
    hvds_store_entry_t* e = malloc(sizeof(*e) + key_len + 1);
    if (e == NULL) {
      free(copy);
      return HVDS_SYSTEM_ERROR;
    }
    e->next = NULL;
    e->hash = h;
    e->key_len = key_len;
    memcpy(e->key, key, key_len);
    e->key[key_len] = '\0';
    e->val = copy;
    e->len = len;
    *slot = e;
    t->count++;
  }
  t->bytes = t->bytes - old_bytes + key_len + len;
  return HVDS_SUCCESS;
}

int hvds__store_table_get(const hvds_store_table_t* t, const char* key, size_t key_len,
                          const void** val, size_t* len) {
  hvds_store_entry_t** slot = find_slot(t, key, key_len, hash_key(key, key_len));
  if (slot == NULL || *slot == NULL) return 0;
  *val = (*slot)->val;
  *len = (*slot)->len;
  return 1;
}

/* Parses the whole of len bytes as a decimal int64. */
static int parse_int(const void* val, size_t len, int64_t* out) {
  char text[32];
  if (len == 0 || len >= sizeof(text)) return -1;
  memcpy(text, val, len);
  text[len] = '\0';
  char* end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *out = v;
  return 0;
}

hvds_result_t hvds__store_table_add(hvds_store_table_t* t, const char* key, size_t key_len,
                                    int64_t delta, int64_t* result) {
  int64_t cur = 0;
  const void* val;
  size_t len;
  if (hvds__store_table_get(t, key, key_len, &val, &len) && parse_int(val, len, &cur) != 0)
    return HVDS_INVALID_ARGUMENT;
  int64_t sum;
  if (__builtin_add_overflow(cur, delta, &sum)) return HVDS_INVALID_ARGUMENT;
  char text[32];
  int n = snprintf(text, sizeof(text), "%lld", (long long)sum);
  hvds_result_t rc = hvds__store_table_set(t, key, key_len, text, (size_t)n);
  if (rc == HVDS_SUCCESS) *result = sum;
  return rc;
}

size_t hvds__store_table_delete_prefix(hvds_store_table_t* t, const char* prefix,
                                       size_t prefix_len) {
  size_t removed = 0;
  for (size_t i = 0; i < t->nbuckets; i++) {
    hvds_store_entry_t** slot = &t->buckets[i];
    while (*slot != NULL) {
      hvds_store_entry_t* e = *slot;
      if (e->key_len >= prefix_len && memcmp(e->key, prefix, prefix_len) == 0) {
        *slot = e->next;
        t->count--;
        t->bytes -= e->key_len + e->len;
        free(e->val);
        free(e);
        removed++;
      } else {
        slot = &e->next;
      }
    }
  }
  return removed;
}

void hvds__store_table_free(hvds_store_table_t* t) {
  if (t == NULL) return;
  hvds__store_table_delete_prefix(t, "", 0);
  free(t->buckets);
  t->buckets = NULL;
  t->nbuckets = 0;
}
