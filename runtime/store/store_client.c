/* Rendezvous store client: one blocking TCP connection, one request in flight at a time.
 *
 * Each call sends one frame and waits for the answer. A GET that should wait for its key is
 * held by the server until the key appears or the wait expires, so the client never polls.
 * The handle has a mutex, so several threads may share it; their requests are serialized.
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "log.h"
#include "store.h"
#include "store_proto.h"

#define RETRY_SLEEP_MS 100
#define HELLO_MIN_WAIT_MS 5000
/* Slack on top of a GET's own wait before the client gives up on the server. */
#define GET_REPLY_SLACK_MS 60000

struct hvds_store {
  int fd;
  pthread_mutex_t mu;  /* serializes requests */
  char lost[160];      /* why the connection broke; "" while it works (written under mu) */
  hvds_store_buf_t in; /* bytes received, at most one frame once a call returns */
  hvds_store_buf_t out;
};

int hvds__store_local_addr(const hvds_store_t* s, char* out, size_t outlen) {
  struct sockaddr_in sa;
  socklen_t len = sizeof sa;
  if (s == NULL || getsockname(s->fd, (struct sockaddr*)&sa, &len) != 0 || sa.sin_family != AF_INET)
    return -1;
  return inet_ntop(AF_INET, &sa.sin_addr, out, (socklen_t)outlen) ? 0 : -1;
}

/* Milliseconds left until deadline for poll(); deadline < 0 means forever. */
static int remaining(int64_t deadline) {
  if (deadline < 0) return -1;
  int64_t left = deadline - hvds__now_ms();
  if (left <= 0) return 0;
  return left > 1000000 ? 1000000 : (int)left;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Records the first reason the connection broke; later calls fail at once with it. */
static hvds_result_t connection_lost(hvds_store_t* s, const char* why) {
  if (s->lost[0] == '\0') snprintf(s->lost, sizeof(s->lost), "%s", why);
  HVDS_DEBUG("store: %s", why);
  return HVDS_SYSTEM_ERROR;
}

static hvds_result_t send_all(hvds_store_t* s, const uint8_t* data, size_t len) {
  while (len > 0) {
    ssize_t n = send(s->fd, data, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      char why[128];
      snprintf(why, sizeof(why), "sending to the store failed: %s", strerror(errno));
      return connection_lost(s, why);
    }
    data += n;
    len -= (size_t)n;
  }
  return HVDS_SUCCESS;
}

/* Reads until one whole frame is buffered; *frame_len gets its size. */
static hvds_result_t recv_frame(hvds_store_t* s, int64_t deadline, size_t* frame_len) {
  for (;;) {
    hvds_result_t rc = hvds__store_frame_peek(s->in.data, s->in.len, HVDS_STORE_MAX_FRAME,
                                              frame_len);
    if (rc == HVDS_SUCCESS) return rc;
    if (rc != HVDS_IN_PROGRESS) {
      HVDS_WARN("store: malformed frame from server");
      return connection_lost(s, "the store sent a malformed frame");
    }
    struct pollfd pfd = {s->fd, POLLIN, 0};
    int pr = poll(&pfd, 1, remaining(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) return HVDS_SYSTEM_ERROR;
    if (pr == 0) return HVDS_TIMEOUT;
    if (hvds__store_buf_reserve(&s->in, 65536) != HVDS_SUCCESS) return HVDS_SYSTEM_ERROR;
    ssize_t n = recv(s->fd, s->in.data + s->in.len, s->in.cap - s->in.len, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) return connection_lost(s, "the store closed the connection");
    if (n < 0) {
      char why[128];
      snprintf(why, sizeof(why), "the connection to the store broke: %s", strerror(errno));
      return connection_lost(s, why);
    }
    s->in.len += (size_t)n;
  }
}

/* Sends req and decodes the reply into *reply, which points into s->in until the next call. */
static hvds_result_t rpc(hvds_store_t* s, const hvds_store_msg_t* req, int64_t deadline,
                         hvds_store_msg_t* reply) {
  if (s->lost[0]) return HVDS_SYSTEM_ERROR;
  hvds__store_buf_consume(&s->in, s->in.len);
  s->out.len = 0;
  HVDS_CHECK(hvds__store_encode(req, &s->out));
  HVDS_CHECK(send_all(s, s->out.data, s->out.len));
  size_t frame_len;
  hvds_result_t rc = recv_frame(s, deadline, &frame_len);
  if (rc == HVDS_TIMEOUT) {  // its late reply would answer the next request: stop here
    connection_lost(s, "the store did not answer a request in time");
    return HVDS_TIMEOUT;
  }
  if (rc != HVDS_SUCCESS) return rc;
  if (hvds__store_decode(s->in.data + HVDS_STORE_HEADER, frame_len - HVDS_STORE_HEADER,
                         reply) != HVDS_SUCCESS) {
    HVDS_WARN("store: undecodable reply from server");
    return HVDS_SYSTEM_ERROR;
  }
  if (reply->type == HVDS_STORE_MSG_ERROR) {
    HVDS_WARN("store: server error: %.*s", (int)reply->key_len, reply->key);
    return HVDS_INVALID_ARGUMENT;
  }
  return HVDS_SUCCESS;
}

static int retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
         err == ECONNRESET || err == ECONNABORTED || err == EAGAIN;
}

/* One non-blocking connect bounded by deadline. Returns the fd, or -1 with errno set. */
static int try_connect(const struct addrinfo* ai, int64_t deadline) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return -1;
  int err = 0;
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      struct pollfd pfd = {fd, POLLOUT, 0};
      int pr;
      do {
        pr = poll(&pfd, 1, remaining(deadline));
      } while (pr < 0 && errno == EINTR);
      socklen_t elen = sizeof(err);
      if (pr <= 0)
        err = ETIMEDOUT;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        err = errno;
    }
  }
  if (err != 0) {
    close(fd);
    errno = err;
    return -1;
  }
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/* Connects to host:port, retrying refused or unreachable peers until deadline. */
static hvds_result_t connect_retry(const char* host, int port, int64_t deadline, int* fd_out,
                                   char* err, size_t errlen) {
  char port_str[16];
  snprintf(port_str, sizeof(port_str), "%d", port);
  struct addrinfo hints = {0};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  for (;;) {
    struct addrinfo* res = NULL;
    int gai = getaddrinfo(host, port_str, &hints, &res);
    int last_err = 0;
    if (gai == 0) {
      for (struct addrinfo* ai = res; ai != NULL; ai = ai->ai_next) {
        int fd = try_connect(ai, deadline);
        if (fd >= 0) {
          freeaddrinfo(res);
          *fd_out = fd;
          return HVDS_SUCCESS;
        }
        last_err = errno;
      }
      freeaddrinfo(res);
      if (!retryable(last_err)) {
        snprintf(err, errlen, "connect to store %s:%d: %s", host, port, strerror(last_err));
        return HVDS_SYSTEM_ERROR;
      }
    }
    if (remaining(deadline) <= RETRY_SLEEP_MS) {
      if (gai != 0)
        snprintf(err, errlen, "resolve store host %s: %s", host, gai_strerror(gai));
      else
        snprintf(err, errlen, "timed out connecting to store %s:%d: %s", host, port,
                 strerror(last_err));
      return HVDS_TIMEOUT;
    }
    sleep_ms(RETRY_SLEEP_MS);
  }
}

static hvds_result_t say_hello(hvds_store_t* s, const char* secret, int64_t deadline, char* err,
                               size_t errlen) {
  hvds_store_msg_t req = {0}, reply;
  req.type = HVDS_STORE_MSG_HELLO;
  req.key = secret;
  req.key_len = strlen(secret);
  hvds_result_t rc = rpc(s, &req, deadline, &reply);
  if (rc == HVDS_SUCCESS && reply.type == HVDS_STORE_MSG_DENIED) rc = HVDS_INVALID_ARGUMENT;
  if (rc == HVDS_SUCCESS && reply.type != HVDS_STORE_MSG_OK) rc = HVDS_SYSTEM_ERROR;
  if (rc == HVDS_INVALID_ARGUMENT)
    snprintf(err, errlen, "the store refused this job's secret");
  else if (rc != HVDS_SUCCESS)
    snprintf(err, errlen, "store handshake failed (%s)",
             rc == HVDS_TIMEOUT ? "timeout" : "connection lost");
  return rc;
}

hvds_result_t hvds__store_connect(const char* host, int port, const char* secret, int timeout_ms,
                                  hvds_store_t** out, char* err, size_t errlen) {
  char scratch[8];
  if (err == NULL || errlen == 0) {
    err = scratch;
    errlen = sizeof(scratch);
  }
  err[0] = '\0';
  *out = NULL;
  if (host == NULL || secret == NULL || port <= 0 || port > 65535 ||
      strlen(secret) > HVDS_STORE_MAX_SECRET) {
    snprintf(err, errlen, "invalid store address or secret");
    return HVDS_INVALID_ARGUMENT;
  }
  hvds_store_t* s = calloc(1, sizeof(*s));
  if (s == NULL) return HVDS_SYSTEM_ERROR;
  s->fd = -1;
  pthread_mutex_init(&s->mu, NULL);
  int64_t start = hvds__now_ms();
  int64_t deadline = start + (timeout_ms > 0 ? timeout_ms : 0);
  hvds_result_t rc = connect_retry(host, port, deadline, &s->fd, err, errlen);
  if (rc != HVDS_SUCCESS) goto fail;
  int64_t hello_deadline = deadline > start + HELLO_MIN_WAIT_MS ? deadline
                                                                : start + HELLO_MIN_WAIT_MS;
  rc = say_hello(s, secret, hello_deadline, err, errlen);
  if (rc != HVDS_SUCCESS) goto fail;
  *out = s;
  return HVDS_SUCCESS;

fail:
  hvds__store_close(s);
  return rc;
}

/* Milliseconds from now to a deadline for rpc(); < 0: none. */
static int64_t deadline_in(int timeout_ms) { return timeout_ms < 0 ? -1 : hvds__now_ms() + timeout_ms; }

hvds_result_t hvds__store_set(hvds_store_t* s, const char* key, const void* val, size_t len) {
  return hvds__store_set_within(s, key, val, len, -1);
}

hvds_result_t hvds__store_set_within(hvds_store_t* s, const char* key, const void* val, size_t len,
                                     int timeout_ms) {
  if (s == NULL || key == NULL) return HVDS_INVALID_ARGUMENT;
  hvds_store_msg_t req = {0}, reply;
  req.type = HVDS_STORE_MSG_SET;
  req.key = key;
  req.key_len = strlen(key);
  req.val = val;
  req.val_len = len;
  pthread_mutex_lock(&s->mu);
  hvds_result_t rc = rpc(s, &req, deadline_in(timeout_ms), &reply);
  if (rc == HVDS_SUCCESS && reply.type != HVDS_STORE_MSG_OK) rc = HVDS_SYSTEM_ERROR;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int hvds__store_set_first(hvds_store_t* s, const char* count_key, const char* key, const void* val,
                          size_t len, int timeout_ms) {
  int64_t order = 0;
  return hvds__store_add_within(s, count_key, 1, &order, timeout_ms) == HVDS_SUCCESS &&
         order == 1 && hvds__store_set_within(s, key, val, len, timeout_ms) == HVDS_SUCCESS;
}

hvds_result_t hvds__store_get(hvds_store_t* s, const char* key, int timeout_ms, void** val,
                              size_t* len) {
  return hvds__store_get_within(s, key, timeout_ms, GET_REPLY_SLACK_MS, val, len);
}

hvds_result_t hvds__store_get_within(hvds_store_t* s, const char* key, int timeout_ms, int reply_ms,
                                     void** val, size_t* len) {
  if (s == NULL || key == NULL || val == NULL || len == NULL) return HVDS_INVALID_ARGUMENT;
  *val = NULL;
  *len = 0;
  hvds_store_msg_t req = {0}, reply;
  req.type = HVDS_STORE_MSG_GET;
  req.key = key;
  req.key_len = strlen(key);
  req.num = timeout_ms < 0 ? -1 : timeout_ms;
  int64_t deadline = timeout_ms < 0 ? -1 : hvds__now_ms() + timeout_ms + reply_ms;
  pthread_mutex_lock(&s->mu);
  hvds_result_t rc = rpc(s, &req, deadline, &reply);
  if (rc == HVDS_SUCCESS) {
    if (reply.type == HVDS_STORE_MSG_NOTFOUND) {
      rc = HVDS_TIMEOUT;
    } else if (reply.type != HVDS_STORE_MSG_VALUE) {
      rc = HVDS_SYSTEM_ERROR;
    } else {
      // One extra NUL byte so text values can be used as C strings.
      char* copy = malloc(reply.val_len + 1);
      if (copy == NULL) {
        rc = HVDS_SYSTEM_ERROR;
      } else {
        if (reply.val_len) memcpy(copy, reply.val, reply.val_len);
        copy[reply.val_len] = '\0';
        *val = copy;
        *len = reply.val_len;
      }
    }
  }
  pthread_mutex_unlock(&s->mu);
  return rc;
}

hvds_result_t hvds__store_add(hvds_store_t* s, const char* key, int64_t delta, int64_t* result) {
  return hvds__store_add_within(s, key, delta, result, -1);
}

hvds_result_t hvds__store_add_within(hvds_store_t* s, const char* key, int64_t delta,
                                     int64_t* result, int timeout_ms) {
  if (s == NULL || key == NULL) return HVDS_INVALID_ARGUMENT;
  hvds_store_msg_t req = {0}, reply;
  req.type = HVDS_STORE_MSG_ADD;
  req.key = key;
  req.key_len = strlen(key);
  req.num = delta;
  pthread_mutex_lock(&s->mu);
  hvds_result_t rc = rpc(s, &req, deadline_in(timeout_ms), &reply);
  if (rc == HVDS_SUCCESS && reply.type != HVDS_STORE_MSG_INT) rc = HVDS_SYSTEM_ERROR;
  if (rc == HVDS_SUCCESS && result != NULL) *result = reply.num;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

hvds_result_t hvds__store_delete_prefix(hvds_store_t* s, const char* prefix) {
  if (s == NULL || prefix == NULL) return HVDS_INVALID_ARGUMENT;
  hvds_store_msg_t req = {0}, reply;
  req.type = HVDS_STORE_MSG_DELETE_PREFIX;
  req.key = prefix;
  req.key_len = strlen(prefix);
  pthread_mutex_lock(&s->mu);
  hvds_result_t rc = rpc(s, &req, -1, &reply);
  if (rc == HVDS_SUCCESS && reply.type != HVDS_STORE_MSG_OK) rc = HVDS_SYSTEM_ERROR;
  pthread_mutex_unlock(&s->mu);
  return rc;
}

const char* hvds__store_lost(hvds_store_t* s) {
  if (s == NULL) return NULL;
  pthread_mutex_lock(&s->mu);
  const char* why = s->lost[0] ? s->lost : NULL;
  pthread_mutex_unlock(&s->mu);
  return why;
}

void hvds__store_close(hvds_store_t* s) {
  if (s == NULL) return;
  if (s->fd >= 0) close(s->fd);
  hvds__store_buf_free(&s->in);
  hvds__store_buf_free(&s->out);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
