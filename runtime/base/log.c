/* Logging to stderr with level, time, rank, thread and file:line. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "param.h"

static _Atomic int log_level = -1; /* -1: not read yet */
static _Atomic int log_rank = -1;

int hvds__log_parse_level(const char* s) {
  static const char* const names[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL"};
  if (s == NULL) return -1;
  for (int i = 0; i < 6; i++)
    if (strcasecmp(s, names[i]) == 0) return i;
  if (strcasecmp(s, "WARN") == 0) return HVDS_LOG_WARNING;
  return -1;
}

hvds_log_level_t hvds__log_level(void) {
  int level = atomic_load_explicit(&log_level, memory_order_relaxed);
  if (level < 0) {
    level = hvds__log_parse_level(hvds__param_str(HVDS_PARAM_LOG_LEVEL));
    if (level < 0) level = HVDS_LOG_WARNING;
    atomic_store(&log_level, level);
  }
  return (hvds_log_level_t)level;
}

void hvds__log_set_rank(int rank) { atomic_store(&log_rank, rank); }

void hvds__log_write(hvds_log_level_t level, const char* file, int line, const char* fmt, ...) {
  static const char letters[] = "TDIWEF";
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);

  char stamp[64] = "";
  if (!hvds__param_int(HVDS_PARAM_LOG_HIDE_TIME)) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(stamp + n, sizeof(stamp) - n, ".%06ld: ", (long)tv.tv_usec);
  }
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  /* One fprintf per line keeps lines from different threads whole. */
  fprintf(stderr, "[%s%c rank %d tid %ld %s:%d] %s\n", stamp, letters[level],
          atomic_load(&log_rank), (long)syscall(SYS_gettid), base, line, msg);
}
