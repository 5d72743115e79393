/* The launcher's command line as it takes effect (command_line.h). */
#include "command_line.h"

#include "config_file.h"

hvds_result_t hvds__command_line_parse(int argc, char** argv, hvds_run_args_t* out, char* err,
                                       size_t errlen) {
  hvds_result_t rc = hvds__run_args_parse_flags(argc, argv, out, err, errlen);
  if (rc != HVDS_SUCCESS) return rc;  // nothing kept
  if (out->config_file != NULL) rc = hvds__config_file_apply(out->config_file, out, err, errlen);
  if (rc == HVDS_SUCCESS) rc = hvds__run_args_check_complete(out, err, errlen);
  if (rc != HVDS_SUCCESS) hvds__run_args_free(out);
  return rc;
}
