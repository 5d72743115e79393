/* The one monotonic clock every layer reads, in the unit each caller needs, and the
 * wall-clock deadlines pthread_cond_timedwait takes. */
#ifndef HVDS_CLOCK_H_
#define HVDS_CLOCK_H_

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

double hvds__now(void);       /* monotonic seconds */
int64_t hvds__now_ms(void);   /* monotonic milliseconds */
int64_t hvds__now_us(void);   /* monotonic microseconds */
int64_t hvds__now_ns(void);   /* monotonic nanoseconds */
/* The CLOCK_REALTIME time seconds from now (condition variables wait on that clock). */
struct timespec hvds__deadline_in(double seconds);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_CLOCK_H_ */
