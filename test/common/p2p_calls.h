// Point-to-point shorthands shared by the transport tests: a byte pattern every (sender,
// receiver, salt) makes differently, and isend/irecv/wait that record failures with gtest.
#ifndef HVDS_TEST_P2P_CALLS_H_
#define HVDS_TEST_P2P_CALLS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "p2p.h"

namespace hvds_test {

using Clock = std::chrono::steady_clock;

inline double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

inline void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

inline uint8_t Byte(int from, int to, size_t i, uint64_t salt) {
  return static_cast<uint8_t>(from * 131 + to * 31 + i * 7 + salt * 13 + (i >> 9));
}

inline std::vector<uint8_t> Pattern(size_t n, int from, int to, uint64_t salt) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = Byte(from, to, i, salt);
  return v;
}

inline bool Matches(const std::vector<uint8_t>& v, int from, int to, uint64_t salt) {
  for (size_t i = 0; i < v.size(); i++)
    if (v[i] != Byte(from, to, i, salt)) return false;
  return true;
}

inline hvds_p2p_req_t* Isend(hvds_p2p_t* p, int peer, const void* buf, size_t n, uint64_t tag) {
  hvds_p2p_req_t* r = nullptr;
  EXPECT_EQ(p->ops->isend(p, peer, buf, n, tag, &r), HVDS_SUCCESS) << p->error;
  return r;
}

inline hvds_p2p_req_t* Irecv(hvds_p2p_t* p, int peer, void* buf, size_t n, uint64_t tag) {
  hvds_p2p_req_t* r = nullptr;
  EXPECT_EQ(p->ops->irecv(p, peer, buf, n, tag, &r), HVDS_SUCCESS) << p->error;
  return r;
}

inline hvds_result_t Wait(hvds_p2p_t* p, hvds_p2p_req_t* r, int ms = -1) {
  return r == nullptr ? HVDS_INTERNAL_ERROR : p->ops->wait(p, r, ms);
}

}  // namespace hvds_test

#endif  // HVDS_TEST_P2P_CALLS_H_
