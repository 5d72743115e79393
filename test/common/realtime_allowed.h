// Whether this process may give a thread real-time scheduling, asked of a scratch thread so the
// caller's own policy stays as it is.
#ifndef HVDS_TEST_COMMON_REALTIME_ALLOWED_H_
#define HVDS_TEST_COMMON_REALTIME_ALLOWED_H_

#include <sched.h>

#include <thread>

inline bool RealtimeAllowed() {
  bool ok = false;
  std::thread t([&] {
    struct sched_param sp = {1};
    ok = sched_setscheduler(0, SCHED_RR, &sp) == 0;
  });
  t.join();
  return ok;
}

#endif  // HVDS_TEST_COMMON_REALTIME_ALLOWED_H_
