/* The point-to-point interface (ops/p2p.h) over Gloo's TCP transport.
 *
 * One Gloo TCP device (one epoll thread) and one full mesh of pairs per communicator. Every
 * message is a Gloo unbound buffer sent or received on slot = tag; Gloo matches sends and
 * receives per (pair, slot) in the order they were posted. A zero-byte message travels as one
 * dummy byte, so it still synchronises the two ranks.
 *
 * Gloo facts this file relies on (libgloo-dev 0.0~git20220518.5b14351, read from its source):
 * - Pairs set TCP_NODELAY when they connect (tcp/pair.cc handleConnected), so nothing to do.
 * - Every read of an unbound buffer runs on the device's epoll thread. Pair::setSync() takes
 *   the socket off that thread and only the old bound-buffer API reads in the caller's thread,
 *   so sync / busy-poll mode cannot carry unbound buffers in this version.
 * - A wait that times out closes every pair of the context ("Application timeout caused pair
 *   closure") and throws gloo::IoException("Timed out waiting ...").
 * - Pair::close() (via gloo::Context::closeConnections) resets the socket (SO_LINGER 0) without
 *   waking local waiters; the peer's epoll thread sees ECONNRESET and fails its waiters at once.
 * - Gloo writes with writev(2) and never ignores SIGPIPE; see SigpipeGuard.
 *
 * Failure model: the first failure (peer lost, timeout, abort) marks the communicator failed,
 * wakes every pending wait on this rank, and closes every connection, so ranks blocked on this
 * one fail within milliseconds instead of waiting for their own timeouts.
 */
#include "gloo_p2p.h"

#include <pthread.h>
#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "log.h"

namespace {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

// Bounds "no timeout" so that now() + timeout cannot overflow (Gloo uses the same bound).
constexpr Ms kForever = std::chrono::duration_cast<Ms>(std::chrono::hours(100));
// Slot of the connect handshake; every handshake message is matched before create returns,
// so a user tag with the same value cannot be confused with it afterwards.
constexpr uint64_t kHandshakeSlot = ~uint64_t{0};
constexpr uint64_t kDoorbellSlot = ~uint64_t{0} - 1;
// Idle request objects kept for reuse.
constexpr size_t kMaxFreeReqs = 256;

// A failure of the key-value callbacks, carrying their status.
struct KvError : std::runtime_error {
  KvError(hvds_result_t r, const std::string& what) : std::runtime_error(what), rc(r) {}
  hvds_result_t rc;
};

Ms remaining(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now());
  return left.count() > 0 ? left : Ms(0);
}

/* Gloo's rendezvous store over the caller's hvds_kv_t; every key gets "<prefix>/". Values read
 * are kept so the shim can later find its peers' addresses. */
class KvStore : public gloo::rendezvous::Store {
 public:
  KvStore(const hvds_kv_t& kv, const char* prefix, Clock::time_point deadline)
      : kv_(kv), prefix_(prefix ? prefix : ""), deadline_(deadline) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    std::string k = full(key);
    hvds_result_t rc = kv_.set(kv_.ctx, k.c_str(), data.data(), data.size());
    if (rc != HVDS_SUCCESS) throw KvError(rc, "key-value set of " + k + " failed");
  }

  std::vector<char> get(const std::string& key) override {
    auto it = seen_.find(key);
    if (it != seen_.end()) return it->second;
    return fetch(key, remaining(deadline_));
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, remaining(deadline_)); }

  void wait(const std::vector<std::string>& keys, const Ms& timeout) override {
    auto deadline = std::min(deadline_, Clock::now() + timeout);
    for (const auto& key : keys) {
      if (seen_.count(key) == 0) fetch(key, remaining(deadline));
    }
  }

  // A value this store has read, or NULL.
  const std::vector<char>* seen(const std::string& key) const {
    auto it = seen_.find(key);
    return it == seen_.end() ? nullptr : &it->second;
  }

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }

  std::vector<char> fetch(const std::string& key, Ms timeout) {
    std::string k = full(key);
    void* val = nullptr;
    size_t len = 0;
    int ms = (int)std::max<int64_t>(1, timeout.count());
    hvds_result_t rc = kv_.get(kv_.ctx, k.c_str(), ms, &val, &len);
    if (rc != HVDS_SUCCESS) {
      free(val);
      throw KvError(rc, "key-value get of " + k + " failed after " + std::to_string(ms) + " ms");
    }
    std::vector<char> out((char*)val, (char*)val + len);
    free(val);
    seen_[key] = out;
    return out;
  }

  hvds_kv_t kv_;
  std::string prefix_;
  Clock::time_point deadline_;
  std::map<std::string, std::vector<char>> seen_;
};

/* Keeps a write to a reset socket from killing the process: Gloo writes with writev(2), which
 * cannot pass MSG_NOSIGNAL. While alive, SIGPIPE is blocked in this thread; a SIGPIPE raised
 * meanwhile is consumed before the old mask returns. Inactive when SIGPIPE is ignored anyway. */
class SigpipeGuard {
 public:
  explicit SigpipeGuard(bool active) : active_(active) {
    if (!active_) return;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
    was_blocked_ = sigismember(&old_, SIGPIPE) == 1;
  }
  ~SigpipeGuard() {
    if (!active_ || was_blocked_) return;
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      struct timespec zero = {0, 0};
      sigtimedwait(&set, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  bool active_;
  bool was_blocked_ = true;
  sigset_t old_;
};

bool sigpipe_ignored() {
  struct sigaction sa;
  if (sigaction(SIGPIPE, nullptr, &sa) != 0) return false;
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_IGN;
}

}  // namespace

// One posted send or receive. Reused through the communicator's free list.
struct hvds_p2p_req {
  std::unique_ptr<gloo::transport::UnboundBuffer> ubuf;
  hvds_p2p_req* prev = nullptr;  // in-flight list, under GlooComm::mu
  hvds_p2p_req* next = nullptr;
  int peer = -1;
  bool is_send = false;
  size_t bytes = 0;
  uint64_t tag = 0;
  char dummy = 0;  // the byte a zero-byte message carries
};

namespace {

using Req = hvds_p2p_req;

struct GlooComm {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::rendezvous::Context> ctx;  // NULL when size is 1
  std::vector<std::string> peer_addr;              // "ip:port" each peer listened on
  bool guard_sigpipe = true;                       // set at create; read-only after

  std::mutex mu;              // guards everything below, and p->error / p->failed_peer
  bool failed = false;        // set once, never cleared
  hvds_result_t fail_rc = HVDS_SUCCESS;
  Req inflight;               // sentinel of the circular list of posted requests
  std::vector<Req*> free_reqs;

  std::once_flag closed;      // connections are closed at most once

  /* Doorbell: one 16-byte receive from every peer stays posted on bell_rx (peer i's epoch and
   * ring count land at 2 i), so a ring is delivered at once whatever the receiver is doing. Only the
   * coordinator thread waits or rings; bell_interrupt may come from any thread. */
  std::vector<uint64_t> bell_in;   /* peer i's latest ring: {epoch, ring count} at 2 i */
  std::vector<uint64_t> bell_seen; /* the ring count of peer i consumed last */
  uint64_t bell_out[2] = {0, 0};   /* this rank's ring: {epoch, ring count} */
  uint64_t bell_max = 0;           /* the highest epoch any peer rang */
  std::unique_ptr<gloo::transport::UnboundBuffer> bell_rx;
  std::unique_ptr<gloo::transport::UnboundBuffer> bell_tx;
  /* Alone (size 1) there is no pair to ring over: a wait ends only by an interrupt. */
  std::condition_variable alone_cv; /* under mu */
  bool alone_interrupt = false;
};

GlooComm* comm_of(hvds_p2p_t* p) { return static_cast<GlooComm*>(p->impl); }

// Closes every pair once. When it returns, Gloo's thread no longer touches any buffer.
void close_connections(GlooComm* c) {
  std::call_once(c->closed, [c] {
    try {
      if (c->ctx) c->ctx->closeConnections();
    } catch (const std::exception& e) {
      HVDS_DEBUG("gloo closeConnections: %s", e.what());
    }
  });
}

/* Marks the communicator failed with the first cause, wakes every pending wait, and closes the
 * connections so peers blocked on this rank fail too. Returns the status the caller reports:
 * the first failure's. */
hvds_result_t fail(hvds_p2p_t* p, hvds_result_t rc, int peer, const std::string& msg) {
  GlooComm* c = comm_of(p);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (!c->failed) {
      c->failed = true;
      c->fail_rc = rc;
      p->failed_peer = peer;
      snprintf(p->error, sizeof(p->error), "%s", msg.c_str());
      HVDS_DEBUG("gloo p2p rank %d failed: %s", p->rank, p->error);
      for (Req* r = c->inflight.next; r != &c->inflight; r = r->next) {
        if (r->is_send) {
          r->ubuf->abortWaitSend();
        } else {
          r->ubuf->abortWaitRecv();
        }
      }
      if (c->bell_rx) c->bell_rx->abortWaitRecv();
      c->alone_cv.notify_all();
    }
    rc = c->fail_rc;
  }
  close_connections(c);
  return rc;
}

// Turns an exception from Gloo about the pair with peer into a failure of the communicator.
hvds_result_t fail_from(hvds_p2p_t* p, int peer, const std::exception& e, int timeout_ms) {
  GlooComm* c = comm_of(p);
  const char* what = e.what();
  char msg[sizeof(p->error)];
  if (strstr(what, "Timed out waiting") != nullptr) {
    snprintf(msg, sizeof(msg), "timed out after %d ms waiting for rank %d", timeout_ms, peer);
    return fail(p, HVDS_TIMEOUT, peer, msg);
  }
  if (strstr(what, "Application timeout") != nullptr) {
    snprintf(msg, sizeof(msg), "timed out: another wait on this communicator timed out (%s)",
             what);
    return fail(p, HVDS_TIMEOUT, -1, msg);
  }
  if (dynamic_cast<const gloo::IoException*>(&e) != nullptr) {
    if (peer < 0 || peer >= (int)c->peer_addr.size()) {  // Gloo did not say which pair
      snprintf(msg, sizeof(msg), "a peer's connection closed: %s", what);
      return fail(p, HVDS_REMOTE_ERROR, -1, msg);
    }
    snprintf(msg, sizeof(msg), "rank %d (%s): connection closed: %s", peer,
             c->peer_addr[peer].c_str(), what);
    return fail(p, HVDS_REMOTE_ERROR, peer, msg);
  }
  snprintf(msg, sizeof(msg), "gloo error with rank %d: %s", peer, what);
  return fail(p, HVDS_INTERNAL_ERROR, peer, msg);
}

// Under c->mu.
Req* take_req(GlooComm* c) {
  if (c->free_reqs.empty()) return new Req();
  Req* r = c->free_reqs.back();
  c->free_reqs.pop_back();
  return r;
}

// Unlinks r and returns it to the free list; frees its unbound buffer.
void release_req(GlooComm* c, Req* r) {
  std::unique_ptr<gloo::transport::UnboundBuffer> ubuf;
  std::lock_guard<std::mutex> lock(c->mu);
  if (r->next != nullptr) {
    r->prev->next = r->next;
    r->next->prev = r->prev;
    r->prev = r->next = nullptr;
  }
  ubuf.swap(r->ubuf);  // destroyed after the lock is dropped (it may wait for Gloo's thread)
  if (c->free_reqs.size() < kMaxFreeReqs) {
    c->free_reqs.push_back(r);
  } else {
    delete r;
  }
}

hvds_result_t post(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag, bool is_send,
                   hvds_p2p_req_t** out) {
  if (out != nullptr) *out = nullptr;
  if (p == nullptr || p->impl == nullptr || out == nullptr) return HVDS_INVALID_ARGUMENT;
  if (peer < 0 || peer >= p->size || peer == p->rank || (bytes > 0 && buf == nullptr)) {
    return HVDS_INVALID_ARGUMENT;
  }
  GlooComm* c = comm_of(p);
  Req* r = nullptr;
  try {
    SigpipeGuard guard(c->guard_sigpipe);
    std::lock_guard<std::mutex> lock(c->mu);  // no posting into connections abort closed
    if (c->failed) return c->fail_rc;
    r = take_req(c);
    r->peer = peer;
    r->is_send = is_send;
    r->bytes = bytes;
    r->tag = tag;
    void* ptr = bytes > 0 ? buf : &r->dummy;
    size_t n = bytes > 0 ? bytes : 1;
    r->ubuf = c->ctx->createUnboundBuffer(ptr, n);
    if (is_send) {
      r->ubuf->send(peer, tag, 0, n);
    } else {
      r->ubuf->recv(peer, tag, 0, n);
    }
    r->prev = &c->inflight;
    r->next = c->inflight.next;
    c->inflight.next->prev = r;
    c->inflight.next = r;
  } catch (const std::exception& e) {
    if (r != nullptr) release_req(c, r);
    return fail_from(p, peer, e, p->timeout_ms);
  }
  *out = r;
  return HVDS_SUCCESS;
}

hvds_result_t gloo_isend(hvds_p2p_t* p, int peer, const void* buf, size_t bytes, uint64_t tag,
                         hvds_p2p_req_t** req) {
  return post(p, peer, const_cast<void*>(buf), bytes, tag, true, req);
}

hvds_result_t gloo_irecv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                         hvds_p2p_req_t** req) {
  return post(p, peer, buf, bytes, tag, false, req);
}

hvds_result_t gloo_wait(hvds_p2p_t* p, hvds_p2p_req_t* req, int timeout_ms) {
  if (p == nullptr || p->impl == nullptr || req == nullptr) return HVDS_INVALID_ARGUMENT;
  GlooComm* c = comm_of(p);
  int ms = timeout_ms < 0 ? p->timeout_ms : timeout_ms;
  Ms timeout = (timeout_ms < 0 && ms <= 0) ? kForever : Ms(ms);
  hvds_result_t rc = HVDS_SUCCESS;
  try {
    bool done = req->is_send ? req->ubuf->waitSend(nullptr, timeout)
                             : req->ubuf->waitRecv(nullptr, timeout);
    if (!done) {  // woken by fail()
      std::lock_guard<std::mutex> lock(c->mu);
      rc = c->fail_rc;
    }
  } catch (const std::exception& e) {
    rc = fail_from(p, req->peer, e, ms);
  }
  if (rc != HVDS_SUCCESS) close_connections(c);  // Gloo's thread must be off the buffer
  release_req(c, req);
  return rc;
}

void gloo_abort(hvds_p2p_t* p) {
  if (p == nullptr || p->impl == nullptr) return;
  fail(p, HVDS_SHUT_DOWN, -1, "communicator aborted on this rank");
}

// Frees the communicator and p itself (p was calloc'd by create), as every p2p implementation.
void gloo_destroy(hvds_p2p_t* p) {
  if (p == nullptr) return;
  GlooComm* c = comm_of(p);
  if (c != nullptr) {
    try {
      for (Req* r : c->free_reqs) delete r;
      c->free_reqs.clear();
      c->bell_rx.reset();  // pairs hold only weak references to posted buffers
      c->bell_tx.reset();
      c->ctx.reset();     // pairs close their sockets; peers see end-of-file
      c->device.reset();  // joins the epoll thread
    } catch (const std::exception& e) {
      HVDS_WARN("gloo p2p destroy: %s", e.what());
    }
    delete c;
  }
  free(p);
}

/* Re-posts the doorbell receive of every peer whose ring landed since it was last seen (its ring
 * count moved), whether or not Gloo's completion for it was taken yet; true when one of those
 * rings is for epoch or later (older ones were for cycles already run). A Gloo send completes
 * only once the receiver has a receive posted, so a ring that lands while this rank is not
 * waiting (it is running cycles, or ringing itself) must be re-armed before this rank rings: two
 * ranks that both have work when they go idle would otherwise ring each other with no receive
 * posted on either side, and both would block until the timeout. */
bool rearm_bell(hvds_p2p_t* p, GlooComm* c, uint64_t epoch) {
  for (int i = 0; i < p->size; i++) {
    if (i == p->rank || c->bell_in[2 * i + 1] == c->bell_seen[i]) continue;
    c->bell_seen[i] = c->bell_in[2 * i + 1];
    c->bell_max = std::max(c->bell_max, c->bell_in[2 * i]);
    c->bell_rx->recv(i, kDoorbellSlot, (size_t)i * 16, 16);  // keep one posted per peer
  }
  return c->bell_max >= epoch;  // a ring is remembered, as p2p.h says
}

/* bell_wait alone: until bell_interrupt (or a failure). */
hvds_result_t wait_alone(GlooComm* c) {
  std::unique_lock<std::mutex> lock(c->mu);
  c->alone_cv.wait(lock, [c] { return c->alone_interrupt || c->failed; });
  if (c->failed) return c->fail_rc;
  c->alone_interrupt = false;
  return HVDS_IN_PROGRESS;
}

hvds_result_t gloo_bell_wait(hvds_p2p_t* p, uint64_t epoch) {
  GlooComm* c = comm_of(p);
  if (p->size == 1) return wait_alone(c);
  if (!c->bell_rx) return HVDS_NOT_SUPPORTED;
  int from = -1;
  try {
    SigpipeGuard guard(c->guard_sigpipe);
    if (rearm_bell(p, c, epoch)) return HVDS_SUCCESS;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(c->mu);
        if (c->failed) return c->fail_rc;
      }
      // No timeout: a Gloo timeout would close every pair. Interrupts and failures wake us.
      if (!c->bell_rx->waitRecv(&from, kForever)) return HVDS_IN_PROGRESS;
      /* Gloo names one sender for completions that landed together (the last one's), and
       * rings re-armed by gloo_bell_ring leave their completions behind, so every peer whose
       * ring count moved is consumed and re-armed here, whoever was named. */
      if (rearm_bell(p, c, epoch)) return HVDS_SUCCESS;
    }
  } catch (const std::exception& e) {
    return fail_from(p, from, e, p->timeout_ms);
  }
}

hvds_result_t gloo_bell_ring(hvds_p2p_t* p, uint64_t epoch) {
  GlooComm* c = comm_of(p);
  if (p->size == 1) return HVDS_SUCCESS;  // nobody to ring
  if (!c->bell_tx) return HVDS_NOT_SUPPORTED;
  int peer = -1;
  try {
    SigpipeGuard guard(c->guard_sigpipe);
    {
      std::lock_guard<std::mutex> lock(c->mu);
      if (c->failed) return c->fail_rc;
    }
    rearm_bell(p, c, epoch);  // this rank is awake: rings that came meanwhile are taken
    c->bell_out[0] = epoch;
    c->bell_out[1]++;
    for (int i = 0; i < p->size; i++)
      if (i != p->rank) c->bell_tx->send(i, kDoorbellSlot, 0, 16);
    // Every peer keeps a receive posted for us, so these complete within a round trip.
    Ms timeout = p->timeout_ms > 0 ? Ms(p->timeout_ms) : kForever;
    for (int i = 0; i < p->size - 1; i++) {
      if (!c->bell_tx->waitSend(&peer, timeout)) {
        std::lock_guard<std::mutex> lock(c->mu);
        return c->fail_rc;
      }
    }
  } catch (const std::exception& e) {
    return fail_from(p, peer, e, p->timeout_ms);
  }
  return HVDS_SUCCESS;
}

void gloo_bell_interrupt(hvds_p2p_t* p) {
  GlooComm* c = comm_of(p);
  if (c->bell_rx) c->bell_rx->abortWaitRecv();
  if (p->size == 1) {
    std::lock_guard<std::mutex> lock(c->mu);
    c->alone_interrupt = true;
    c->alone_cv.notify_all();
  }
}

const hvds_p2p_ops_t kGlooOps = {
    1, "gloo", gloo_isend, gloo_irecv, gloo_wait, gloo_abort, gloo_destroy,
    gloo_bell_wait, gloo_bell_ring, gloo_bell_interrupt,
};

/* Posts the doorbell receives once the mesh is up. */
void bell_setup(GlooComm* c, int rank, int size) {
  c->bell_in.assign((size_t)size * 2, 0);
  c->bell_seen.assign((size_t)size, 0);
  c->bell_rx = c->ctx->createUnboundBuffer(c->bell_in.data(), (size_t)size * 16);
  c->bell_tx = c->ctx->createUnboundBuffer(c->bell_out, sizeof c->bell_out);
  for (int i = 0; i < size; i++)
    if (i != rank) c->bell_rx->recv(i, kDoorbellSlot, (size_t)i * 16, 16);
}

// "ip:port" that rank peer published for its pair with rank, from the rendezvous values.
std::string peer_address(const KvStore& store, int rank, int size, int peer) {
  const std::vector<char>* all = store.seen(std::to_string(peer));
  if (all == nullptr || size < 2 || all->size() % (size - 1) != 0) return "?";
  size_t each = all->size() / (size - 1);
  size_t at = (size_t)(rank > peer ? rank - 1 : rank) * each;
  gloo::transport::tcp::Address addr(std::vector<char>(all->begin() + at, all->begin() + at + each));
  const struct sockaddr_storage& ss = addr.getSockaddr();
  char ip[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const struct sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const struct sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
    port = ntohs(in6->sin6_port);
    return "[" + std::string(ip) + "]:" + std::to_string(port);
  }
  return std::string(ip) + ":" + std::to_string(port);
}

/* One byte to and from every peer on the handshake slot. A peer sends only after its own mesh
 * is connected, so when this returns every rank has connected. */
void handshake(GlooComm* c, int rank, int size, Clock::time_point deadline) {
  std::vector<char> bytes(2 * (size_t)size);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends, recvs;
  for (int i = 0; i < size; i++) {
    if (i == rank) continue;
    recvs.push_back(c->ctx->createUnboundBuffer(&bytes[2 * i], 1));
    recvs.back()->recv(i, kHandshakeSlot, 0, 1);
    sends.push_back(c->ctx->createUnboundBuffer(&bytes[2 * i + 1], 1));
    sends.back()->send(i, kHandshakeSlot, 0, 1);
  }
  for (auto& b : recvs) b->waitRecv(nullptr, std::max(Ms(1), remaining(deadline)));
  for (auto& b : sends) b->waitSend(nullptr, std::max(Ms(1), remaining(deadline)));
}

void connect_mesh(GlooComm* c, const hvds_kv_t* kv, const char* prefix, int rank, int size,
                  const char* iface, const char* hostname, int timeout_ms) {
  Ms timeout = timeout_ms > 0 ? Ms(timeout_ms) : kForever;
  Clock::time_point deadline = Clock::now() + timeout;
  gloo::transport::tcp::attr attr;
  if (iface != nullptr && iface[0] != '\0') {
    attr.iface = iface;
  } else {
    attr.hostname = hostname != nullptr && hostname[0] != '\0' ? hostname : "127.0.0.1";
  }
  {
    // The device's epoll thread inherits this mask, so its writes never raise SIGPIPE.
    SigpipeGuard guard(c->guard_sigpipe);
    c->device = gloo::transport::tcp::CreateDevice(attr);
  }
  KvStore store(*kv, prefix, deadline);
  c->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  c->ctx->setTimeout(timeout_ms > 0 ? Ms(timeout_ms) : Ms(0));  // 0: Gloo's "no timeout"
  c->ctx->connectFullMesh(store, c->device);
  for (int i = 0; i < size; i++) {
    c->peer_addr.push_back(i == rank ? std::string() : peer_address(store, rank, size, i));
  }
  SigpipeGuard guard(c->guard_sigpipe);
  bell_setup(c, rank, size);
  handshake(c, rank, size, deadline);
}

hvds_result_t create_error(const std::exception& e, char* err, size_t errlen) {
  hvds_result_t rc = HVDS_SYSTEM_ERROR;
  if (const auto* kv = dynamic_cast<const KvError*>(&e)) {
    rc = kv->rc;
  } else if (strstr(e.what(), "imeout") != nullptr || strstr(e.what(), "Timed out") != nullptr) {
    rc = HVDS_TIMEOUT;
  }
  if (err != nullptr && errlen > 0) snprintf(err, errlen, "gloo connect: %s", e.what());
  return rc;
}

}  // namespace

extern "C" hvds_result_t hvds__gloo_p2p_create(const hvds_kv_t* kv, const char* prefix, int rank,
                                               int size, const char* iface, const char* hostname,
                                               int timeout_ms, hvds_p2p_t** out, char* err,
                                               size_t errlen) {
  if (err != nullptr && errlen > 0) err[0] = '\0';
  if (out == nullptr) return HVDS_INVALID_ARGUMENT;
  *out = nullptr;
  if (kv == nullptr || kv->set == nullptr || kv->get == nullptr || size < 1 || rank < 0 ||
      rank >= size) {
    if (err != nullptr && errlen > 0) snprintf(err, errlen, "gloo connect: invalid argument");
    return HVDS_INVALID_ARGUMENT;
  }
  auto* p = static_cast<hvds_p2p_t*>(calloc(1, sizeof(hvds_p2p_t)));
  GlooComm* c = nullptr;
  if (p == nullptr) return HVDS_SYSTEM_ERROR;
  hvds_result_t rc = HVDS_SUCCESS;
  try {
    c = new GlooComm();
    c->inflight.prev = c->inflight.next = &c->inflight;
    c->guard_sigpipe = !sigpipe_ignored();
    if (size > 1) connect_mesh(c, kv, prefix, rank, size, iface, hostname, timeout_ms);
  } catch (const std::exception& e) {
    rc = create_error(e, err, errlen);
  }
  if (rc != HVDS_SUCCESS) {
    if (c != nullptr) {
      try {
        c->ctx.reset();
        c->device.reset();
      } catch (...) {
      }
      delete c;
    }
    free(p);
    return rc;
  }
  p->rank = rank;
  p->size = size;
  p->timeout_ms = timeout_ms;
  p->ops = &kGlooOps;
  p->impl = c;
  p->failed_peer = -1;
  *out = p;
  return HVDS_SUCCESS;
}
