/* Tensors and options as the multi-process test workers build them: a 1-D tensor over a
 * buffer on the CPU, and default options with a name. */
#ifndef HVDS_TEST_WORKER_TENSORS_H_
#define HVDS_TEST_WORKER_TENSORS_H_

#include "hvdsparse.h"

static inline hvds_tensor_t tensor1(void* data, hvds_dtype_t dt, int64_t n) {
  hvds_tensor_t t = {data, dt, -1, 1, {n}};
  return t;
}

static inline hvds_op_options_t named(const char* name) {
  hvds_op_options_t o = HVDS_OP_OPTIONS_INIT;
  o.name = name;
  return o;
}

#endif /* HVDS_TEST_WORKER_TENSORS_H_ */
