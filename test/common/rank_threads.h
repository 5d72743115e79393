// Ranks as threads for transport tests: an in-memory rendezvous store, a reusable barrier
// (barrier.h), and a spawner that gives every rank thread a connected communicator from a
// transport's create().
#ifndef HVDS_TEST_RANK_THREADS_H_
#define HVDS_TEST_RANK_THREADS_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "barrier.h"
#include "gloo/gloo_p2p.h"

namespace hvds_test {

// The rendezvous store: a map behind a mutex; get() waits on a condition variable.
class MemKv {
 public:
  hvds_kv_t kv() { return hvds_kv_t{this, &MemKv::Set, &MemKv::Get}; }

 private:
  static hvds_result_t Set(void* ctx, const char* key, const void* val, size_t len) {
    auto* self = static_cast<MemKv*>(ctx);
    std::lock_guard<std::mutex> lock(self->mu_);
    self->map_[key] = std::string(static_cast<const char*>(val), len);
    self->cv_.notify_all();
    return HVDS_SUCCESS;
  }
  static hvds_result_t Get(void* ctx, const char* key, int timeout_ms, void** val, size_t* len) {
    auto* self = static_cast<MemKv*>(ctx);
    std::unique_lock<std::mutex> lock(self->mu_);
    bool found = self->cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                    [&] { return self->map_.count(key) > 0; });
    if (!found) return HVDS_TIMEOUT;
    const std::string& v = self->map_[key];
    *val = malloc(v.size() + 1);
    memcpy(*val, v.data(), v.size());
    *len = v.size();
    return HVDS_SUCCESS;
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
};

using CreateFn = hvds_result_t (*)(const hvds_kv_t*, const char*, int, int, const char*,
                                   const char*, int, hvds_p2p_t**, char*, size_t);
using RankFn = std::function<void(int rank, hvds_p2p_t* p, Barrier& barrier)>;

// Runs fn on size rank threads, each with a communicator from create (destroyed afterwards
// unless destroy is false).
inline void SpawnRanks(int size, CreateFn create, const RankFn& fn, int timeout_ms = 30000,
                       bool destroy = true) {
  static std::atomic<int> job{0};
  std::string prefix = "job" + std::to_string(job++);
  MemKv store;
  hvds_kv_t kv = store.kv();
  Barrier barrier(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; r++) {
    threads.emplace_back([&, r] {
      hvds_p2p_t* p = nullptr;
      char err[512] = "";
      ASSERT_EQ(create(&kv, prefix.c_str(), r, size, nullptr, nullptr, timeout_ms, &p, err,
                       sizeof(err)),
                HVDS_SUCCESS)
          << err;
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(p->rank, r);
      EXPECT_EQ(p->size, size);
      EXPECT_EQ(p->failed_peer, -1);
      fn(r, p, barrier);
      if (destroy) p->ops->destroy(p);  // frees p
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace hvds_test

#endif  // HVDS_TEST_RANK_THREADS_H_
