// In-process transport (see inproc_p2p.h).
#include "inproc_p2p.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Msg {
  int src;
  uint64_t tag;
  std::vector<char> data;
};

}  // namespace

// One per request; send requests are complete when created.
struct hvds_p2p_req {
  bool is_recv = false;
  int peer = -1;
  uint64_t tag = 0;
  void* buf = nullptr;
  size_t bytes = 0;
  bool done = false;                // recv: a message was handed over (guarded by the mailbox)
  std::unique_ptr<Msg> msg;         // recv: the matched message
  hvds_result_t rc = HVDS_SUCCESS;  // send: failure to report at wait
};

namespace {

// Messages and posted receives addressed to one rank.
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::list<std::unique_ptr<Msg>> unexpected;  // arrived before a matching receive
  std::list<hvds_p2p_req*> posted;             // receives waiting for a message, in order
};

// Per-communicator state; failure is sticky.
struct Comm {
  std::shared_ptr<InprocWorld> world;
  hvds_result_t failed = HVDS_SUCCESS;
  std::string failed_msg;
  int failed_peer = -1;
};

}  // namespace

struct InprocWorld {
  explicit InprocWorld(int n) : size(n), boxes(n), dead(new std::atomic<bool>[n]) {
    for (int i = 0; i < n; i++) {
      boxes[i] = std::make_unique<Mailbox>();
      dead[i] = false;
    }
  }
  int size;
  std::vector<std::unique_ptr<Mailbox>> boxes;
  std::unique_ptr<std::atomic<bool>[]> dead;
  std::atomic<size_t> bytes_sent{0};
};

namespace {

Comm* comm_of(hvds_p2p_t* p) { return static_cast<Comm*>(p->impl); }

// Records a failure in p (and, if sticky, in the communicator) and returns rc.
hvds_result_t fail(hvds_p2p_t* p, hvds_result_t rc, int peer, const std::string& msg, bool sticky) {
  snprintf(p->error, sizeof p->error, "%s", msg.c_str());
  p->failed_peer = peer;
  Comm* c = comm_of(p);
  if (sticky && c->failed == HVDS_SUCCESS) {
    c->failed = rc;
    c->failed_msg = msg;
    c->failed_peer = peer;
  }
  return rc;
}

hvds_result_t check_usable(hvds_p2p_t* p) {
  Comm* c = comm_of(p);
  if (c->failed != HVDS_SUCCESS) return fail(p, c->failed, c->failed_peer, c->failed_msg, false);
  if (c->world->dead[p->rank])
    return fail(p, HVDS_SYSTEM_ERROR, -1,
                "inproc: rank " + std::to_string(p->rank) + " was aborted", true);
  return HVDS_SUCCESS;
}

std::string died(int peer) {
  return "inproc: peer rank " + std::to_string(peer) + " died (connection closed)";
}

hvds_result_t ip_isend(hvds_p2p_t* p, int peer, const void* buf, size_t bytes, uint64_t tag,
                       hvds_p2p_req_t** req) {
  hvds_result_t rc = check_usable(p);
  if (rc != HVDS_SUCCESS) return rc;
  InprocWorld* w = comm_of(p)->world.get();
  auto* r = new hvds_p2p_req;
  r->peer = peer;
  *req = r;
  if (w->dead[peer]) {
    r->rc = HVDS_REMOTE_ERROR;  // reported by wait, like a closed connection
    return HVDS_SUCCESS;
  }
  w->bytes_sent += bytes;
  auto m = std::make_unique<Msg>();
  m->src = p->rank;
  m->tag = tag;
  if (bytes > 0)
    m->data.assign(static_cast<const char*>(buf), static_cast<const char*>(buf) + bytes);
  Mailbox& box = *w->boxes[peer];
  std::lock_guard<std::mutex> lock(box.mu);
  for (auto it = box.posted.begin(); it != box.posted.end(); ++it) {
    if ((*it)->peer == p->rank && (*it)->tag == tag) {
      (*it)->msg = std::move(m);
      (*it)->done = true;
      box.posted.erase(it);
      box.cv.notify_all();
      return HVDS_SUCCESS;
    }
  }
  box.unexpected.push_back(std::move(m));
  return HVDS_SUCCESS;
}

hvds_result_t ip_irecv(hvds_p2p_t* p, int peer, void* buf, size_t bytes, uint64_t tag,
                       hvds_p2p_req_t** req) {
  hvds_result_t rc = check_usable(p);
  if (rc != HVDS_SUCCESS) return rc;
  auto* r = new hvds_p2p_req;
  r->is_recv = true;
  r->peer = peer;
  r->tag = tag;
  r->buf = buf;
  r->bytes = bytes;
  *req = r;
  Mailbox& box = *comm_of(p)->world->boxes[p->rank];
  std::lock_guard<std::mutex> lock(box.mu);
  for (auto it = box.unexpected.begin(); it != box.unexpected.end(); ++it) {
    if ((*it)->src == peer && (*it)->tag == tag) {
      r->msg = std::move(*it);
      r->done = true;
      box.unexpected.erase(it);
      return HVDS_SUCCESS;
    }
  }
  box.posted.push_back(r);
  return HVDS_SUCCESS;
}

// Copies a matched message out, checking its size.
hvds_result_t deliver(hvds_p2p_t* p, hvds_p2p_req* r) {
  if (r->msg->data.size() != r->bytes) {
    char buf[200];
    snprintf(buf, sizeof buf, "inproc: message from rank %d tag %llu has %zu bytes, expected %zu",
             r->peer, static_cast<unsigned long long>(r->tag), r->msg->data.size(), r->bytes);
    return fail(p, HVDS_INTERNAL_ERROR, r->peer, buf, true);
  }
  if (r->bytes > 0) memcpy(r->buf, r->msg->data.data(), r->bytes);
  return HVDS_SUCCESS;
}

// Waits for a receive; returns with it done, or removed from the posted list on failure.
hvds_result_t wait_recv(hvds_p2p_t* p, hvds_p2p_req* r, int timeout_ms) {
  Comm* c = comm_of(p);
  InprocWorld* w = c->world.get();
  Mailbox& box = *w->boxes[p->rank];
  std::unique_lock<std::mutex> lock(box.mu);
  auto ready = [&] { return r->done || w->dead[r->peer] || w->dead[p->rank]; };
  if (c->failed == HVDS_SUCCESS) {
    if (timeout_ms < 0) {
      box.cv.wait(lock, ready);
    } else {
      box.cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready);
    }
  }
  if (r->done) {
    lock.unlock();
    return deliver(p, r);
  }
  box.posted.remove(r);
  lock.unlock();
  if (c->failed != HVDS_SUCCESS) return fail(p, c->failed, c->failed_peer, c->failed_msg, false);
  if (w->dead[p->rank])
    return fail(p, HVDS_SYSTEM_ERROR, -1,
                "inproc: rank " + std::to_string(p->rank) + " was aborted", true);
  if (w->dead[r->peer]) return fail(p, HVDS_REMOTE_ERROR, r->peer, died(r->peer), true);
  return fail(p, HVDS_TIMEOUT, r->peer,
              "inproc: timed out after " + std::to_string(timeout_ms) + " ms waiting for rank " +
                  std::to_string(r->peer),
              true);
}

hvds_result_t ip_wait(hvds_p2p_t* p, hvds_p2p_req_t* req, int timeout_ms) {
  std::unique_ptr<hvds_p2p_req> r(req);
  if (timeout_ms < 0) timeout_ms = p->timeout_ms;
  if (r->is_recv) return wait_recv(p, r.get(), timeout_ms);
  if (r->rc != HVDS_SUCCESS) return fail(p, r->rc, r->peer, died(r->peer), true);
  return HVDS_SUCCESS;
}

void ip_abort(hvds_p2p_t* p) { inproc_kill(comm_of(p)->world.get(), p->rank); }

void ip_destroy(hvds_p2p_t* p) {
  delete comm_of(p);
  delete p;
}

const hvds_p2p_ops_t inproc_ops = {1,       "inproc",   ip_isend, ip_irecv, ip_wait,
                                   ip_abort, ip_destroy, NULL,     NULL,     NULL};

}  // namespace

std::shared_ptr<InprocWorld> inproc_world(int size) { return std::make_shared<InprocWorld>(size); }

hvds_p2p_t* inproc_comm(const std::shared_ptr<InprocWorld>& world, int rank, int timeout_ms) {
  auto* p = new hvds_p2p_t{};
  p->rank = rank;
  p->size = world->size;
  p->timeout_ms = timeout_ms;
  p->ops = &inproc_ops;
  p->failed_peer = -1;
  auto* c = new Comm;
  c->world = world;
  p->impl = c;
  return p;
}

size_t inproc_bytes_sent(InprocWorld* world) { return world->bytes_sent; }

void inproc_kill(InprocWorld* world, int rank) {
  world->dead[rank] = true;
  for (auto& box : world->boxes) {
    std::lock_guard<std::mutex> lock(box->mu);  // no waiter can miss the flag
    box->cv.notify_all();
  }
}

size_t inproc_pending_messages(InprocWorld* world) {
  size_t n = 0;
  for (auto& box : world->boxes) {
    std::lock_guard<std::mutex> lock(box->mu);
    n += box->unexpected.size();
  }
  return n;
}

void inproc_spawn(const std::shared_ptr<InprocWorld>& world,
                  const std::function<void(hvds_p2p_t*)>& fn, int timeout_ms) {
  std::vector<hvds_p2p_t*> comms;
  for (int r = 0; r < world->size; r++) comms.push_back(inproc_comm(world, r, timeout_ms));
  std::vector<std::thread> threads;
  for (int r = 0; r < world->size; r++) threads.emplace_back([&, r] { fn(comms[r]); });
  for (auto& t : threads) t.join();
  for (auto* p : comms) hvds__p2p_destroy(p);
}

void inproc_spawn(int size, const std::function<void(hvds_p2p_t*)>& fn, int timeout_ms) {
  inproc_spawn(inproc_world(size), fn, timeout_ms);
}
