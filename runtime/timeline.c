/* Timeline writer: Chrome trace JSON, Horovod's event names, valid JSON after every flush.
 *
 * File layout. Open writes the head "[\n{meta},\n{meta}" followed by the terminator "\n]\n".
 * Every later event is formatted as ",\n{...}", so a flush is one pwritev of the buffered
 * events plus the terminator at `tail`, the offset where the previous terminator began.
 * The file only grows and is a complete array after each flush. When a write fails part-way,
 * the terminator is rewritten at the old tail (space the file already owns) and the file is
 * truncated after it, so it keeps the last complete content.
 *
 * Readers. A buffered read is not atomic against a write, so a reader that races a flush can
 * see it half done (for microseconds every 100 ms). Flushes hold flock(LOCK_EX); a reader
 * holding flock(LOCK_SH) always sees a complete array.
 *
 * Threads. Event calls format into `pending` under `mu` and never touch the file. The writer
 * thread swaps `pending` for its own empty buffer under `mu` and writes without holding it. */
#define _GNU_SOURCE
#include "timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "evbuf.h"
#include "log.h"
#include "thread_priority.h"

#define TERMINATOR "\n]\n"
#define TERMINATOR_LEN 3
#define FLUSH_INTERVAL_NS 100000000LL    /* writer wakes at least this often */
#define DEFAULT_FLUSH_BYTES (1u << 20)   /* wake the writer early past this much */
#define DEFAULT_MAX_BUFFERED (64u << 20) /* pending + in-flight bytes before dropping */
#define KEEP_CAPACITY (4u << 20)         /* writer frees larger buffers after a flush */

/* One tensor name, shown as one trace process. */
typedef struct {
  char* name;
  int pid;         /* 1-based index in order of first use */
  int announced;   /* process_name/process_sort_index metadata buffered */
  int negotiating; /* B NEGOTIATE_* emitted, E not yet */
  int in_op;       /* B <RESP> emitted, final E not yet */
  int in_activity; /* B <ACTIVITY> emitted, E not yet */
} tensor_t;

struct hvds_timeline {
  char* path;          /* immutable after open */
  int fd;              /* used by the writer thread only after open */
  int mark_cycles;     /* immutable after open */
  int64_t start_ns;    /* CLOCK_MONOTONIC at open; immutable */
  off_t tail;          /* writer only: offset of the current terminator */
  pthread_t writer;    /* joined by close */
  pthread_mutex_t mu;  /* guards everything below */
  pthread_cond_t cv;   /* wakes the writer: kicked or stop */
  evbuf_t pending;     /* events not yet handed to the writer */
  size_t inflight;     /* bytes the writer is writing now */
  size_t flush_bytes;  /* kick the writer when pending passes this */
  size_t max_buffered; /* drop events beyond pending + inflight of this */
  long long dropped;   /* events dropped: write error or cap */
  int failed;          /* a write failed; nothing more is buffered */
  int kicked;          /* writer asked to flush now */
  int stop;            /* close asked the writer to finish */
  int warn_cap;        /* a cap drop happened and was not yet logged */
  int warned_cap;      /* the cap warning was logged once */
  tensor_t** tensors;  /* index pid-1 */
  int ntensors;
  int tensors_cap;
  int* slots;    /* open-addressing hash: 0 empty, else index+1 */
  size_t nslots; /* power of two */
};

/* ---- Time ---- */

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long now_us(const hvds_timeline_t* tl) {
  return (long long)((clock_ns(CLOCK_MONOTONIC) - tl->start_ns) / 1000);
}

/* ---- Events (tl->mu held) ---- */

static void drop_locked(hvds_timeline_t* tl, int events, int cap) {
  tl->dropped += events;
  if (cap && !tl->warned_cap) tl->warn_cap = 1;
}

/* Starts an event; returns the mark to roll back to if it cannot be kept. */
static size_t ev_open(hvds_timeline_t* tl) {
  size_t mark = tl->pending.len;
  tl->pending.oom = 0;
  hvds__evbuf_puts(&tl->pending, ",\n{");
  return mark;
}

/* Ends the event; keeps it (returns 1) or rolls it back and counts it dropped (returns 0). */
static int ev_close(hvds_timeline_t* tl, size_t mark) {
  evbuf_t* b = &tl->pending;
  hvds__evbuf_putn(b, "}", 1);
  if (b->oom || b->len + tl->inflight > tl->max_buffered) {
    b->len = mark;
    b->oom = 0;
    drop_locked(tl, 1, 1);
    return 0;
  }
  b->events++;
  if (b->len >= tl->flush_bytes && !tl->kicked) {
    tl->kicked = 1;
    pthread_cond_signal(&tl->cv);
  }
  return 1;
}

/* Opens an event with its phase, optional name and timestamp: {"ph":..,"name":..,"ts":.. */
static size_t ev_begin(hvds_timeline_t* tl, const char* ph, const char* name_prefix,
                       const char* name) {
  size_t mark = ev_open(tl);
  evbuf_t* b = &tl->pending;
  hvds__evbuf_puts(b, "\"ph\":\"");
  hvds__evbuf_puts(b, ph);
  hvds__evbuf_putn(b, "\"", 1);
  if (name) {
    hvds__evbuf_puts(b, ",\"name\":\"");
    if (name_prefix) hvds__evbuf_puts(b, name_prefix);
    hvds__evbuf_put_escaped(b, name);
    hvds__evbuf_putn(b, "\"", 1);
  }
  hvds__evbuf_printf(b, ",\"ts\":%lld", now_us(tl));
  return mark;
}

/* A plain E event for the tensor. */
static int emit_end_locked(hvds_timeline_t* tl, const tensor_t* t) {
  size_t mark = ev_begin(tl, "E", NULL, NULL);
  hvds__evbuf_printf(&tl->pending, ",\"pid\":%d", t->pid);
  return ev_close(tl, mark);
}

static int emit_meta_locked(hvds_timeline_t* tl, const tensor_t* t) {
  size_t mark = ev_open(tl);
  hvds__evbuf_printf(&tl->pending,
             "\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":", t->pid);
  hvds__evbuf_put_string(&tl->pending, t->name);
  hvds__evbuf_puts(&tl->pending, "}");
  if (!ev_close(tl, mark)) return 0;
  mark = ev_open(tl);
  hvds__evbuf_printf(&tl->pending,
             "\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}",
             t->pid, t->pid);
  return ev_close(tl, mark);
}

/* ---- Tensor table (tl->mu held) ---- */

static uint64_t hash_name(const char* s) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static int table_grow_locked(hvds_timeline_t* tl) {
  size_t nslots = tl->nslots ? tl->nslots * 2 : 256;
  int* slots = calloc(nslots, sizeof(int));
  if (!slots) return 0;
  for (int i = 0; i < tl->ntensors; i++) {
    size_t s = hash_name(tl->tensors[i]->name) & (nslots - 1);
    while (slots[s]) s = (s + 1) & (nslots - 1);
    slots[s] = i + 1;
  }
  free(tl->slots);
  tl->slots = slots;
  tl->nslots = nslots;
  return 1;
}

static tensor_t* tensor_add_locked(hvds_timeline_t* tl, const char* name, size_t slot) {
  if (tl->ntensors == tl->tensors_cap) {
    int cap = tl->tensors_cap ? tl->tensors_cap * 2 : 64;
    tensor_t** tensors = realloc(tl->tensors, (size_t)cap * sizeof(*tensors));
    if (!tensors) return NULL;
    tl->tensors = tensors;
    tl->tensors_cap = cap;
  }
  tensor_t* t = calloc(1, sizeof(*t));
  if (t) t->name = strdup(name);
  if (!t || !t->name) {
    free(t);
    return NULL;
  }
  t->pid = tl->ntensors + 1;
  tl->tensors[tl->ntensors++] = t;
  tl->slots[slot] = t->pid;
  return t;
}

/* Finds or creates the tensor and makes sure its metadata is buffered. NULL: event dropped. */
static tensor_t* tensor_use_locked(hvds_timeline_t* tl, const char* name) {
  if (!name) name = "";
  if ((size_t)(tl->ntensors + 1) * 2 > tl->nslots && !table_grow_locked(tl)) {
    drop_locked(tl, 1, 0);
    return NULL;
  }
  size_t s = hash_name(name) & (tl->nslots - 1);
  tensor_t* t = NULL;
  for (; tl->slots[s]; s = (s + 1) & (tl->nslots - 1)) {
    if (strcmp(tl->tensors[tl->slots[s] - 1]->name, name) == 0) {
      t = tl->tensors[tl->slots[s] - 1];
      break;
    }
  }
  if (!t) t = tensor_add_locked(tl, name, s);
  if (!t) {
    drop_locked(tl, 1, 0);
    return NULL;
  }
  if (!t->announced) t->announced = emit_meta_locked(tl, t);
  return t;
}

/* ---- Locking around the event calls ---- */

/* Locks tl and returns 1 if events are accepted; otherwise counts one drop and returns 0
 * with tl unlocked. */
static int event_lock(hvds_timeline_t* tl) {
  if (!tl) return 0;
  pthread_mutex_lock(&tl->mu);
  if (!tl->failed) return 1;
  tl->dropped++;
  pthread_mutex_unlock(&tl->mu);
  return 0;
}

/* Unlocks tl and logs the memory-cap warning once, outside the lock. */
static void event_unlock(hvds_timeline_t* tl) {
  int warn = tl->warn_cap;
  if (warn) {
    tl->warn_cap = 0;
    tl->warned_cap = 1;
  }
  size_t cap = tl->max_buffered;
  pthread_mutex_unlock(&tl->mu);
  if (warn) {
    HVDS_WARN("timeline %s: the writer cannot keep up (%zu bytes buffered); dropping events",
              tl->path, cap);
  }
}

void hvds__timeline_negotiate_start(hvds_timeline_t* tl, const char* tensor, const char* req_type) {
  if (!event_lock(tl)) return;
  tensor_t* t = tensor_use_locked(tl, tensor);
  if (t && !t->negotiating) {
    size_t mark = ev_begin(tl, "B", "NEGOTIATE_", req_type ? req_type : "");
    hvds__evbuf_printf(&tl->pending, ",\"pid\":%d", t->pid);
    t->negotiating = ev_close(tl, mark);
  }
  event_unlock(tl);
}

void hvds__timeline_negotiate_rank_ready(hvds_timeline_t* tl, const char* tensor, int rank) {
  if (!event_lock(tl)) return;
  tensor_t* t = tensor_use_locked(tl, tensor);
  if (t) {
    size_t mark = ev_open(tl);
    hvds__evbuf_printf(&tl->pending, "\"ph\":\"X\",\"name\":\"%d\",\"ts\":%lld,\"pid\":%d,\"dur\":0", rank,
               now_us(tl), t->pid);
    ev_close(tl, mark);
  }
  event_unlock(tl);
}

void hvds__timeline_negotiate_end(hvds_timeline_t* tl, const char* tensor) {
  if (!event_lock(tl)) return;
  tensor_t* t = tensor_use_locked(tl, tensor);
  if (t && t->negotiating) {
    emit_end_locked(tl, t);
    t->negotiating = 0;
  }
  event_unlock(tl);
}

void hvds__timeline_start(hvds_timeline_t* tl, const char* tensor, const char* resp_type,
                          const char* args_json) {
  if (!event_lock(tl)) return;
  tensor_t* t = tensor_use_locked(tl, tensor);
  if (t) {
    if (t->negotiating) emit_end_locked(tl, t);
    if (t->in_activity) emit_end_locked(tl, t);
    if (t->in_op) emit_end_locked(tl, t);
    t->negotiating = t->in_activity = t->in_op = 0;
    size_t mark = ev_begin(tl, "B", NULL, resp_type ? resp_type : "");
    hvds__evbuf_printf(&tl->pending, ",\"pid\":%d", t->pid);
    if (args_json && *args_json) {
      hvds__evbuf_puts(&tl->pending, ",\"args\":");
      hvds__evbuf_put_json_text(&tl->pending, args_json);
    }
    t->in_op = ev_close(tl, mark);
  }
  event_unlock(tl);
}

void hvds__timeline_activity_start(hvds_timeline_t* tl, const char* tensor, const char* activity) {
  if (!event_lock(tl)) return;
  tensor_t* t = tensor_use_locked(tl, tensor);
  if (t) {
    if (t->in_activity) emit_end_locked(tl, t);
    size_t mark = ev_begin(tl, "B", NULL, activity ? activity : "");
    hvds__evbuf_printf(&tl->pending, ",\"pid\":%d", t->pid);
    t->in_activity = ev_close(tl, mark);
  }
  event_unlock(tl);
}

void hvds__timeline_activity_end(hvds_timeline_t* tl, const char* tensor) {
  if (!event_lock(tl)) return;
  tensor_t* t = tensor_use_locked(tl, tensor);
  if (t && t->in_activity) {
    emit_end_locked(tl, t);
    t->in_activity = 0;
  }
  event_unlock(tl);
}

void hvds__timeline_activity_span(hvds_timeline_t* tl, const char* tensor, const char* activity,
                                  double start_s, double end_s, const char* args_json) {
  if (!event_lock(tl)) return;
  tensor_t* t = tensor_use_locked(tl, tensor);
  if (t) {
    if (t->in_activity) emit_end_locked(tl, t);
    t->in_activity = 0;
    long long ts = (long long)(start_s * 1e6) - (long long)(tl->start_ns / 1000);
    long long dur = (long long)((end_s - start_s) * 1e6);
    size_t mark = ev_open(tl);
    hvds__evbuf_puts(&tl->pending, "\"ph\":\"X\",\"name\":\"");
    hvds__evbuf_put_escaped(&tl->pending, activity ? activity : "");
    hvds__evbuf_printf(&tl->pending, "\",\"ts\":%lld,\"dur\":%lld,\"pid\":%d",
                       ts > 0 ? ts : 0, dur > 0 ? dur : 0, t->pid);
    if (args_json && *args_json) {
      hvds__evbuf_puts(&tl->pending, ",\"args\":");
      hvds__evbuf_put_json_text(&tl->pending, args_json);
    }
    ev_close(tl, mark);
  }
  event_unlock(tl);
}

void hvds__timeline_end(hvds_timeline_t* tl, const char* tensor, const char* dtype_name,
                        const char* shape_text) {
  if (!event_lock(tl)) return;
  tensor_t* t = tensor_use_locked(tl, tensor);
  if (t && t->in_activity) {
    emit_end_locked(tl, t);
    t->in_activity = 0;
  }
  if (t && t->in_op) {
    size_t mark = ev_begin(tl, "E", NULL, NULL);
    hvds__evbuf_printf(&tl->pending, ",\"pid\":%d,\"args\":{\"dtype\":", t->pid);
    hvds__evbuf_put_string(&tl->pending, dtype_name ? dtype_name : "");
    hvds__evbuf_puts(&tl->pending, ",\"shape\":");
    hvds__evbuf_put_string(&tl->pending, shape_text ? shape_text : "");
    hvds__evbuf_puts(&tl->pending, "}");
    ev_close(tl, mark);
    t->in_op = 0;
  }
  event_unlock(tl);
}

void hvds__timeline_mark_cycle(hvds_timeline_t* tl) {
  if (!tl || !tl->mark_cycles || !event_lock(tl)) return;
  size_t mark = ev_begin(tl, "i", NULL, "CYCLE_START");
  hvds__evbuf_puts(&tl->pending, ",\"s\":\"g\"");
  ev_close(tl, mark);
  event_unlock(tl);
}

int hvds__timeline_dropped(hvds_timeline_t* tl) {
  if (!tl) return 0;
  pthread_mutex_lock(&tl->mu);
  long long dropped = tl->dropped;
  pthread_mutex_unlock(&tl->mu);
  return dropped > INT_MAX ? INT_MAX : (int)dropped;
}

void hvds__timeline_set_limits(hvds_timeline_t* tl, size_t flush_bytes, size_t max_buffered) {
  if (!tl) return;
  pthread_mutex_lock(&tl->mu);
  if (flush_bytes) tl->flush_bytes = flush_bytes;
  if (max_buffered) tl->max_buffered = max_buffered;
  pthread_mutex_unlock(&tl->mu);
}

/* ---- The file (writer thread, or open before the writer starts) ---- */

/* Writes all of data at off; returns 0 or an errno value. */
static int pwrite_all(int fd, const char* data, size_t len, off_t off) {
  while (len > 0) {
    ssize_t n = pwrite(fd, data, len, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ENOSPC;
    data += n;
    len -= (size_t)n;
    off += n;
  }
  return 0;
}

/* Writes data plus the terminator at tail, in one call when possible. Returns 0 or an errno value;
 * on error the previous terminator is restored and the file cut after it. */
static int write_chunk(hvds_timeline_t* tl, const char* data, size_t len) {
  size_t total = len + TERMINATOR_LEN, done = 0;
  int err = 0;
  while (done < total) {
    struct iovec iov[2];
    int cnt = 0;
    if (done < len) iov[cnt++] = (struct iovec){(void*)(data + done), len - done};
    size_t tdone = done > len ? done - len : 0;
    iov[cnt++] = (struct iovec){(void*)(TERMINATOR + tdone), TERMINATOR_LEN - tdone};
    ssize_t n = pwritev(tl->fd, iov, cnt, tl->tail + (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      break;
    }
    done += (size_t)n;
  }
  if (!err) {
    tl->tail += (off_t)len;
    return 0;
  }
  // Overwrites bytes the file already owns, so it works on a full disk too.
  if (pwrite_all(tl->fd, TERMINATOR, TERMINATOR_LEN, tl->tail) == 0) {
    if (ftruncate(tl->fd, tl->tail + TERMINATOR_LEN) != 0) { /* best effort */
    }
  }
  return err;
}

/* Writes buffered events under an exclusive flock(2), so that readers holding a shared lock
 * always see a complete array. Returns 0 or an errno value. */
static int write_locked_chunk(hvds_timeline_t* tl, const char* data, size_t len) {
  while (flock(tl->fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  int err = write_chunk(tl, data, len);
  flock(tl->fd, LOCK_UN);
  return err;
}

static struct timespec deadline_after(int64_t ns) {
  int64_t t = clock_ns(CLOCK_MONOTONIC) + ns;
  struct timespec ts = {(time_t)(t / 1000000000LL), (long)(t % 1000000000LL)};
  return ts;
}

/* Writer thread: flushes every FLUSH_INTERVAL_NS, when kicked, and once more on stop. */
static void* writer_main(void* arg) {
  hvds_timeline_t* tl = arg;
  hvds__priority_drop_self(); /* file writes are not latency-critical: no inherited priority */
  evbuf_t out = {0};
  pthread_mutex_lock(&tl->mu);
  for (;;) {
    struct timespec deadline = deadline_after(FLUSH_INTERVAL_NS);
    while (!tl->stop && !tl->kicked) {
      if (pthread_cond_timedwait(&tl->cv, &tl->mu, &deadline) == ETIMEDOUT) break;
    }
    tl->kicked = 0;
    int stop = tl->stop;
    evbuf_t swap = tl->pending;
    tl->pending = out;
    out = swap;
    tl->inflight = out.len;
    pthread_mutex_unlock(&tl->mu);

    int err = out.len ? write_locked_chunk(tl, out.data, out.len) : 0;
    if (err) {
      HVDS_WARN(
          "timeline %s: write failed: %s; the file keeps the events written so far and "
          "later events are dropped",
          tl->path, strerror(err));
    }
    int lost = err ? out.events : 0;
    out.len = 0;
    out.events = 0;
    if (out.cap > KEEP_CAPACITY) {
      free(out.data);
      out = (evbuf_t){0};
    }

    pthread_mutex_lock(&tl->mu);
    tl->inflight = 0;
    if (err) {
      tl->failed = 1;
      tl->dropped += lost + tl->pending.events;
      tl->pending.len = 0;
      tl->pending.events = 0;
    }
    if (stop || tl->failed) {
      if (tl->pending.len == 0) break;
    }
  }
  pthread_mutex_unlock(&tl->mu);
  free(out.data);
  return NULL;
}

/* ---- Open and close ---- */

static void set_err(char* err, size_t errlen, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char* err, size_t errlen, const char* fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* Frees a timeline whose writer is not running. Accepts NULL. */
static void timeline_free(hvds_timeline_t* tl) {
  if (!tl) return;
  if (tl->fd >= 0) close(tl->fd);
  for (int i = 0; i < tl->ntensors; i++) {
    free(tl->tensors[i]->name);
    free(tl->tensors[i]);
  }
  free(tl->tensors);
  free(tl->slots);
  free(tl->pending.data);
  free(tl->path);
  free(tl);
}

/* Truncates the file and writes the head and the first terminator, under the same lock as
 * the flushes; returns 0 or an errno value. */
static int write_head(hvds_timeline_t* tl) {
  evbuf_t head = {0};
  hvds__evbuf_printf(&head,
             "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,"
             "\"args\":{\"start_time_since_epoch_in_micros\":%lld}}",
             (long long)(clock_ns(CLOCK_REALTIME) / 1000));
  hvds__evbuf_puts(&head,
           ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":0,"
           "\"args\":{\"sort_index\":0}}");
  hvds__evbuf_puts(&head, TERMINATOR);
  while (flock(tl->fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  int err = head.oom ? ENOMEM : ftruncate(tl->fd, 0) != 0 ? errno : 0;
  if (!err) err = pwrite_all(tl->fd, head.data, head.len, 0);
  flock(tl->fd, LOCK_UN);
  if (!err) tl->tail = (off_t)(head.len - TERMINATOR_LEN);
  free(head.data);
  return err;
}

/* Rejects an existing directory, pipe or socket with a message saying what to give instead
 * (opening a FIFO for writing would block until a reader appears). */
static hvds_result_t check_path(const char* path, char* err, size_t errlen) {
  struct stat st;
  if (stat(path, &st) != 0) return HVDS_SUCCESS;  // open reports a missing directory
  if (S_ISDIR(st.st_mode)) {
    set_err(err, errlen,
            "timeline path '%s' is a directory; the timeline needs a file name such as "
            "'%s/timeline.json'",
            path, path);
    return HVDS_INVALID_ARGUMENT;
  }
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    set_err(err, errlen,
            "timeline path '%s' is a pipe or socket; the timeline needs a regular file", path);
    return HVDS_INVALID_ARGUMENT;
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__timeline_open(const char* path, int mark_cycles, hvds_timeline_t** out,
                                  char* err, size_t errlen) {
  hvds_timeline_t* tl = NULL;
  hvds_result_t rc = HVDS_SYSTEM_ERROR;
  int sync_ready = 0;
  int e;
  if (out) *out = NULL;
  if (!out || !path || !*path) {
    set_err(err, errlen, "timeline: no file path given");
    return HVDS_INVALID_ARGUMENT;
  }
  rc = check_path(path, err, errlen);
  if (rc != HVDS_SUCCESS) return rc;
  rc = HVDS_SYSTEM_ERROR;

  tl = calloc(1, sizeof(*tl));
  if (tl) {
    tl->fd = -1;
    tl->path = strdup(path);
  }
  if (!tl || !tl->path) {
    set_err(err, errlen, "timeline %s: out of memory", path);
    goto fail;
  }
  tl->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (tl->fd < 0) {
    e = errno;
    set_err(err, errlen, "cannot create timeline file '%s': %s", path, strerror(e));
    if (e == EISDIR) rc = HVDS_INVALID_ARGUMENT;
    goto fail;
  }
  tl->mark_cycles = mark_cycles != 0;
  tl->flush_bytes = DEFAULT_FLUSH_BYTES;
  tl->max_buffered = DEFAULT_MAX_BUFFERED;
  tl->start_ns = clock_ns(CLOCK_MONOTONIC);
  e = write_head(tl);
  if (e) {
    set_err(err, errlen, "cannot write timeline file '%s': %s", path, strerror(e));
    goto fail;
  }

  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  e = pthread_cond_init(&tl->cv, &attr);
  pthread_condattr_destroy(&attr);
  if (!e && (e = pthread_mutex_init(&tl->mu, NULL)) != 0) pthread_cond_destroy(&tl->cv);
  if (e) {
    set_err(err, errlen, "timeline %s: cannot create locks: %s", path, strerror(e));
    goto fail;
  }
  sync_ready = 1;
  e = pthread_create(&tl->writer, NULL, writer_main, tl);
  if (e) {
    set_err(err, errlen, "timeline %s: cannot start the writer thread: %s", path, strerror(e));
    goto fail;
  }
  *out = tl;
  return HVDS_SUCCESS;

fail:
  if (sync_ready) {
    pthread_cond_destroy(&tl->cv);
    pthread_mutex_destroy(&tl->mu);
  }
  timeline_free(tl);
  return rc;
}

void hvds__timeline_close(hvds_timeline_t* tl) {
  if (!tl) return;
  pthread_mutex_lock(&tl->mu);
  tl->stop = 1;
  pthread_cond_signal(&tl->cv);
  pthread_mutex_unlock(&tl->mu);
  pthread_join(tl->writer, NULL);
  pthread_cond_destroy(&tl->cv);
  pthread_mutex_destroy(&tl->mu);
  timeline_free(tl);
}
