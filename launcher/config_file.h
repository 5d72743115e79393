/* horovodrun's --config-file: a YAML file of runtime settings, each standing for one flag
 * (params.fusion_threshold_mb is --fusion-threshold-mb, autotune.enabled is --autotune, ...).
 * A flag given on the command line wins over the file, as with horovodrun. */
#ifndef HVDS_LAUNCHER_CONFIG_FILE_H_
#define HVDS_LAUNCHER_CONFIG_FILE_H_

#include <stddef.h>

#include "hvdsparse.h"
#include "run_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads path and applies its settings to a (after its command line was parsed). Settings that
 * mean nothing here and keys horovodrun does not know become warnings in a->warnings. On error
 * err names the file, the line and the key. */
hvds_result_t hvds__config_file_apply(const char* path, hvds_run_args_t* a, char* err,
                                      size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_CONFIG_FILE_H_ */
