/* horovodrun flags with no counterpart here. Those that would change nothing are accepted, each
 * with a warning that says why; the elastic ones are refused, since ignoring them would run a
 * different job than the one asked for. */
#ifndef HVDS_LAUNCHER_COMPAT_FLAGS_H_
#define HVDS_LAUNCHER_COMPAT_FLAGS_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* flag;
  int nvalues;     /* words that follow the flag */
  const char* why; /* the warning: why it has no effect here (NULL for a refused flag) */
} hvds_compat_flag_t;

/* Accepted without effect: --mpi, --gloo, --jsrun, --tcp, --num-nccl-streams, ... */
extern const hvds_compat_flag_t hvds__no_effect_flags[];
extern const int hvds__no_effect_flag_count;
/* Refused with "not supported yet": --min-np, --max-np, --host-discovery-script, ... */
extern const hvds_compat_flag_t hvds__elastic_flags[];
extern const int hvds__elastic_flag_count;

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_COMPAT_FLAGS_H_ */
