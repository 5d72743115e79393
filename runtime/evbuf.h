/* Event buffer for the timeline: a growable byte buffer with JSON string escaping. Not
 * thread-safe; the timeline guards it with its own lock. */
#ifndef HVDS_EVBUF_H_
#define HVDS_EVBUF_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A growable byte buffer of formatted events. */
typedef struct {
  char* data;
  size_t len;
  size_t cap;
  int events; /* complete events held */
  int oom;    /* an append failed since the last ev_open */
} evbuf_t;

/* Returns 1 when b has room for extra more bytes (growing it), else 0 with b->oom set. */
int hvds__evbuf_reserve(evbuf_t* b, size_t extra);
/* Appenders: on allocation failure they set b->oom and append nothing. */
void hvds__evbuf_putn(evbuf_t* b, const char* s, size_t n);
void hvds__evbuf_puts(evbuf_t* b, const char* s);
void hvds__evbuf_printf(evbuf_t* b, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* s escaped for the inside of a JSON string: quotes, backslashes and control characters escaped,
 * invalid UTF-8 replaced by U+FFFD. */
void hvds__evbuf_put_escaped(evbuf_t* b, const char* s);
/* Caller-supplied JSON text (args objects): control characters become spaces. */
void hvds__evbuf_put_json_text(evbuf_t* b, const char* s);
/* s as a quoted JSON string. */
void hvds__evbuf_put_string(evbuf_t* b, const char* s);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_EVBUF_H_ */
