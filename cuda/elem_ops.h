/* The element operations of the CUDA kernels, for host and device (C++17; hvds_hostdev.h):
 * storage types for every hvds_dtype_t, combine (the reduce ops), scale, and the non-zero test.
 *
 * Each one replicates ops/reduce.c element for element: integer sums and products wrap in the
 * unsigned type of the same or a wider width; min and max propagate NaN from either side;
 * float16 and bfloat16 are widened to float32, combined and rounded back to nearest even; bool
 * sum/max/or are or, min/product/and are and; scaling goes through double (integers truncate
 * toward zero and saturate, NaN -> 0). test/cuda_host/ checks these against hvds__reduce() and
 * hvds__scale() on the CPU; test/gpu/ checks the kernels built on them. (Which NaN payload an
 * arithmetic NaN carries is the hardware's: the tests treat all NaNs as equal.)
 */
#ifndef HVDS_CUDA_ELEM_OPS_H_
#define HVDS_CUDA_ELEM_OPS_H_

#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "hvdsparse.h"
#include "half_shared.h"

namespace hvds_elem {

/* Storage of the dtypes without a native C++ type: the same bytes, a distinct type. */
struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};
struct boolean {
  uint8_t v;
};

/* Slots of the reduce ops (ops/reduce.c's kernel table order). */
enum : int { kSum = 0, kMin = 1, kMax = 2, kProd = 3, kBand = 4, kBor = 5 };

template <class T>
constexpr bool is_half_v = std::is_same<T, f16>::value || std::is_same<T, bf16>::value;

template <class T>
HVDS_HD float to_float(T v) {
  if constexpr (std::is_same<T, f16>::value)
    return hvds_hd_half_to_float(v.bits);
  else
    return hvds_hd_bf16_to_float(v.bits);
}

template <class T>
HVDS_HD T from_float(float f) {
  if constexpr (std::is_same<T, f16>::value)
    return T{hvds_hd_float_to_half(f)};
  else
    return T{hvds_hd_float_to_bf16(f)};
}

/* The unsigned type integer arithmetic wraps in. */
template <class T>
using wrap_t = typename std::conditional<sizeof(T) == 8, uint64_t, uint32_t>::type;

/* Min and max that propagate NaN from either side (a NaN never compares less or greater). */
template <class V>
HVDS_HD V min_nan(V a, V b) {
  return (b < a || b != b) ? b : a;
}
template <class V>
HVDS_HD V max_nan(V a, V b) {
  return (b > a || b != b) ? b : a;
}

/* a op b for op one of the slots above. Callers only instantiate supported pairs (no kBand or
 * kBor for floating types). */
template <int OP, class T>
HVDS_HD T combine(T a, T b) {
  if constexpr (is_half_v<T>) {
    float x = to_float(a), y = to_float(b);
    float r = OP == kSum ? x + y : OP == kProd ? x * y : OP == kMin ? min_nan(x, y) : max_nan(x, y);
    return from_float<T>(r);
  } else if constexpr (std::is_same<T, boolean>::value) {
    bool any = OP == kSum || OP == kMax || OP == kBor;
    return boolean{(uint8_t)(any ? (a.v | b.v) != 0 : (a.v != 0 && b.v != 0))};
  } else if constexpr (std::is_floating_point<T>::value) {
    return OP == kSum ? a + b : OP == kProd ? a * b : OP == kMin ? min_nan(a, b) : max_nan(a, b);
  } else {
    using U = wrap_t<T>;
    switch (OP) {
      case kSum:
        return (T)((U)a + (U)b);
      case kProd:
        return (T)((U)a * (U)b);
      case kMin:
        return min_nan(a, b);
      case kMax:
        return max_nan(a, b);
      case kBand:
        return (T)(a & b);
      default:
        return (T)(a | b);
    }
  }
}

/* Integer scaling: multiply in double, truncate toward zero, saturate to [lo, hi], NaN -> 0.
 * The bounds stay integers: (double)INT64_MAX is 2^63, which does not convert back to int64. */
template <class T>
HVDS_HD T scale_int(T v, double f, T lo, T hi) {
  double x = trunc((double)v * f);
  return x != x ? (T)0 : x <= (double)lo ? lo : x >= (double)hi ? hi : (T)x;
}

/* v * f as hvds__scale() computes it. */
template <class T>
HVDS_HD T scale(T v, double f) {
  if constexpr (is_half_v<T>) {
    return from_float<T>(to_float(v) * (float)f);
  } else if constexpr (std::is_same<T, boolean>::value) {
    return boolean{(uint8_t)(trunc((double)(v.v != 0) * f) != 0)};
  } else if constexpr (std::is_same<T, float>::value) {
    return v * (float)f;
  } else if constexpr (std::is_same<T, double>::value) {
    return v * f;
  } else if constexpr (std::is_same<T, uint8_t>::value) {
    return scale_int<T>(v, f, 0, UINT8_MAX);
  } else if constexpr (std::is_same<T, int8_t>::value) {
    return scale_int<T>(v, f, INT8_MIN, INT8_MAX);
  } else if constexpr (std::is_same<T, uint16_t>::value) {
    return scale_int<T>(v, f, 0, UINT16_MAX);
  } else if constexpr (std::is_same<T, int16_t>::value) {
    return scale_int<T>(v, f, INT16_MIN, INT16_MAX);
  } else if constexpr (std::is_same<T, int32_t>::value) {
    return scale_int<T>(v, f, INT32_MIN, INT32_MAX);
  } else {
    static_assert(std::is_same<T, int64_t>::value, "unknown element type");
    return scale_int<T>(v, f, INT64_MIN, INT64_MAX);
  }
}

/* Non-zero in the dtype's arithmetic: -0.0 is zero, NaN is not. */
template <class T>
HVDS_HD bool nonzero(T v) {
  if constexpr (is_half_v<T>)
    return (v.bits & 0x7fffu) != 0;
  else if constexpr (std::is_same<T, boolean>::value)
    return v.v != 0;
  else
    return v != 0;
}

/* Calls f(T{}) with T the storage type of dtype and returns what f returns; on_unknown() for a
 * value that names no dtype. Host code: the one place a dtype becomes a type. */
template <class F, class U>
auto with_dtype(hvds_dtype_t dtype, F&& f, U&& on_unknown) -> decltype(f(float{})) {
  switch (dtype) {
    case HVDS_UINT8:
      return f(uint8_t{});
    case HVDS_INT8:
      return f(int8_t{});
    case HVDS_UINT16:
      return f(uint16_t{});
    case HVDS_INT16:
      return f(int16_t{});
    case HVDS_INT32:
      return f(int32_t{});
    case HVDS_INT64:
      return f(int64_t{});
    case HVDS_FLOAT16:
      return f(f16{});
    case HVDS_FLOAT32:
      return f(float{});
    case HVDS_FLOAT64:
      return f(double{});
    case HVDS_BOOL:
      return f(boolean{});
    case HVDS_BFLOAT16:
      return f(bf16{});
    default:
      return on_unknown();
  }
}

}  // namespace hvds_elem

#endif /* HVDS_CUDA_ELEM_OPS_H_ */
