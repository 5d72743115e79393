/* The shared-memory segment: creation by rank 0, attachment by the others, the liveness lock
 * each rank holds on its own byte of the segment, and futex wake-ups.
 *
 * Liveness: an attached rank holds an open-file-description write lock on byte `rank` of the
 * segment. The kernel drops it when the process dies (even while it is an unreaped zombie), so
 * a free lock on an ALIVE rank means it died. A child forked by the worker (a data-loader
 * process) inherits the lock, so the worker's own pid is checked too, when it is in our pid
 * namespace (the namespace's inode is recorded at attach).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "clock.h"
#include "shm_internal.h"

#define ROUND_UP(x, a) (((x) + (a)-1) / (a) * (a))

static size_t ctrl_area(int size) { return ROUND_UP((size_t)size * SHM_CTRL_BYTES, 4096); }

_Static_assert(sizeof(shm_ctrl_t) <= SHM_CTRL_BYTES, "shm_ctrl_t outgrew its slot");
_Static_assert(sizeof(shm_hdr_t) <= SHM_HDR_BYTES, "shm_hdr_t outgrew its slot");

static size_t segment_bytes(int size, size_t ring_bytes, size_t coll_bytes) {
  size_t rings = (size_t)size * (size_t)(size - 1);
  return SHM_HDR_BYTES + ctrl_area(size) + (size_t)size * coll_bytes +
         rings * (SHM_RING_HDR_BYTES + ring_bytes);
}

shm_ring_t* hvds__shm_ring(const shm_t* s, int src, int dst) {
  int P = s->p->size;
  size_t idx = (size_t)src * (size_t)(P - 1) + (size_t)(dst < src ? dst : dst - 1);
  char* rings = s->base + SHM_HDR_BYTES + ctrl_area(P) + (size_t)P * s->coll_bytes;
  return (shm_ring_t*)(rings + idx * (SHM_RING_HDR_BYTES + s->ring_bytes));
}

static uint64_t pid_namespace(void) {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Rank 0: a new segment under a random name, reserved in full and initialised. */
static hvds_result_t create_segment(shm_t* s, size_t ring_bytes, size_t coll_bytes, char* err,
                                    size_t errlen) {
  uint64_t nonce = 0;
  if (getrandom(&nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce)
    nonce = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)s;
  snprintf(s->name, sizeof s->name, "/hvds-%d-%016llx", (int)getpid(), (unsigned long long)nonce);
  s->fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (s->fd < 0) {
    snprintf(err, errlen, "shm_open(%s): %s", s->name, strerror(errno));
    s->name[0] = '\0';
    return HVDS_SYSTEM_ERROR;
  }
  s->creator = 1;
  size_t total = segment_bytes(s->p->size, ring_bytes, coll_bytes);
  // Reserve every page now: a full /dev/shm fails here instead of raising SIGBUS on first touch.
  int rc = posix_fallocate(s->fd, 0, (off_t)total);
  if (rc == EOPNOTSUPP || rc == ENOSYS) rc = ftruncate(s->fd, (off_t)total) == 0 ? 0 : errno;
  if (rc != 0) {
    snprintf(err, errlen, "reserving %zu bytes of shared memory for %s: %s", total, s->name,
             strerror(rc));
    return HVDS_SYSTEM_ERROR;
  }
  s->base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, s->fd, 0);
  if (s->base == MAP_FAILED) {
    s->base = NULL;
    snprintf(err, errlen, "mmap of %zu bytes: %s", total, strerror(errno));
    return HVDS_SYSTEM_ERROR;
  }
  s->map_bytes = total;
  shm_hdr_t* h = (shm_hdr_t*)s->base;
  h->version = 1;
  h->size = s->p->size;
  h->ring_bytes = ring_bytes;
  h->coll_bytes = coll_bytes;
  h->total_bytes = total;
  atomic_init(&h->attached, 0);
  atomic_init(&h->failed, 0);
  __atomic_store_n(&h->magic, SHM_MAGIC, __ATOMIC_RELEASE);
  return HVDS_SUCCESS;
}

/* Other ranks: the segment rank 0 published. */
static hvds_result_t attach_segment(shm_t* s, const char* name, char* err, size_t errlen) {
  s->fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
  if (s->fd < 0) {
    snprintf(err, errlen, "shm_open(%s): %s (is /dev/shm shared by the ranks of this host?)", name,
             strerror(errno));
    return HVDS_SYSTEM_ERROR;
  }
  struct stat st;
  if (fstat(s->fd, &st) != 0 || (size_t)st.st_size < SHM_HDR_BYTES) {
    snprintf(err, errlen, "shared memory segment %s is too small", name);
    return HVDS_SYSTEM_ERROR;
  }
  s->base =
      mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, s->fd, 0);
  if (s->base == MAP_FAILED) {
    s->base = NULL;
    snprintf(err, errlen, "mmap of %s: %s", name, strerror(errno));
    return HVDS_SYSTEM_ERROR;
  }
  s->map_bytes = (size_t)st.st_size;
  shm_hdr_t* h = (shm_hdr_t*)s->base;
  if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != SHM_MAGIC || h->version != 1 ||
      h->size != s->p->size || h->total_bytes != s->map_bytes ||
      h->total_bytes != segment_bytes(h->size, h->ring_bytes, h->coll_bytes)) {
    snprintf(err, errlen, "shared memory segment %s: bad header (size %d, expected %d ranks)", name,
             (int)h->size, s->p->size);
    return HVDS_SYSTEM_ERROR;
  }
  return HVDS_SUCCESS;
}

/* Takes the liveness lock, marks this rank alive, and unlinks the name if it came last. */
static hvds_result_t join(shm_t* s, char* err, size_t errlen) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = s->p->rank, .l_len = 1};
  if (fcntl(s->fd, F_OFD_SETLK, &fl) != 0) {
    snprintf(err, errlen, "locking byte %d of the segment: %s (a second rank %d?)", s->p->rank,
             strerror(errno), s->p->rank);
    return HVDS_SYSTEM_ERROR;
  }
  s->me->pidns = pid_namespace();
  atomic_store(&s->me->pid, (int32_t)getpid());
  atomic_store(&s->me->state, SHM_STATE_ALIVE);
  if (atomic_fetch_add(&s->hdr->attached, 1) + 1 == s->p->size) {
    shm_unlink(s->name);  // every rank holds it open now
    s->name[0] = '\0';
  }
  return HVDS_SUCCESS;
}

static void set_views(shm_t* s) {
  s->hdr = (shm_hdr_t*)s->base;
  s->ring_bytes = s->hdr->ring_bytes;
  s->coll_bytes = s->hdr->coll_bytes;
  s->ctrl = (shm_ctrl_t*)(s->base + SHM_HDR_BYTES);
  s->coll = s->base + SHM_HDR_BYTES + ctrl_area(s->p->size);
  s->me = &s->ctrl[s->p->rank];
  for (int q = 0; q < s->p->size; q++) {
    if (q == s->p->rank) continue;
    shm_peer_t* pe = &s->peers[q];
    pe->out = hvds__shm_ring(s, s->p->rank, q);
    pe->out_data = (char*)pe->out + SHM_RING_HDR_BYTES;
    pe->out_head = atomic_load(&pe->out->head);
    pe->in = hvds__shm_ring(s, q, s->p->rank);
    pe->in_data = (char*)pe->in + SHM_RING_HDR_BYTES;
    pe->in_tail = atomic_load(&pe->in->tail);
  }
}

/* Waits until every rank attached, a rank published that it cannot, or timeout_ms pass. The
 * store's get, with a short timeout, is the pause between looks. */
static hvds_result_t wait_attached(shm_t* s, const hvds_kv_t* kv, const char* prefix,
                                   int timeout_ms, char* err, size_t errlen) {
  char key[512];
  snprintf(key, sizeof key, "%s/shm/fail", prefix);
  int64_t deadline = timeout_ms > 0 ? hvds__now_ms() + timeout_ms : 0;
  while (atomic_load(&s->hdr->attached) < s->p->size) {
    void* val = NULL;
    size_t len = 0;
    if (kv->get(kv->ctx, key, 5, &val, &len) == HVDS_SUCCESS) {
      snprintf(err, errlen, "%.*s", (int)len, (char*)val);
      free(val);
      return HVDS_REMOTE_ERROR;
    }
    if (deadline > 0 && hvds__now_ms() >= deadline && atomic_load(&s->hdr->attached) < s->p->size) {
      snprintf(err, errlen, "only %d of %d ranks attached to the shared memory segment in %d ms",
               (int)atomic_load(&s->hdr->attached), s->p->size, timeout_ms);
      return HVDS_TIMEOUT;
    }
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__shm_seg_open(shm_t* s, const hvds_kv_t* kv, const char* prefix,
                                 size_t ring_bytes, size_t coll_bytes, int timeout_ms, char* err,
                                 size_t errlen) {
  char key[512];
  snprintf(key, sizeof key, "%s/shm", prefix);
  hvds_result_t rc;
  if (s->p->rank == 0) {
    rc = create_segment(s, ring_bytes, coll_bytes, err, errlen);
    // Publish the name, or the failure, so the others do not wait for a segment that never comes.
    char msg[600];
    int len = snprintf(msg, sizeof msg, "%s%s", rc == HVDS_SUCCESS ? "" : "!",
                       rc == HVDS_SUCCESS ? s->name : err);
    hvds_result_t krc = kv->set(kv->ctx, key, msg, (size_t)len);
    if (rc == HVDS_SUCCESS && krc != HVDS_SUCCESS) {
      snprintf(err, errlen, "publishing the segment's name failed");
      rc = krc;
    }
  } else {
    void* val = NULL;
    size_t len = 0;
    rc = kv->get(kv->ctx, key, timeout_ms > 0 ? timeout_ms : INT_MAX, &val, &len);
    if (rc != HVDS_SUCCESS) {
      snprintf(err, errlen, "no shared memory segment from rank 0 under %s", key);
    } else if (len == 0 || len >= sizeof s->name || ((char*)val)[0] == '!') {
      snprintf(err, errlen, "rank 0 could not create the shared memory segment: %.*s",
               (int)(len > 0 ? len - 1 : 0), len > 0 ? (char*)val + 1 : "");
      rc = HVDS_REMOTE_ERROR;
    } else {
      memcpy(s->name, val, len);
      s->name[len] = '\0';
      rc = attach_segment(s, s->name, err, errlen);
    }
    free(val);
  }
  if (rc == HVDS_SUCCESS) {
    set_views(s);
    rc = join(s, err, errlen);
  }
  if (rc != HVDS_SUCCESS && s->p->rank != 0) {  // the others stop waiting for this rank
    char msg[600];
    int len = snprintf(msg, sizeof msg, "rank %d could not attach: %s", s->p->rank, err);
    snprintf(key, sizeof key, "%s/shm/fail", prefix);
    kv->set(kv->ctx, key, msg, (size_t)(len < (int)sizeof msg ? len : (int)sizeof msg - 1));
  }
  return rc == HVDS_SUCCESS ? wait_attached(s, kv, prefix, timeout_ms, err, errlen) : rc;
}

void hvds__shm_seg_close(shm_t* s) {
  if (s->base != NULL) {
    if (s->me != NULL && !s->crashed && atomic_load(&s->me->state) == SHM_STATE_ALIVE) {
      atomic_store(&s->me->state, SHM_STATE_CLOSED);
      for (int q = 0; q < s->p->size; q++)  // a peer waiting on us learns it at once
        if (q != s->p->rank) hvds__shm_wake(s, q, 1);
    }
    munmap(s->base, s->map_bytes);
    s->base = NULL;
  }
  if (s->fd >= 0) close(s->fd);  // drops the liveness lock, after the state says closed
  s->fd = -1;
  if (s->creator && s->name[0]) shm_unlink(s->name);  // not every rank attached
  s->name[0] = '\0';
}

/* Whether pid, in our pid namespace, is gone or a zombie. */
static int process_gone(int32_t pid) {
  if (pid <= 0) return 0;
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* paren = strrchr(buf, ')');  // "pid (comm) S ..."
  return paren != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

int hvds__shm_peer_dead(shm_t* s, int peer) {
  shm_ctrl_t* c = &s->ctrl[peer];
  if (atomic_load(&c->state) != SHM_STATE_ALIVE) return 0;
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = peer, .l_len = 1};
  int lock_free = fcntl(s->fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_UNLCK;
  int gone = lock_free ||
             (c->pidns == s->me->pidns && c->pidns != 0 &&
              atomic_load(&c->pid) != (int32_t)getpid() && process_gone(atomic_load(&c->pid)));
  // A clean close marks the state before it drops the lock.
  return gone && atomic_load(&c->state) == SHM_STATE_ALIVE;
}

static long futex(_Atomic uint32_t* word, int op, uint32_t val, const struct timespec* ts) {
  return syscall(SYS_futex, (uint32_t*)word, op, val, ts, NULL, 0);
}

void hvds__shm_wake(shm_t* s, int peer, int force) {
  shm_ctrl_t* c = &s->ctrl[peer];
  if (!force && !atomic_load(&c->sleeping)) return;
  atomic_fetch_add(&c->wake_seq, 1);
  futex(&c->wake_seq, FUTEX_WAKE, INT_MAX, NULL);  // shared, not private: other processes
}

void hvds__shm_sleep(shm_t* s, uint32_t seq, int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  futex(&s->me->wake_seq, FUTEX_WAIT, seq, ms >= 0 ? &ts : NULL);
}
