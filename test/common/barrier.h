// A reusable barrier among the rank threads of a test, which also agrees on a yes/no (every
// rank's answer ANDed) and can be broken, so that a test whose rank failed or hung ends instead
// of leaving its peers waiting.
#ifndef HVDS_TEST_BARRIER_H_
#define HVDS_TEST_BARRIER_H_

#include <condition_variable>
#include <mutex>

namespace hvds_test {

class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}

  // Waits for every rank. Returns false, at once or later, once the barrier is broken.
  bool Wait() { return AllTrue(true); }

  // Waits for every rank and returns whether every rank passed true (false once broken).
  bool AllTrue(bool mine) {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_) return false;
    int gen = gen_;
    all_ = all_ && mine;
    if (++count_ == n_) {
      result_ = all_;  // read by the waiters before any of them can arrive again
      all_ = true;
      count_ = 0;
      gen_++;
      cv_.notify_all();
      return result_;
    }
    cv_.wait(lock, [&] { return gen != gen_ || broken_; });
    return gen != gen_ && result_;
  }

  // Releases every waiter, now and later, with false.
  void Break() {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    cv_.notify_all();
  }

  bool Broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
  bool all_ = true, result_ = true, broken_ = false;
};

}  // namespace hvds_test

#endif  // HVDS_TEST_BARRIER_H_
