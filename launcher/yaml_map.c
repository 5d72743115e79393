/* The two-level YAML subset of yaml_map.h, read line by line. */
#include "yaml_map.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char* err;
  size_t errlen;
  int line;
} reader_t;

static hvds_result_t fail(reader_t* r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

static hvds_result_t fail(reader_t* r, const char* fmt, ...) {
  int n = snprintf(r->err, r->errlen, "line %d: ", r->line);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < r->errlen) vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return HVDS_INVALID_ARGUMENT;
}

static char* trim(char* s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = '\0';
  return s;
}

/* Cuts a plain (unquoted) scalar at a comment: '#' at its start or after a blank. */
static void cut_comment(char* s) {
  for (char* p = s; *p; p++) {
    if (*p == '#' && (p == s || p[-1] == ' ' || p[-1] == '\t')) {
      *p = '\0';
      return;
    }
  }
}

/* Unquotes a "double" or 'single' quoted scalar starting at s into out; only blanks and a
 * comment may follow the closing quote. */
static hvds_result_t unquote(reader_t* r, const char* s, char* out, size_t cap) {
  char q = *s++;
  size_t n = 0;
  for (;; s++) {
    if (*s == '\0') return fail(r, "unterminated %s-quoted value", q == '"' ? "double" : "single");
    if (*s == q && q == '\'' && s[1] == '\'') {  // '' is a quote inside single quotes
      s++;
    } else if (*s == q) {
      break;
    } else if (q == '"' && *s == '\\' && s[1] != '\0') {
      s++;
      if (*s == 'n' || *s == 't') {
        if (n + 1 < cap) out[n++] = *s == 'n' ? '\n' : '\t';
        continue;
      }
    }
    if (n + 1 >= cap) return fail(r, "value longer than %zu characters", cap - 1);
    out[n++] = *s;
  }
  out[n] = '\0';
  char rest[8];
  snprintf(rest, sizeof(rest), "%.7s", s + 1);
  cut_comment(rest);
  if (trim(rest)[0] != '\0') return fail(r, "unexpected text after the closing quote");
  return HVDS_SUCCESS;
}

/* Fills e->value and e->is_null from the text after "key:". */
static hvds_result_t parse_value(reader_t* r, char* text, hvds_yaml_entry_t* e) {
  text = trim(text);
  if (*text == '"' || *text == '\'') return unquote(r, text, e->value, sizeof(e->value));
  cut_comment(text);
  text = trim(text);
  if (strchr("[{&*!|>", *text) != NULL && *text != '\0')
    return fail(r, "'%c' starts a YAML form this reader does not support (flow collection, "
                "anchor, alias, tag or block scalar); write the value as a plain scalar", *text);
  if (strlen(text) >= sizeof(e->value))
    return fail(r, "value longer than %zu characters", sizeof(e->value) - 1);
  e->is_null = *text == '\0' || strcmp(text, "~") == 0 || strcmp(text, "null") == 0 ||
               strcmp(text, "Null") == 0 || strcmp(text, "NULL") == 0;
  snprintf(e->value, sizeof(e->value), "%s", e->is_null ? "" : text);
  return HVDS_SUCCESS;
}

/* Splits "key: value" (or "key:") at the first ": " or a final ':'. */
static hvds_result_t split_key(reader_t* r, char* s, char** key, char** value) {
  if (s[0] == '-' && (s[1] == ' ' || s[1] == '\0')) return fail(r, "lists are not supported");
  char* colon = NULL;
  for (char* p = s; *p && colon == NULL; p++)
    if (*p == ':' && (p[1] == ' ' || p[1] == '\t' || p[1] == '\0')) colon = p;
  if (colon == NULL) return fail(r, "expected 'key: value'");
  *colon = '\0';
  *key = trim(s);
  *value = colon + 1;
  if (**key == '\0') return fail(r, "empty key");
  for (const char* k = *key; *k; k++)
    if (!isalnum((unsigned char)*k) && *k != '_' && *k != '-')
      return fail(r, "key '%s' is not a plain name", *key);
  if (strlen(*key) >= sizeof(((hvds_yaml_entry_t*)0)->key)) return fail(r, "key too long");
  return HVDS_SUCCESS;
}

typedef struct {
  hvds_yaml_entry_t* v;
  int n, cap;
} entries_t;

static hvds_yaml_entry_t* push(entries_t* es) {
  if (es->n == es->cap) {
    int cap = es->cap ? es->cap * 2 : 16;
    hvds_yaml_entry_t* v = realloc(es->v, (size_t)cap * sizeof(*v));
    if (v == NULL) return NULL;
    es->v = v;
    es->cap = cap;
  }
  hvds_yaml_entry_t* e = &es->v[es->n++];
  memset(e, 0, sizeof(*e));
  return e;
}

typedef struct {
  char section[64]; /* the open section, "" at top level */
  int indent;       /* its entries' indentation; 0 until its first entry */
  int open;         /* a section header was read and may take entries */
} scope_t;

/* One non-blank, non-comment line with its indentation. */
static hvds_result_t read_line(reader_t* r, scope_t* sc, entries_t* es, char* s, int indent) {
  char *key = NULL, *value = NULL;
  hvds_result_t rc = split_key(r, s, &key, &value);
  if (rc != HVDS_SUCCESS) return rc;
  if (indent == 0) {
    sc->open = 0;
    sc->section[0] = '\0';
  } else if (!sc->open) {
    return fail(r, "unexpected indentation (nesting deeper than 'section: key: value' is not "
                "supported)");
  } else if (sc->indent == 0) {
    sc->indent = indent;
  } else if (indent != sc->indent) {
    return fail(r, "indentation %d differs from the section's %d", indent, sc->indent);
  }
  char* v = trim(value);
  if (indent == 0 && (*v == '\0' || *v == '#')) {  // a section header (maybe commented)
    snprintf(sc->section, sizeof(sc->section), "%.63s", key);
    sc->indent = 0;
    sc->open = 1;
    return HVDS_SUCCESS;
  }
  hvds_yaml_entry_t* e = push(es);
  if (e == NULL) return fail(r, "out of memory");
  snprintf(e->section, sizeof(e->section), "%s", indent ? sc->section : "");
  snprintf(e->key, sizeof(e->key), "%s", key);
  e->line = r->line;
  return parse_value(r, value, e);
}

hvds_result_t hvds__yaml_map_read(const char* path, hvds_yaml_entry_t** entries, int* n, char* err,
                                  size_t errlen) {
  *entries = NULL;
  *n = 0;
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return HVDS_SYSTEM_ERROR;
  }
  reader_t r = {err, errlen, 0};
  scope_t sc = {"", 0, 0};
  entries_t es = {NULL, 0, 0};
  hvds_result_t rc = HVDS_SUCCESS;
  char buf[4096];
  while (rc == HVDS_SUCCESS && fgets(buf, sizeof(buf), f) != NULL) {
    r.line++;
    size_t len = strlen(buf);
    if (len == sizeof(buf) - 1 && buf[len - 1] != '\n') {
      rc = fail(&r, "line longer than %zu characters", sizeof(buf) - 2);
      break;
    }
    buf[strcspn(buf, "\n")] = '\0';
    int indent = 0;
    while (buf[indent] == ' ') indent++;
    if (buf[indent] == '\t') {
      rc = fail(&r, "tabs are not allowed for indentation");
      break;
    }
    char* s = trim(buf);
    if (*s == '\0' || *s == '#' || (strcmp(s, "---") == 0 && es.n == 0 && !sc.open)) continue;
    rc = read_line(&r, &sc, &es, s, indent);
  }
  fclose(f);
  if (rc != HVDS_SUCCESS) {
    free(es.v);
    return rc;
  }
  *entries = es.v;
  *n = es.n;
  return HVDS_SUCCESS;
}
