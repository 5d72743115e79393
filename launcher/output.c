/* Worker output forwarding with per-line rank prefixes. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define READ_CHUNK 65536
/* A line longer than this is forwarded in pieces, each with its own prefix. */
#define MAX_LINE (1 << 20)

typedef struct {
  int rank;
  int is_err;
  int fd;       /* pipe read end; -1 once at EOF */
  int file_fd;  /* DIR/rank.N/stdout or stderr; -1 without --output-filename */
  char* partial; /* bytes after the last newline */
  size_t len, cap;
} stream_t;

struct hvds_output {
  int np;
  char* dir;
  int out_fd, err_fd;
  stream_t* streams;
  int n, cap;
  int timestamps; /* prefix every line with the local time */
};

static void write_all(int fd, const char* p, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away; the job goes on
    p += n;
    len -= (size_t)n;
  }
}

hvds_result_t hvds__output_create(int np, const char* dir, int out_fd, int err_fd,
                                  hvds_output_t** out) {
  hvds_output_t* o = calloc(1, sizeof(*o));
  if (o == NULL) return HVDS_SYSTEM_ERROR;
  o->np = np;
  o->out_fd = out_fd;
  o->err_fd = err_fd;
  if (dir != NULL) {
    o->dir = strdup(dir);
    if (o->dir == NULL || (mkdir(dir, 0777) != 0 && errno != EEXIST)) {
      HVDS_ERROR("--output-filename: cannot create %s: %s", dir, strerror(errno));
      hvds__output_destroy(o);
      return HVDS_INVALID_ARGUMENT;
    }
  }
  *out = o;
  return HVDS_SUCCESS;
}

static int open_file(const hvds_output_t* o, int rank, int is_err) {
  int width = snprintf(NULL, 0, "%d", o->np > 1 ? o->np - 1 : 0);
  size_t len = strlen(o->dir) + 64;
  char* path = malloc(len);
  if (path == NULL) return -1;
  snprintf(path, len, "%s/rank.%0*d", o->dir, width, rank);
  if (mkdir(path, 0777) != 0 && errno != EEXIST) {
    HVDS_ERROR("--output-filename: cannot create %s: %s", path, strerror(errno));
    free(path);
    return -1;
  }
  snprintf(path + strlen(path), len - strlen(path), "/%s", is_err ? "stderr" : "stdout");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) HVDS_ERROR("--output-filename: cannot open %s: %s", path, strerror(errno));
  free(path);
  return fd;
}

hvds_result_t hvds__output_add(hvds_output_t* o, int rank, int is_err, int fd) {
  if (o->n == o->cap) {
    int cap = o->cap ? o->cap * 2 : 16;
    stream_t* s = realloc(o->streams, (size_t)cap * sizeof(*s));
    if (s == NULL) return HVDS_SYSTEM_ERROR;
    o->streams = s;
    o->cap = cap;
  }
  stream_t* s = &o->streams[o->n++];
  memset(s, 0, sizeof(*s));
  s->rank = rank;
  s->is_err = is_err;
  s->fd = fd;
  s->file_fd = o->dir ? open_file(o, rank, is_err) : -1;
  return HVDS_SUCCESS;
}

void hvds__output_set_timestamps(hvds_output_t* o, int on) {
  if (o != NULL) o->timestamps = on;
}

/* Forwards one line (without its newline) with the rank prefix, in a single write. */
static void emit_line(hvds_output_t* o, stream_t* s, const char* line, size_t len) {
  char prefix[96], when[48] = "";
  if (o->timestamps) {
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%a %b %e %H:%M:%S %Y", localtime_r(&now, &tm));
  }
  int plen = snprintf(prefix, sizeof(prefix), "%s[%d]<%s>:", when, s->rank,
                      s->is_err ? "stderr" : "stdout");
  char* buf = malloc((size_t)plen + len + 1);
  if (buf == NULL) return;
  memcpy(buf, prefix, (size_t)plen);
  memcpy(buf + plen, line, len);
  buf[(size_t)plen + len] = '\n';
  write_all(s->is_err ? o->err_fd : o->out_fd, buf, (size_t)plen + len + 1);
  if (s->file_fd >= 0) write_all(s->file_fd, buf + plen, len + 1);
  free(buf);
}

/* Emits every whole line held in s->partial and keeps the remainder. */
static void emit_lines(hvds_output_t* o, stream_t* s) {
  size_t start = 0;
  for (;;) {
    char* nl = memchr(s->partial + start, '\n', s->len - start);
    if (nl == NULL) break;
    emit_line(o, s, s->partial + start, (size_t)(nl - (s->partial + start)));
    start = (size_t)(nl - s->partial) + 1;
  }
  if (s->len - start >= MAX_LINE) {
    emit_line(o, s, s->partial + start, s->len - start);
    start = s->len;
  }
  memmove(s->partial, s->partial + start, s->len - start);
  s->len -= start;
}

static void close_stream(hvds_output_t* o, stream_t* s) {
  if (s->len > 0) emit_line(o, s, s->partial, s->len);  // partial last line at EOF
  s->len = 0;
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  if (s->file_fd >= 0) close(s->file_fd);
  s->file_fd = -1;
}

static void read_stream(hvds_output_t* o, stream_t* s) {
  for (int rounds = 0; rounds < 16; rounds++) {
    if (s->cap - s->len < READ_CHUNK) {
      size_t cap = s->len + READ_CHUNK;
      char* p = realloc(s->partial, cap);
      if (p == NULL) return;
      s->partial = p;
      s->cap = cap;
    }
    ssize_t n = read(s->fd, s->partial + s->len, READ_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      close_stream(o, s);
      return;
    }
    s->len += (size_t)n;
    emit_lines(o, s);
  }
}

int hvds__output_pollfds(const hvds_output_t* o, struct pollfd* pfds, int max) {
  int k = 0;
  for (int i = 0; i < o->n && k < max; i++) {
    if (o->streams[i].fd < 0) continue;
    pfds[k].fd = o->streams[i].fd;
    pfds[k].events = POLLIN;
    pfds[k].revents = 0;
    k++;
  }
  return k;
}

void hvds__output_handle(hvds_output_t* o, const struct pollfd* pfds, int n) {
  for (int k = 0; k < n; k++) {
    if (pfds[k].revents == 0) continue;
    for (int i = 0; i < o->n; i++) {
      if (o->streams[i].fd == pfds[k].fd) {
        read_stream(o, &o->streams[i]);
        break;
      }
    }
  }
}

int hvds__output_open(const hvds_output_t* o) {
  int open_count = 0;
  for (int i = 0; i < o->n; i++) open_count += o->streams[i].fd >= 0;
  return open_count;
}

void hvds__output_destroy(hvds_output_t* o) {
  if (o == NULL) return;
  for (int i = 0; i < o->n; i++) {
    close_stream(o, &o->streams[i]);
    free(o->streams[i].partial);
  }
  free(o->streams);
  free(o->dir);
  free(o);
}
