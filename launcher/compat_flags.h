/* horovodrun flags with no counterpart here: they would change nothing, and are accepted, each
 * with a warning that says why. */
#ifndef HVDS_LAUNCHER_COMPAT_FLAGS_H_
#define HVDS_LAUNCHER_COMPAT_FLAGS_H_

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* flag;
  int nvalues;     /* words that follow the flag */
  const char* why; /* the warning: why it has no effect here  */
} hvds_compat_flag_t;

/* Accepted without effect: --mpi, --gloo, --jsrun, --tcp, --num-nccl-streams, ... */
extern const hvds_compat_flag_t hvds__no_effect_flags[];
extern const int hvds__no_effect_flag_count;

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_COMPAT_FLAGS_H_ */
