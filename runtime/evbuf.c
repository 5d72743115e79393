/* Event buffer: growth, formatted appends and JSON escaping for the timeline. */
#include "evbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hvds__evbuf_reserve(evbuf_t* b, size_t extra) {
  if (b->oom) return 0;
  if (b->len + extra <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 64 * 1024;
  while (cap < b->len + extra) cap *= 2;
  char* data = realloc(b->data, cap);
  if (!data) {
    b->oom = 1;
    return 0;
  }
  b->data = data;
  b->cap = cap;
  return 1;
}

void hvds__evbuf_putn(evbuf_t* b, const char* s, size_t n) {
  if (!hvds__evbuf_reserve(b, n)) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

void hvds__evbuf_puts(evbuf_t* b, const char* s) { hvds__evbuf_putn(b, s, strlen(s)); }

void hvds__evbuf_printf(evbuf_t* b, const char* fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof(small), fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(small)) {
    b->oom = 1;  // only short numeric fields are formatted this way
    return;
  }
  hvds__evbuf_putn(b, small, (size_t)n);
}

/* Length of the valid UTF-8 sequence at p (2..4), or 0 if it is not valid UTF-8. */
static size_t utf8_len(const unsigned char* p) {
  unsigned c = p[0];
  size_t n;
  unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong
    if (c == 0xed) hi = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < n; i++) {
    if (p[i] < 0x80 || p[i] > 0xbf) return 0;
  }
  return n;
}

/* Appends s escaped for the inside of a JSON string; invalid UTF-8 becomes U+FFFD. */
void hvds__evbuf_put_escaped(evbuf_t* b, const char* s) {
  const unsigned char* p = (const unsigned char*)(s ? s : "");
  while (*p) {
    unsigned c = *p;
    if (c == '"' || c == '\\') {
      char esc[2] = {'\\', (char)c};
      hvds__evbuf_putn(b, esc, 2);
      p++;
    } else if (c < 0x20) {
      switch (c) {
        case '\n':
          hvds__evbuf_puts(b, "\\n");
          break;
        case '\t':
          hvds__evbuf_puts(b, "\\t");
          break;
        case '\r':
          hvds__evbuf_puts(b, "\\r");
          break;
        default:
          hvds__evbuf_printf(b, "\\u%04x", c);
          break;
      }
      p++;
    } else if (c < 0x80) {
      const unsigned char* start = p;
      while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') p++;
      hvds__evbuf_putn(b, (const char*)start, (size_t)(p - start));
    } else {
      size_t n = utf8_len(p);
      if (n) {
        hvds__evbuf_putn(b, (const char*)p, n);
        p += n;
      } else {
        hvds__evbuf_puts(b, "\\ufffd");
        p++;
      }
    }
  }
}

/* Appends JSON text verbatim except that control characters become spaces: outside strings
 * they are whitespace, inside strings they would make the file invalid. */
void hvds__evbuf_put_json_text(evbuf_t* b, const char* s) {
  size_t n = strlen(s);
  if (!hvds__evbuf_reserve(b, n)) return;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    b->data[b->len++] = c < 0x20 ? ' ' : (char)c;
  }
}

void hvds__evbuf_put_string(evbuf_t* b, const char* s) {
  hvds__evbuf_putn(b, "\"", 1);
  hvds__evbuf_put_escaped(b, s);
  hvds__evbuf_putn(b, "\"", 1);
}
