/* The results' texts (hvds_result_str's), for every layer: the device library, built apart from
 * libhvdsparse, must not need libhvdsparse's exports to load. */
#ifndef HVDS_RESULT_TEXT_H_
#define HVDS_RESULT_TEXT_H_

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "success", ...; "unknown result" outside hvds_result_t. */
const char* hvds__result_text(hvds_result_t r);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_RESULT_TEXT_H_ */
