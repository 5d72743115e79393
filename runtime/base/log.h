/* Logging: levels, with rank, thread and file:line on every line.
 * Level from HVDSPARSE_LOG_LEVEL / HOROVOD_LOG_LEVEL: TRACE, DEBUG, INFO, WARNING (default),
 * ERROR, FATAL. Lines go to stderr: "[time: W rank 3 tid file.c:42] message". */
#ifndef HVDS_LOG_H_
#define HVDS_LOG_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HVDS_LOG_TRACE = 0,
  HVDS_LOG_DEBUG = 1,
  HVDS_LOG_INFO = 2,
  HVDS_LOG_WARNING = 3,
  HVDS_LOG_ERROR = 4,
  HVDS_LOG_FATAL = 5
} hvds_log_level_t;

/* Current threshold; read once from the environment on first use. */
hvds_log_level_t hvds__log_level(void);
/* Parses "TRACE".."FATAL" (any case); returns -1 if unknown. */
int hvds__log_parse_level(const char* s);
/* Rank shown in the prefix; -1 until the runtime knows it. */
void hvds__log_set_rank(int rank);
void hvds__log_write(hvds_log_level_t level, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define HVDS_LOG_AT(level, ...)                                      \
  do {                                                               \
    if ((level) >= hvds__log_level())                                \
      hvds__log_write((level), __FILE__, __LINE__, __VA_ARGS__);     \
  } while (0)

#define HVDS_TRACE(...) HVDS_LOG_AT(HVDS_LOG_TRACE, __VA_ARGS__)
#define HVDS_DEBUG(...) HVDS_LOG_AT(HVDS_LOG_DEBUG, __VA_ARGS__)
#define HVDS_INFO(...) HVDS_LOG_AT(HVDS_LOG_INFO, __VA_ARGS__)
#define HVDS_WARN(...) HVDS_LOG_AT(HVDS_LOG_WARNING, __VA_ARGS__)
#define HVDS_ERROR(...) HVDS_LOG_AT(HVDS_LOG_ERROR, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LOG_H_ */
