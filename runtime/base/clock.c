/* The monotonic clock (clock.h). */
#include "clock.h"

int64_t hvds__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t hvds__now_us(void) { return hvds__now_ns() / 1000; }
int64_t hvds__now_ms(void) { return hvds__now_ns() / 1000000; }
double hvds__now(void) { return (double)hvds__now_ns() * 1e-9; }

struct timespec hvds__deadline_in(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (seconds < 0) seconds = 0;
  int64_t ns = ts.tv_nsec + (int64_t)(seconds * 1e9);
  ts.tv_sec += (time_t)(ns / 1000000000LL);
  ts.tv_nsec = (long)(ns % 1000000000LL);
  return ts;
}
