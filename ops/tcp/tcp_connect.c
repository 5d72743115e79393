/* Mesh set-up of the TCP transport.
 *
 * Every rank listens on one socket and publishes "ip:port" under "<prefix>/addr/<rank>". Rank i
 * connects to every rank j < i and accepts every rank j > i, so each pair has exactly one
 * connection. The connector first sends a hello {magic, rank, size, token}; the token is a hash
 * of the prefix, so a stray connection (another job, a port scanner) is closed and ignored.
 * Finally each rank sends one byte on every connection once its whole mesh is up and waits for
 * one byte from every peer, so no rank returns before every rank is connected.
 */
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "tcp_internal.h"

#define HELLO_MAGIC 0x68766474u /* "hvdt" */
#define FOREVER_MS ((int64_t)100 * 3600 * 1000)
/* SO_SNDBUF/SO_RCVBUF in bytes; 0 leaves the kernel's autotuning on. Measured on loopback
 * (tcp_p2p_bench, 2 vCPUs): 1 MiB and autotuning tie; 4 and 8 MiB cut 64 MiB ping-pong from about
 * 4.1 to 3.2 GB/s (more data in flight than the caches hold) and do not change allreduce times. */
#ifndef TCP_SOCKBUF_BYTES
#define TCP_SOCKBUF_BYTES 0
#endif

typedef struct {
  uint32_t magic;
  uint32_t rank;
  uint32_t size;
  uint32_t zero;
  uint64_t token;
} hello_t;

/* Set-up state: the deadline and the error being built. */
typedef struct {
  tcp_t* t;
  int64_t deadline;
  int timeout_ms;
  char* err;
  size_t errlen;
  struct sockaddr_in* peer_sa; /* size entries */
  uint64_t token;              /* this job's hello token */
} setup_t;

static int left_ms(const setup_t* s) {
  int64_t left = s->deadline - hvds__now_ms();
  return left < 0 ? 0 : (int)left;
}

static hvds_result_t set_err(setup_t* s, hvds_result_t rc, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

static hvds_result_t set_err(setup_t* s, hvds_result_t rc, const char* fmt, ...) {
  if (s->err != NULL && s->errlen > 0) {
    int n = snprintf(s->err, s->errlen, "tcp connect: ");
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < s->errlen) vsnprintf(s->err + n, s->errlen - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return rc;
}

static uint64_t prefix_token(const char* prefix) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  const char* salt = "hvds-tcp/";
  for (const char* c = salt; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
  for (const char* c = prefix ? prefix : ""; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
  return h;
}

/* The address to listen on: iface's IPv4 address, else hostname's, else loopback. */
static hvds_result_t bind_address(setup_t* s, const char* iface, const char* hostname,
                                  struct in_addr* out) {
  out->s_addr = htonl(INADDR_LOOPBACK);
  if (iface != NULL && iface[0] != '\0') {
    struct ifaddrs* all = NULL;
    if (getifaddrs(&all) != 0) return set_err(s, HVDS_SYSTEM_ERROR, "getifaddrs: %s", strerror(errno));
    int found = 0;
    for (struct ifaddrs* a = all; a != NULL && !found; a = a->ifa_next) {
      if (a->ifa_addr == NULL || a->ifa_addr->sa_family != AF_INET) continue;
      if (strcmp(a->ifa_name, iface) != 0) continue;
      *out = ((struct sockaddr_in*)a->ifa_addr)->sin_addr;
      found = 1;
    }
    freeifaddrs(all);
    if (!found) return set_err(s, HVDS_INVALID_ARGUMENT, "no IPv4 address on interface %s", iface);
  } else if (hostname != NULL && hostname[0] != '\0') {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(hostname, NULL, &hints, &res);
    if (gai != 0 || res == NULL)
      return set_err(s, HVDS_INVALID_ARGUMENT, "cannot resolve %s: %s", hostname, gai_strerror(gai));
    *out = ((struct sockaddr_in*)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  return HVDS_SUCCESS;
}

/* Non-blocking, close-on-exec stream socket; buffers sized before connect/listen (so the window
 * scale covers them) when TCP_SOCKBUF_BYTES asks for it. */
static int new_socket(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int buf = TCP_SOCKBUF_BYTES;
  if (buf > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
  }
  return fd;
}

static void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static hvds_result_t listen_and_publish(setup_t* s, const hvds_kv_t* kv, const char* prefix,
                                        struct in_addr ip, int* lfd) {
  int rank = s->t->p->rank;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr = ip;
  socklen_t sl = sizeof sa;
  *lfd = new_socket();
  if (*lfd < 0) return set_err(s, HVDS_SYSTEM_ERROR, "socket: %s", strerror(errno));
  if (bind(*lfd, (struct sockaddr*)&sa, sizeof sa) != 0 || listen(*lfd, SOMAXCONN) != 0 ||
      getsockname(*lfd, (struct sockaddr*)&sa, &sl) != 0) {
    char ipstr[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &ip, ipstr, sizeof ipstr);
    return set_err(s, HVDS_SYSTEM_ERROR, "cannot listen on %s: %s", ipstr, strerror(errno));
  }
  char key[512], val[TCP_ADDR_LEN], ipstr[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &sa.sin_addr, ipstr, sizeof ipstr);
  snprintf(val, sizeof val, "%s:%d", ipstr, ntohs(sa.sin_port));
  snprintf(key, sizeof key, "%s/addr/%d", prefix ? prefix : "", rank);
  hvds_result_t rc = kv->set(kv->ctx, key, val, strlen(val));
  if (rc != HVDS_SUCCESS) return set_err(s, rc, "key-value set of %s failed", key);
  return HVDS_SUCCESS;
}

/* Reads every peer's published address. */
static hvds_result_t read_addresses(setup_t* s, const hvds_kv_t* kv, const char* prefix) {
  tcp_t* t = s->t;
  for (int j = 0; j < t->p->size; j++) {
    if (j == t->p->rank) continue;
    char key[512];
    snprintf(key, sizeof key, "%s/addr/%d", prefix ? prefix : "", j);
    void* val = NULL;
    size_t len = 0;
    int ms = left_ms(s) > 0 ? left_ms(s) : 1;
    hvds_result_t rc = kv->get(kv->ctx, key, ms, &val, &len);
    if (rc != HVDS_SUCCESS) {
      free(val);
      return set_err(s, rc, "key-value get of %s failed after %d ms (rank %d never published "
                     "its address)", key, ms, j);
    }
    char* addr = t->peers[j].addr;
    size_t n = len < TCP_ADDR_LEN - 1 ? len : TCP_ADDR_LEN - 1;
    memcpy(addr, val, n);
    addr[n] = '\0';
    free(val);
    char* colon = strrchr(addr, ':');
    struct sockaddr_in* sa = &s->peer_sa[j];
    sa->sin_family = AF_INET;
    char ip[TCP_ADDR_LEN];
    snprintf(ip, sizeof ip, "%.*s", colon ? (int)(colon - addr) : 0, addr);
    if (colon == NULL || inet_pton(AF_INET, ip, &sa->sin_addr) != 1)
      return set_err(s, HVDS_INTERNAL_ERROR, "rank %d published a bad address '%s'", j, addr);
    sa->sin_port = htons((uint16_t)atoi(colon + 1));
  }
  return HVDS_SUCCESS;
}

/* Waits until fd is ready for events; 0 on success, else an errno (ETIMEDOUT at the deadline). */
static int wait_fd(setup_t* s, int fd, short events) {
  for (;;) {
    struct pollfd pfd = {fd, events, 0};
    int n = poll(&pfd, 1, left_ms(s));
    if (n > 0) return 0;
    if (n == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
}

/* Moves all n bytes over a non-blocking socket before the deadline; 0 or an errno. */
static int xfer_all(setup_t* s, int fd, void* buf, size_t n, int is_write) {
  size_t done = 0;
  while (done < n) {
    ssize_t k = is_write ? send(fd, (char*)buf + done, n - done, MSG_NOSIGNAL)
                         : recv(fd, (char*)buf + done, n - done, 0);
    if (k > 0) {
      done += (size_t)k;
      continue;
    }
    if (k == 0) return ECONNRESET;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
    int e = wait_fd(s, fd, is_write ? POLLOUT : POLLIN);
    if (e != 0) return e;
  }
  return 0;
}

/* Connects to rank j (< this rank), retrying while it is not listening yet, and says hello. */
static hvds_result_t connect_peer(setup_t* s, int j) {
  tcp_t* t = s->t;
  int e = 0;
  for (;;) {
    int fd = new_socket();
    if (fd < 0) return set_err(s, HVDS_SYSTEM_ERROR, "socket: %s", strerror(errno));
    e = 0;
    if (connect(fd, (struct sockaddr*)&s->peer_sa[j], sizeof s->peer_sa[j]) != 0) {
      e = errno;
      if (e == EINPROGRESS) {
        socklen_t el = sizeof e;
        e = wait_fd(s, fd, POLLOUT);
        if (e == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0) e = errno;
      }
    }
    if (e == 0) {
      set_nodelay(fd);
      hello_t h = {HELLO_MAGIC, (uint32_t)t->p->rank, (uint32_t)t->p->size, 0, s->token};
      e = xfer_all(s, fd, &h, sizeof h, 1);
      if (e == 0) {
        t->peers[j].fd = fd;
        return HVDS_SUCCESS;
      }
    }
    close(fd);
    if (e == ETIMEDOUT || left_ms(s) == 0) break;
    if (e != ECONNREFUSED && e != ECONNRESET && e != EAGAIN && e != EINTR) {
      return set_err(s, HVDS_SYSTEM_ERROR, "cannot connect to rank %d (%s): %s", j,
                     t->peers[j].addr, strerror(e));
    }
    struct timespec ts = {0, 10 * 1000 * 1000}; /* not listening yet: retry */
    nanosleep(&ts, NULL);
  }
  return set_err(s, HVDS_TIMEOUT, "timed out after %d ms waiting to connect to rank %d (%s)%s%s",
                 s->timeout_ms, j, t->peers[j].addr, e && e != ETIMEDOUT ? ": " : "",
                 e && e != ETIMEDOUT ? strerror(e) : "");
}

/* A connection accepted but whose hello is not complete yet. */
typedef struct {
  int fd;
  size_t got;
  hello_t h;
} pending_t;

/* Checks a complete hello; on success the socket becomes the peer's connection. */
static int take_hello(setup_t* s, pending_t* c) {
  tcp_t* t = s->t;
  uint32_t r = c->h.rank;
  if (c->h.magic != HELLO_MAGIC || c->h.token != s->token || c->h.size != (uint32_t)t->p->size ||
      r <= (uint32_t)t->p->rank || r >= (uint32_t)t->p->size || t->peers[r].fd >= 0) {
    return 0;
  }
  set_nodelay(c->fd);
  t->peers[r].fd = c->fd;
  return 1;
}

/* Accepts the ranks above this one; stray connections are closed. */
static hvds_result_t accept_peers(setup_t* s, int lfd) {
  tcp_t* t = s->t;
  int need = t->p->size - 1 - t->p->rank, cap = need + 8, n_pend = 0;
  pending_t* pend = calloc((size_t)cap, sizeof *pend);
  struct pollfd* pfds = calloc((size_t)cap + 1, sizeof *pfds);
  hvds_result_t rc = HVDS_SUCCESS;
  if (pend == NULL || pfds == NULL) rc = set_err(s, HVDS_SYSTEM_ERROR, "out of memory");
  while (rc == HVDS_SUCCESS && need > 0) {
    pfds[0] = (struct pollfd){lfd, POLLIN, 0};
    for (int i = 0; i < n_pend; i++) pfds[i + 1] = (struct pollfd){pend[i].fd, POLLIN, 0};
    int k = poll(pfds, (nfds_t)n_pend + 1, left_ms(s));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      int missing = -1;
      for (int j = t->p->size - 1; j > t->p->rank; j--)
        if (t->peers[j].fd < 0) missing = j;
      rc = k == 0 ? set_err(s, HVDS_TIMEOUT, "timed out after %d ms waiting for rank %d (%s) to "
                            "connect", s->timeout_ms, missing, t->peers[missing].addr)
                  : set_err(s, HVDS_SYSTEM_ERROR, "poll: %s", strerror(errno));
      break;
    }
    for (int i = n_pend - 1; i >= 0; i--) { /* hellos first: they free pending slots */
      if (pfds[i + 1].revents == 0) continue;
      pending_t* c = &pend[i];
      ssize_t got = recv(c->fd, (char*)&c->h + c->got, sizeof c->h - c->got, 0);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (got > 0) c->got += (size_t)got;
      if (got > 0 && c->got < sizeof c->h) continue;
      if (got > 0 && take_hello(s, c)) {
        need--;
      } else {
        close(c->fd);
      }
      pend[i] = pend[--n_pend];
    }
    if ((pfds[0].revents & POLLIN) && n_pend < cap) {
      int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) pend[n_pend++] = (pending_t){fd, 0, {0, 0, 0, 0, 0}};
    }
  }
  for (int i = 0; i < n_pend; i++) close(pend[i].fd);
  free(pend);
  free(pfds);
  return rc;
}

/* One byte each way on every connection: returns once every peer finished its mesh. */
static hvds_result_t exchange_ready(setup_t* s) {
  tcp_t* t = s->t;
  char b = 'R';
  for (int pass = 0; pass < 2; pass++) {
    for (int j = 0; j < t->p->size; j++) {
      if (j == t->p->rank) continue;
      int e = xfer_all(s, t->peers[j].fd, &b, 1, pass == 0);
      if (e == ETIMEDOUT)
        return set_err(s, HVDS_TIMEOUT, "timed out after %d ms waiting for rank %d (%s) to "
                       "finish connecting", s->timeout_ms, j, t->peers[j].addr);
      if (e != 0)
        return set_err(s, HVDS_REMOTE_ERROR, "rank %d (%s): connection closed: %s", j,
                       t->peers[j].addr, strerror(e));
    }
  }
  return HVDS_SUCCESS;
}

hvds_result_t hvds__tcp_connect_mesh(tcp_t* t, const hvds_kv_t* kv, const char* prefix,
                                     const char* iface, const char* hostname, int timeout_ms,
                                     char* err, size_t errlen) {
  setup_t s = {t, hvds__now_ms() + (timeout_ms > 0 ? timeout_ms : FOREVER_MS), timeout_ms,
               err, errlen, NULL, prefix_token(prefix)};
  int lfd = -1;
  struct in_addr ip;
  hvds_result_t rc = HVDS_SUCCESS;
  s.peer_sa = calloc((size_t)t->p->size, sizeof *s.peer_sa);
  if (s.peer_sa == NULL) return set_err(&s, HVDS_SYSTEM_ERROR, "out of memory");
  HVDS_CHECK_GOTO(bind_address(&s, iface, hostname, &ip), rc, fail);
  HVDS_CHECK_GOTO(listen_and_publish(&s, kv, prefix, ip, &lfd), rc, fail);
  HVDS_CHECK_GOTO(read_addresses(&s, kv, prefix), rc, fail);
  for (int j = 0; j < t->p->rank; j++) HVDS_CHECK_GOTO(connect_peer(&s, j), rc, fail);
  HVDS_CHECK_GOTO(accept_peers(&s, lfd), rc, fail);
  HVDS_CHECK_GOTO(exchange_ready(&s), rc, fail);
fail:
  if (lfd >= 0) close(lfd);
  free(s.peer_sa);
  if (rc != HVDS_SUCCESS) {
    for (int j = 0; j < t->p->size; j++) {
      if (t->peers[j].fd >= 0) close(t->peers[j].fd);
      t->peers[j].fd = -1;
    }
  }
  return rc;
}
