/* Rendezvous store server: one thread, poll() over the listening socket, a wake-up pipe and
 * every client; non-blocking sockets with per-connection input and output buffers.
 *
 * A connection's first frame must be HELLO carrying the job's secret, compared in constant
 * time. Anything else is refused, counted and logged with the peer address (never the secret).
 * A GET that asks to wait parks its connection until the key is set or the wait expires; such
 * a connection's further frames stay buffered until the GET is answered, so replies keep order.
 *
 * Threads: the table is shared with hvds__store_server_set() callers and guarded by mu; the
 * connection list and buffers belong to the server thread alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "clock.h"
#include "store.h"
#include "store_proto.h"
#include "store_table.h"

#define HELLO_TIMEOUT_MS 10000
#define MAX_CONNS 65536
/* Replies a connection may have waiting before the server stops reading its requests, so a
 * client that sends GETs without reading the answers cannot make the server buffer without end. */
#define MAX_OUT_BACKLOG (4u << 20)
/* Out of descriptors: the listener rests this long instead of failing accept() in a loop. */
#define ACCEPT_PAUSE_MS 100
#define READ_CHUNK 65536
#define MAX_POLL_MS 1000
/* Largest body a client may send before it has authenticated. */
#define HELLO_MAX_BODY (1u + 4u + HVDS_STORE_MAX_SECRET)

typedef struct {
  int fd;
  int authed;
  int dead;                /* close at the end of this loop iteration */
  char peer[80];           /* "address:port" for log lines */
  int64_t hello_deadline;  /* refuse if still unauthenticated then */
  hvds_store_buf_t in;     /* received bytes not yet handled */
  hvds_store_buf_t out;    /* replies; out.data[out_off..out.len) not yet sent */
  size_t out_off;
  char* wait_key;          /* pending GET, or NULL */
  size_t wait_key_len;
  int64_t wait_deadline;   /* -1: wait forever */
} conn_t;

struct hvds_store_server {
  pthread_t thread;
  int listen_fd;
  int wake[2];                /* pipe: any byte wakes the server thread */
  int poll_limit_warned;      /* poll refused the descriptor count once (EINVAL) */
  char* secret;
  size_t secret_len;
  pthread_mutex_t mu;         /* guards table */
  hvds_store_table_t table;
  atomic_int stop;            /* written by hvds__store_server_stop */
  atomic_int refused;         /* written by the server thread */
  conn_t** conns;             /* server thread only */
  size_t nconns, conns_cap;
  struct pollfd* pfds;
  size_t pfds_cap;
  int64_t accept_paused_until; /* server thread only: listener not polled before then */
  int64_t last_emfile_warning; /* server thread only */
};

/* Compares in time that depends only on the expected secret's length. */
static int secret_equal(const hvds_store_server_t* srv, const char* given, size_t given_len) {
  volatile unsigned diff = given_len != srv->secret_len;
  for (size_t i = 0; i < srv->secret_len; i++) {
    unsigned char g = i < given_len ? (unsigned char)given[i] : 0;
    diff |= g ^ (unsigned char)srv->secret[i];
  }
  return diff == 0;
}

static void conn_flush(conn_t* c) {
  while (c->out_off < c->out.len) {
    ssize_t n = send(c->fd, c->out.data + c->out_off, c->out.len - c->out_off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) c->dead = 1;
      return;
    }
    c->out_off += (size_t)n;
  }
  c->out.len = c->out_off = 0;
}

static void reply(conn_t* c, hvds_store_msg_type_t type, const char* text, const void* val,
                  size_t len, int64_t num) {
  hvds_store_msg_t m = {0};
  m.type = type;
  m.key = text;
  m.key_len = text ? strlen(text) : 0;
  m.val = val;
  m.val_len = len;
  m.num = num;
  if (hvds__store_encode(&m, &c->out) != HVDS_SUCCESS) {
    HVDS_WARN("store: out of memory replying to %s", c->peer);
    c->dead = 1;
    return;
  }
  conn_flush(c);
}

static void refuse(hvds_store_server_t* srv, conn_t* c, const char* reason) {
  atomic_fetch_add(&srv->refused, 1);
  HVDS_WARN("store: refused connection from %s: %s", c->peer, reason);
  reply(c, HVDS_STORE_MSG_DENIED, NULL, NULL, 0, 0);
  c->dead = 1;
}

/* Answers a GET from the table if the key is there; returns 1 when answered. */
static int try_answer_get(hvds_store_server_t* srv, conn_t* c, const char* key, size_t key_len) {
  const void* val;
  size_t len;
  pthread_mutex_lock(&srv->mu);
  int found = hvds__store_table_get(&srv->table, key, key_len, &val, &len);
  if (found) reply(c, HVDS_STORE_MSG_VALUE, NULL, val, len, 0);
  pthread_mutex_unlock(&srv->mu);
  return found;
}

static void handle_get(hvds_store_server_t* srv, conn_t* c, const hvds_store_msg_t* m) {
  if (try_answer_get(srv, c, m->key, m->key_len)) return;
  if (m->num == 0) {
    reply(c, HVDS_STORE_MSG_NOTFOUND, NULL, NULL, 0, 0);
    return;
  }
  c->wait_key = malloc(m->key_len + 1);
  if (c->wait_key == NULL) {
    c->dead = 1;
    return;
  }
  memcpy(c->wait_key, m->key, m->key_len);
  c->wait_key[m->key_len] = '\0';
  c->wait_key_len = m->key_len;
  c->wait_deadline = m->num < 0 ? -1 : hvds__now_ms() + m->num;
}

static void handle_msg(hvds_store_server_t* srv, conn_t* c, const hvds_store_msg_t* m) {
  if (!c->authed) {
    if (m->type != HVDS_STORE_MSG_HELLO)
      refuse(srv, c, "first message was not HELLO");
    else if (!secret_equal(srv, m->key, m->key_len))
      refuse(srv, c, "wrong secret");
    else {
      c->authed = 1;
      reply(c, HVDS_STORE_MSG_OK, NULL, NULL, 0, 0);
    }
    return;
  }
  hvds_result_t rc;
  int64_t sum = 0;
  switch (m->type) {
    case HVDS_STORE_MSG_HELLO:
      reply(c, HVDS_STORE_MSG_OK, NULL, NULL, 0, 0);
      break;
    case HVDS_STORE_MSG_SET:
      pthread_mutex_lock(&srv->mu);
      rc = hvds__store_table_set(&srv->table, m->key, m->key_len, m->val, m->val_len);
      pthread_mutex_unlock(&srv->mu);
      if (rc == HVDS_SUCCESS)
        reply(c, HVDS_STORE_MSG_OK, NULL, NULL, 0, 0);
      else
        reply(c, HVDS_STORE_MSG_ERROR, "store full (key or byte limit reached)", NULL, 0, 0);
      break;
    case HVDS_STORE_MSG_GET:
      handle_get(srv, c, m);
      break;
    case HVDS_STORE_MSG_ADD:
      pthread_mutex_lock(&srv->mu);
      rc = hvds__store_table_add(&srv->table, m->key, m->key_len, m->num, &sum);
      pthread_mutex_unlock(&srv->mu);
      if (rc == HVDS_SUCCESS)
        reply(c, HVDS_STORE_MSG_INT, NULL, NULL, 0, sum);
      else
        reply(c, HVDS_STORE_MSG_ERROR, "ADD on a non-integer value, overflow or full store",
              NULL, 0, 0);
      break;
    case HVDS_STORE_MSG_DELETE_PREFIX:
      pthread_mutex_lock(&srv->mu);
      hvds__store_table_delete_prefix(&srv->table, m->key, m->key_len);
      pthread_mutex_unlock(&srv->mu);
      reply(c, HVDS_STORE_MSG_OK, NULL, NULL, 0, 0);
      break;
    default:
      HVDS_WARN("store: unexpected message type %d from %s; closing", (int)m->type, c->peer);
      reply(c, HVDS_STORE_MSG_ERROR, "unexpected message type", NULL, 0, 0);
      c->dead = 1;
      break;
  }
}

static size_t out_backlog(const conn_t* c) { return c->out.len - c->out_off; }

/* Handles every whole frame buffered on c, stopping while a GET waits or too many replies wait
 * to be sent. */
static void conn_process(hvds_store_server_t* srv, conn_t* c) {
  while (!c->dead && c->wait_key == NULL && out_backlog(c) < MAX_OUT_BACKLOG) {
    size_t frame_len;
    size_t max_body = c->authed ? HVDS_STORE_MAX_FRAME : HELLO_MAX_BODY;
    hvds_result_t rc = hvds__store_frame_peek(c->in.data, c->in.len, max_body, &frame_len);
    if (rc == HVDS_IN_PROGRESS) return;
    hvds_store_msg_t m;
    if (rc == HVDS_SUCCESS)
      rc = hvds__store_decode(c->in.data + HVDS_STORE_HEADER, frame_len - HVDS_STORE_HEADER, &m);
    if (rc != HVDS_SUCCESS) {
      if (!c->authed) {
        refuse(srv, c, "malformed or oversized first message");
      } else {
        HVDS_WARN("store: malformed or oversized frame from %s; closing", c->peer);
        c->dead = 1;
      }
      return;
    }
    handle_msg(srv, c, &m);
    hvds__store_buf_consume(&c->in, frame_len);
  }
}

static void conn_read(conn_t* c) {
  size_t limit = HVDS_STORE_HEADER + (c->authed ? HVDS_STORE_MAX_FRAME : HELLO_MAX_BODY);
  size_t room = limit - c->in.len;
  if (room > READ_CHUNK) room = READ_CHUNK;
  if (room == 0 || hvds__store_buf_reserve(&c->in, room) != HVDS_SUCCESS) return;
  ssize_t n = recv(c->fd, c->in.data + c->in.len, room, MSG_DONTWAIT);
  if (n > 0) {
    c->in.len += (size_t)n;
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
    c->dead = 1;
  }
}

static void conn_free(conn_t* c) {
  if (c == NULL) return;
  if (c->fd >= 0) close(c->fd);
  hvds__store_buf_free(&c->in);
  hvds__store_buf_free(&c->out);
  free(c->wait_key);
  free(c);
}

static void accept_all(hvds_store_server_t* srv) {
  for (;;) {
    struct sockaddr_storage addr;
    socklen_t alen = sizeof(addr);
    int fd = accept4(srv->listen_fd, (struct sockaddr*)&addr, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The connection stays queued; rest rather than spin on a listener that stays readable.
        int64_t now = hvds__now_ms();
        srv->accept_paused_until = now + ACCEPT_PAUSE_MS;
        if (now - srv->last_emfile_warning >= 10000) {
          HVDS_WARN("store: accept: %s (%zu connections open); pausing new connections",
                    strerror(errno), srv->nconns);
          srv->last_emfile_warning = now;
        }
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        HVDS_WARN("store: accept: %s", strerror(errno));
      }
      return;
    }
    conn_t* c = calloc(1, sizeof(*c));
    if (c == NULL || srv->nconns >= MAX_CONNS) {
      HVDS_WARN("store: dropping a connection (limit of %d or out of memory)", MAX_CONNS);
      free(c);
      close(fd);
      continue;
    }
    if (srv->nconns == srv->conns_cap) {
      size_t cap = srv->conns_cap ? srv->conns_cap * 2 : 16;
      conn_t** conns = realloc(srv->conns, cap * sizeof(*conns));
      if (conns == NULL) {
        free(c);
        close(fd);
        continue;
      }
      srv->conns = conns;
      srv->conns_cap = cap;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char host[64] = "?", port[16] = "?";
    getnameinfo((struct sockaddr*)&addr, alen, host, sizeof(host), port, sizeof(port),
                NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(c->peer, sizeof(c->peer), "%s:%s", host, port);
    c->fd = fd;
    c->hello_deadline = hvds__now_ms() + HELLO_TIMEOUT_MS;
    srv->conns[srv->nconns++] = c;
  }
}

/* Answers parked GETs whose key appeared or whose wait expired; enforces the HELLO deadline.
 * Returns the poll timeout until the next deadline. */
static int serve_deadlines(hvds_store_server_t* srv) {
  int64_t now = hvds__now_ms();
  int64_t next = now + MAX_POLL_MS;
  if (srv->accept_paused_until > now && srv->accept_paused_until < next)
    next = srv->accept_paused_until;
  for (size_t i = 0; i < srv->nconns; i++) {
    conn_t* c = srv->conns[i];
    if (c->dead) continue;
    if (!c->authed) {
      if (now >= c->hello_deadline)
        refuse(srv, c, "no HELLO within the handshake timeout");
      else if (c->hello_deadline < next)
        next = c->hello_deadline;
      continue;
    }
    // Answering may release buffered frames that park a new GET; loop until one waits.
    while (c->wait_key != NULL && !c->dead) {
      int answered = try_answer_get(srv, c, c->wait_key, c->wait_key_len);
      if (!answered && c->wait_deadline >= 0 && now >= c->wait_deadline) {
        reply(c, HVDS_STORE_MSG_NOTFOUND, NULL, NULL, 0, 0);
        answered = 1;
      }
      if (!answered) {
        if (c->wait_deadline >= 0 && c->wait_deadline < next) next = c->wait_deadline;
        break;
      }
      free(c->wait_key);
      c->wait_key = NULL;
      conn_process(srv, c);
    }
  }
  int64_t wait = next - now;
  return wait < 0 ? 0 : (int)wait;
}

static void reap_dead(hvds_store_server_t* srv) {
  size_t kept = 0;
  for (size_t i = 0; i < srv->nconns; i++) {
    conn_t* c = srv->conns[i];
    if (c->dead) {
      conn_free(c);
    } else {
      srv->conns[kept++] = c;
    }
  }
  srv->nconns = kept;
}

/* Fills srv->pfds: the wake pipe, the listener, then one entry per connection. */
static int build_pollfds(hvds_store_server_t* srv, size_t* n) {
  size_t need = srv->nconns + 2;
  if (need > srv->pfds_cap) {
    struct pollfd* p = realloc(srv->pfds, need * sizeof(*p));
    if (p == NULL) return -1;
    srv->pfds = p;
    srv->pfds_cap = need;
  }
  srv->pfds[0] = (struct pollfd){srv->wake[0], POLLIN, 0};
  short listen_ev = hvds__now_ms() >= srv->accept_paused_until ? POLLIN : 0;
  srv->pfds[1] = (struct pollfd){srv->listen_fd, listen_ev, 0};
  for (size_t i = 0; i < srv->nconns; i++) {
    conn_t* c = srv->conns[i];
    size_t limit = HVDS_STORE_HEADER + (c->authed ? HVDS_STORE_MAX_FRAME : HELLO_MAX_BODY);
    short ev = c->in.len < limit && out_backlog(c) < MAX_OUT_BACKLOG ? POLLIN : 0;
    if (c->out_off < c->out.len) ev |= POLLOUT;
    srv->pfds[i + 2] = (struct pollfd){c->fd, ev, 0};
  }
  *n = need;
  return 0;
}

static void* server_main(void* arg) {
  hvds_store_server_t* srv = arg;
  int timeout = MAX_POLL_MS;
  while (!atomic_load(&srv->stop)) {
    size_t n;
    if (build_pollfds(srv, &n) != 0) {
      HVDS_ERROR("store: out of memory; server thread exits");
      break;
    }
    size_t polled = srv->nconns;
    int pr = poll(srv->pfds, n, timeout);
    if (pr < 0 && errno == EINVAL) {
      /* More connections than the process's descriptor limit now allows (it was lowered):
       * keep serving once it rises or connections close, instead of ending the store. */
      if (!srv->poll_limit_warned) HVDS_WARN("store: poll over %zu descriptors: %s; retrying", n,
                                             strerror(errno));
      srv->poll_limit_warned = 1;
      usleep(100000);
      continue;
    }
    if (pr < 0 && errno != EINTR) {
      HVDS_ERROR("store: poll: %s", strerror(errno));
      break;
    }
    if (pr > 0) {
      if (srv->pfds[0].revents) {
        char drain[256];
        while (read(srv->wake[0], drain, sizeof(drain)) > 0) {
        }
      }
      for (size_t i = 0; i < polled; i++) {
        conn_t* c = srv->conns[i];
        short re = srv->pfds[i + 2].revents;
        if (re & (POLLIN | POLLERR | POLLHUP)) conn_read(c);
        if (re & POLLOUT) conn_flush(c);
        conn_process(srv, c);
      }
      if (srv->pfds[1].revents) accept_all(srv);
    }
    timeout = serve_deadlines(srv);
    reap_dead(srv);
  }
  return NULL;
}

static int open_listener(const char* bind_addr, int port, int* port_out) {
  char port_str[16];
  snprintf(port_str, sizeof(port_str), "%d", port);
  struct addrinfo hints = {0};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  struct addrinfo* res = NULL;
  const char* host = (bind_addr && bind_addr[0]) ? bind_addr : NULL;
  int gai = getaddrinfo(host, port_str, &hints, &res);
  if (gai != 0) {
    HVDS_WARN("store: cannot resolve bind address %s: %s", host ? host : "*", gai_strerror(gai));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo* ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      HVDS_WARN("store: cannot listen on %s:%d: %s", host ? host : "*", port, strerror(errno));
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) return -1;
  struct sockaddr_storage sa;
  socklen_t slen = sizeof(sa);
  getsockname(fd, (struct sockaddr*)&sa, &slen);
  *port_out = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&sa)->sin6_port
                                             : ((struct sockaddr_in*)&sa)->sin_port);
  return fd;
}

hvds_result_t hvds__store_server_start(const char* bind_addr, int port, const char* secret,
                                       hvds_store_server_t** out, int* port_out) {
  *out = NULL;
  if (secret == NULL || strlen(secret) > HVDS_STORE_MAX_SECRET || port < 0 || port > 65535)
    return HVDS_INVALID_ARGUMENT;
  hvds_store_server_t* srv = calloc(1, sizeof(*srv));
  if (srv == NULL) return HVDS_SYSTEM_ERROR;
  srv->listen_fd = srv->wake[0] = srv->wake[1] = -1;
  pthread_mutex_init(&srv->mu, NULL);
  srv->secret = strdup(secret);
  srv->secret_len = strlen(secret);
  int bound_port = 0;
  if (srv->secret == NULL) goto fail;
  srv->listen_fd = open_listener(bind_addr, port, &bound_port);
  if (srv->listen_fd < 0) goto fail;
  if (pipe2(srv->wake, O_NONBLOCK | O_CLOEXEC) != 0) goto fail;

  // The server thread takes no signals: they belong to the embedding program's threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int prc = pthread_create(&srv->thread, NULL, server_main, srv);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (prc != 0) goto fail;
  HVDS_INFO("store: serving on %s:%d", bind_addr && bind_addr[0] ? bind_addr : "*", bound_port);
  if (port_out != NULL) *port_out = bound_port;
  *out = srv;
  return HVDS_SUCCESS;

fail:
  if (srv->listen_fd >= 0) close(srv->listen_fd);
  if (srv->wake[0] >= 0) close(srv->wake[0]);
  if (srv->wake[1] >= 0) close(srv->wake[1]);
  free(srv->secret);
  pthread_mutex_destroy(&srv->mu);
  free(srv);
  return HVDS_SYSTEM_ERROR;
}

int hvds__store_server_get(hvds_store_server_t* srv, const char* key, char* out, size_t cap) {
  if (srv == NULL || key == NULL || out == NULL || cap == 0) return 0;
  const void* val = NULL;
  size_t len = 0;
  pthread_mutex_lock(&srv->mu);
  int found = hvds__store_table_get(&srv->table, key, strlen(key), &val, &len);
  if (found) {
    if (len > cap - 1) len = cap - 1;
    memcpy(out, val, len);
    out[len] = '\0';
  }
  pthread_mutex_unlock(&srv->mu);
  return found;
}

hvds_result_t hvds__store_server_set(hvds_store_server_t* srv, const char* key, const void* val,
                                     size_t len) {
  if (srv == NULL || key == NULL || (len && val == NULL)) return HVDS_INVALID_ARGUMENT;
  size_t key_len = strlen(key);
  if (key_len > HVDS_STORE_MAX_KEY || len > HVDS_STORE_MAX_VALUE) return HVDS_INVALID_ARGUMENT;
  pthread_mutex_lock(&srv->mu);
  hvds_result_t rc = hvds__store_table_set(&srv->table, key, key_len, val, len);
  pthread_mutex_unlock(&srv->mu);
  // Wake the thread so parked GETs for this key are answered now.
  if (rc == HVDS_SUCCESS && write(srv->wake[1], "s", 1) < 0 && errno != EAGAIN)
    HVDS_DEBUG("store: wake-up write failed: %s", strerror(errno));
  return rc;
}

int hvds__store_server_refused(hvds_store_server_t* srv) {
  return srv ? atomic_load(&srv->refused) : 0;
}

void hvds__store_server_stop(hvds_store_server_t* srv) {
  if (srv == NULL) return;
  atomic_store(&srv->stop, 1);
  if (write(srv->wake[1], "x", 1) < 0) HVDS_DEBUG("store: wake-up write failed");
  pthread_join(srv->thread, NULL);
  for (size_t i = 0; i < srv->nconns; i++) conn_free(srv->conns[i]);
  free(srv->conns);
  free(srv->pfds);
  close(srv->listen_fd);
  close(srv->wake[0]);
  close(srv->wake[1]);
  hvds__store_table_free(&srv->table);
  free(srv->secret);
  pthread_mutex_destroy(&srv->mu);
  free(srv);
}
