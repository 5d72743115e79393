/* The element types' sizes and Horovod's names for them: the one table every layer reads. */
#ifndef HVDS_DTYPE_H_
#define HVDS_DTYPE_H_

#include <stddef.h>

#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes per element; 0 for a value outside hvds_dtype_t. */
size_t hvds__dtype_bytes(hvds_dtype_t dtype);
/* Horovod's name ("FLOAT32", ...); "UNKNOWN" outside hvds_dtype_t. */
const char* hvds__dtype_name(hvds_dtype_t dtype);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_DTYPE_H_ */
