/* The element type table (dtype.h). */
#include "dtype.h"

static const struct {
  size_t bytes;
  const char* name;
} types[HVDS_DTYPE_COUNT] = {
    [HVDS_UINT8] = {1, "UINT8"},     [HVDS_INT8] = {1, "INT8"},
    [HVDS_UINT16] = {2, "UINT16"},   [HVDS_INT16] = {2, "INT16"},
    [HVDS_INT32] = {4, "INT32"},     [HVDS_INT64] = {8, "INT64"},
    [HVDS_FLOAT16] = {2, "FLOAT16"}, [HVDS_FLOAT32] = {4, "FLOAT32"},
    [HVDS_FLOAT64] = {8, "FLOAT64"}, [HVDS_BOOL] = {1, "BOOL"},
    [HVDS_BFLOAT16] = {2, "BFLOAT16"},
};

size_t hvds__dtype_bytes(hvds_dtype_t dtype) {
  return (unsigned)dtype < HVDS_DTYPE_COUNT ? types[dtype].bytes : 0;
}

const char* hvds__dtype_name(hvds_dtype_t dtype) {
  return (unsigned)dtype < HVDS_DTYPE_COUNT ? types[dtype].name : "UNKNOWN";
}
