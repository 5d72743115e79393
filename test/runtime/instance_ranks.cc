// Ranks as threads for the runtime's own tests (instance_ranks.h).
#include "instance_ranks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "clock.h"
#include "cycle.h"
#include "enqueue.h"
#include "handle.h"
#include "hierarchy.h"
#include "instance.h"
#include "process_set.h"
#include "tags.h"

namespace hvds_test {

// A collective that waits this long fails: a safety net under the harness's deadline.
static constexpr int kCommTimeoutMs = 15000;

InstanceRanks::InstanceRanks(int n, const std::vector<std::vector<int32_t>>& sets)
    : n_(n), world_(inproc_world(n)), barrier_(n) {
  for (int r = 0; r < n; r++) {
    comms_.push_back(inproc_comm(world_, r, kCommTimeoutMs));
    rts_.emplace_back(new hvds_runtime_t());
    hvds_runtime_t* rt = rts_.back().get();
    EXPECT_EQ(hvds__instance_open(rt, comms_.back()), HVDS_SUCCESS) << "rank " << r;
    for (const auto& ranks : sets) {  // no communication: a set is a view of the world
      hvds_pset_t* s = hvds__pset_create(rt, rt->next_ps_id, ranks.data(), (int32_t)ranks.size());
      EXPECT_NE(s, nullptr) << "rank " << r << ": process set " << rt->next_ps_id;
      rt->psets[rt->next_ps_id++] = s;
    }
  }
}

InstanceRanks::~InstanceRanks() {
  for (auto& rt : rts_) {
    hvds__instance_close(rt.get());
    hvds__p2p_destroy(rt->local);
    hvds__p2p_destroy(rt->cross);
  }
  for (hvds_p2p_t* p : comms_) hvds__p2p_destroy(p);
}

void InstanceRanks::PlaceOnHosts(int hosts, bool hierarchical) {
  int per_host = n_ / hosts;
  for (int r = 0; r < n_; r++) {
    hvds_runtime_t* rt = rts_[r].get();
    std::vector<int> local, cross;
    for (int l = 0; l < per_host; l++) local.push_back(r / per_host * per_host + l);
    for (int h = 0; h < hosts; h++) cross.push_back(h * per_host + r % per_host);
    EXPECT_EQ(hvds__p2p_sub_create(comms_[r], local.data(), per_host, HVDS_SPACE_LOCAL, &rt->local),
              HVDS_SUCCESS);
    EXPECT_EQ(hvds__p2p_sub_create(comms_[r], cross.data(), hosts, HVDS_SPACE_CROSS, &rt->cross),
              HVDS_SUCCESS);
    rt->local_rank = r % per_host;
    rt->local_size = per_host;
    rt->cross_rank = r / per_host;
    rt->cross_size = hosts;
    rt->hier_mode = hierarchical ? HVDS_HIER_ALWAYS : HVDS_HIER_FLAT;
  }
}

void InstanceRanks::ReleaseAll() {
  for (int r = 0; r < n_; r++) inproc_kill(world_.get(), r);
  barrier_.Break();
}

void InstanceRanks::Run(const RankFn& fn, double deadline_s) {
  std::mutex mu;
  std::condition_variable cv;
  int running = n_;
  std::vector<std::thread> threads;
  for (int r = 0; r < n_; r++)
    threads.emplace_back([&, r] {
      fn(r, rts_[r].get());
      if (::testing::Test::HasFailure()) ReleaseAll();  // its peers need not wait for it
      std::lock_guard<std::mutex> lock(mu);
      if (--running == 0) cv.notify_all();
    });
  std::unique_lock<std::mutex> lock(mu);
  auto all_ended = [&] { return running == 0; };
  if (!cv.wait_for(lock, std::chrono::duration<double>(deadline_s), all_ended)) {
    ADD_FAILURE() << running << " of " << n_ << " ranks still running after " << deadline_s
                  << " s: a hang";
    ReleaseAll();
    if (!cv.wait_for(lock, std::chrono::seconds(20), all_ended)) {
      fprintf(stderr, "ranks still blocked after their world was killed; aborting\n");
      std::abort();  // the threads use this frame: it cannot return under them
    }
  }
  lock.unlock();
  for (auto& t : threads) t.join();
}

void InstanceRanks::Cycle(hvds_runtime_t* rt) {
  EXPECT_EQ(hvds__cycle_run(rt), 0) << "rank " << rt->rank << ": " << rt->fatal;
}

bool InstanceRanks::CycleUntil(hvds_runtime_t* rt, const std::function<bool()>& done,
                               double limit_s) {
  double start = hvds__now();
  for (;;) {
    Cycle(rt);
    bool over = hvds__now() - start > limit_s || ::testing::Test::HasFailure();
    if (barrier_.AllTrue(done() || over) || barrier_.Broken()) break;
  }
  bool all = barrier_.AllTrue(done());
  EXPECT_TRUE(all) << "rank " << rt->rank << ": not every rank was done within " << limit_s << " s";
  return all;
}

hvds_tensor_t Tensor(std::vector<float>& v, const std::vector<int64_t>& shape) {
  hvds_tensor_t t = {};
  t.data = v.data();
  t.dtype = HVDS_FLOAT32;
  t.device = -1;
  t.ndim = shape.empty() ? 1 : (int32_t)shape.size();
  t.shape[0] = (int64_t)v.size();
  for (size_t d = 0; d < shape.size(); d++) t.shape[d] = shape[d];
  return t;
}

hvds_handle_t Submit(hvds_runtime_t* rt, int32_t type, const char* name, hvds_tensor_t t,
                     hvds_op_options_t o) {
  o.name = name;
  hvds_handle_t h = 0;
  EXPECT_EQ(hvds__enqueue(rt, type, hvds__msg_type_name(type), 1, &t, nullptr, &o, &h),
            HVDS_SUCCESS)
      << name << ": " << hvds_last_error();
  return h;
}

Outcome Peek(hvds_runtime_t* rt, hvds_handle_t h) {
  Outcome out = {HVDS_INVALID_ARGUMENT, "unknown handle", -1};
  pthread_mutex_lock(&rt->hmu);
  hvds_handle_rec_t* rec = hvds__handle_find_locked(rt, h);
  if (rec != nullptr && !rec->done) out = {HVDS_IN_PROGRESS, "", -1};
  if (rec != nullptr && rec->done)
    out = {rec->status, rec->message ? rec->message : "", rec->join_rank};
  pthread_mutex_unlock(&rt->hmu);
  return out;
}

bool Done(hvds_runtime_t* rt, hvds_handle_t h) { return Peek(rt, h).status != HVDS_IN_PROGRESS; }

hvds_handle_t Join(hvds_runtime_t* rt) {
  hvds_handle_t h = 0;
  EXPECT_EQ(hvds__enqueue_control(rt, HVDS_MSG_JOIN, "Join", "join.noname", 0, 0, &h), HVDS_SUCCESS)
      << hvds_last_error();
  return h;
}

void AllreduceInOneCycle(InstanceRanks& ranks, hvds_runtime_t* rt, const char* name,
                         std::vector<float>& v) {
  hvds_handle_t h = Submit(rt, HVDS_MSG_ALLREDUCE, name, Tensor(v));
  ranks.Sync();  // queued on every rank before anyone's cycle
  ranks.Cycle(rt);
  Outcome out = Peek(rt, h);
  EXPECT_EQ(out.status, HVDS_SUCCESS) << name << ": " << out.message;
  hvds__release(rt, h);
}

std::string Paths(const hvds_pset_t* s) {
  return "slow " + std::to_string(s->slow_rounds) + ", cached " + std::to_string(s->cache_hits);
}

const hvds_cache_entry_t* Cached(const hvds_pset_t* s, const char* name) {
  intptr_t slot = (intptr_t)hvds__name_map_get(&s->cache.index, name);  // slot + 1, 0 absent
  return slot ? hvds__cache_get(&s->cache, (int32_t)(slot - 1)) : nullptr;
}

}  // namespace hvds_test
