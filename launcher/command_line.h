/* The launcher's command line as it takes effect: the flags of `hvdsparse run` (run_args.h),
 * then horovodrun's --config-file (config_file.h) for what the flags left unset, then the
 * check that the job they describe is complete. */
#ifndef HVDS_LAUNCHER_COMMAND_LINE_H_
#define HVDS_LAUNCHER_COMMAND_LINE_H_

#include <stddef.h>

#include "hvdsparse.h"
#include "run_args.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses the words after "run" (argv[0] is the first flag) into out; on error nothing is kept
 * and err says why. The caller releases out with hvds__run_args_free(). */
hvds_result_t hvds__command_line_parse(int argc, char** argv, hvds_run_args_t* out /* OUT */,
                                       char* err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_LAUNCHER_COMMAND_LINE_H_ */
