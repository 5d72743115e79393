/* The results' texts, from the one list in hvdsparse.h (result_text.h). */
#include "result_text.h"

const char* hvds__result_text(hvds_result_t r) {
  switch (r) {
#define HVDS_RESULT_CASE(name, value, text) \
  case name:                                \
    return text;
    HVDS_RESULT_LIST(HVDS_RESULT_CASE)
#undef HVDS_RESULT_CASE
  }
  return "unknown result";
}
