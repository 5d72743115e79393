/* Type-erased element-wise kernels used by every algorithm: reduce, scale, cast. */
#ifndef HVDS_REDUCE_H_
#define HVDS_REDUCE_H_

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "hvdsparse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Internal reductions beyond the public ones, for the control plane (int64 bit vectors). */
#define HVDS_REDUCE_BAND ((hvds_reduce_op_t)100)
#define HVDS_REDUCE_BOR ((hvds_reduce_op_t)101)

/* dst[i] = dst[i] op src[i] for count elements. Sum, Average (sums), Min, Max, Product for every
 * dtype (float16 and bfloat16 computed in float32; bool: sum/max = or, min/product = and);
 * BAND/BOR for integer types. Returns HVDS_NOT_SUPPORTED for other combinations. */
hvds_result_t hvds__reduce(void* dst, const void* src, size_t count, hvds_dtype_t dtype,
                           hvds_reduce_op_t op);
/* buf[i] *= factor. Integers: computed in double and truncated toward zero, as Horovod does.
 * A factor of exactly 1.0 is a no-op. */
hvds_result_t hvds__scale(void* buf, size_t count, hvds_dtype_t dtype, double factor);
/* buf[i] /= divisor: floating types divide in their own arithmetic (float16 and bfloat16 in
 * float32), so an average of equal values is exact; integers and bool scale by 1/divisor as
 * hvds__scale does. A divisor of 1 is a no-op. */
hvds_result_t hvds__divide(void* buf, size_t count, hvds_dtype_t dtype, int64_t divisor);

/* Scalar conversions for the 16-bit float types (round to nearest even). */
float hvds__half_to_float(uint16_t h);
uint16_t hvds__float_to_half(float f);
float hvds__bf16_to_float(uint16_t b);
uint16_t hvds__float_to_bf16(float f);

#ifdef __cplusplus
}
#endif
#endif /* HVDS_REDUCE_H_ */
