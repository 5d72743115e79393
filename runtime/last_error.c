/* The message of the calling thread's last failed API call (hvds_last_error) and the texts of
 * the result codes: what every file of the runtime records its errors with (state.h). */
#include <stdarg.h>
#include <stdio.h>

#include "result_text.h"
#include "state.h"

static _Thread_local char last_error[2048];

hvds_result_t hvds__set_error(hvds_result_t rc, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof(last_error), fmt, ap);
  va_end(ap);
  return rc;
}

const char* hvds_last_error(void) { return last_error; }

const char* hvds_result_str(hvds_result_t r) { return hvds__result_text(r); }
