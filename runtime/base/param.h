/* Runtime knobs: every one declared once in params.def; getenv is called nowhere else. */
#ifndef HVDS_PARAM_H_
#define HVDS_PARAM_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
#define X(id, suffix, type, def, doc) HVDS_PARAM_##id,
#include "params.def"
#undef X
  HVDS_PARAM_COUNT
} hvds_param_id_t;

/* Values are read from the environment on first use and cached; hvds__param_reload() re-reads
 * them (hvds_init does, so a re-init sees a changed environment). Thread-safe for readers. */
long long hvds__param_int(hvds_param_id_t id);
double hvds__param_dbl(hvds_param_id_t id);
const char* hvds__param_str(hvds_param_id_t id); /* NULL when unset and no default */
/* 1 when the environment set the knob explicitly. */
int hvds__param_is_set(hvds_param_id_t id);
/* Overrides a value at run time (autotune, start_timeline); copies s. */
void hvds__param_set_str(hvds_param_id_t id, const char* s);
void hvds__param_reload(void);
/* The environment variable's suffix, e.g. "FUSION_THRESHOLD". */
const char* hvds__param_name(hvds_param_id_t id);

/* Calls report(name, value, why) for each Horovod knob of ignored_knobs.def that the
 * environment sets (name is the full HOROVOD_ variable), reading the environment now; returns
 * how many. The strings live until the next call; report may be NULL (count only). */
typedef void (*hvds_param_ignored_fn)(const char* name, const char* value, const char* why);
int hvds__param_report_ignored(hvds_param_ignored_fn report);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_PARAM_H_ */
