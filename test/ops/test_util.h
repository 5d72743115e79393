// Helpers shared by the ops tests: typed element access and a serial reference reduction that
// does not use the kernels under test (except the 16-bit conversions, tested on their own).
#ifndef HVDS_TEST_OPS_TEST_UTIL_H_
#define HVDS_TEST_OPS_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collectives.h"
#include "reduce.h"

namespace hvds_test {

inline bool is_float(hvds_dtype_t t) {
  return t == HVDS_FLOAT16 || t == HVDS_FLOAT32 || t == HVDS_FLOAT64 || t == HVDS_BFLOAT16;
}
inline bool is_unsigned(hvds_dtype_t t) {
  return t == HVDS_UINT8 || t == HVDS_UINT16 || t == HVDS_BOOL;
}

// Reads element i as a double (every value the tests use is exact in double).
inline double get(hvds_dtype_t t, const void* buf, size_t i) {
  const char* b = static_cast<const char*>(buf);
  switch (t) {
    case HVDS_UINT8:
      return reinterpret_cast<const uint8_t*>(b)[i];
    case HVDS_INT8:
      return reinterpret_cast<const int8_t*>(b)[i];
    case HVDS_UINT16:
      return reinterpret_cast<const uint16_t*>(b)[i];
    case HVDS_INT16:
      return reinterpret_cast<const int16_t*>(b)[i];
    case HVDS_INT32:
      return reinterpret_cast<const int32_t*>(b)[i];
    case HVDS_INT64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(b)[i]);
    case HVDS_FLOAT16:
      return hvds__half_to_float(reinterpret_cast<const uint16_t*>(b)[i]);
    case HVDS_FLOAT32:
      return reinterpret_cast<const float*>(b)[i];
    case HVDS_FLOAT64:
      return reinterpret_cast<const double*>(b)[i];
    case HVDS_BOOL:
      return reinterpret_cast<const uint8_t*>(b)[i];
    case HVDS_BFLOAT16:
      return hvds__bf16_to_float(reinterpret_cast<const uint16_t*>(b)[i]);
    default:
      return 0;
  }
}

inline void set(hvds_dtype_t t, void* buf, size_t i, double v) {
  char* b = static_cast<char*>(buf);
  switch (t) {
    case HVDS_UINT8:
      reinterpret_cast<uint8_t*>(b)[i] = static_cast<uint8_t>(v);
      break;
    case HVDS_INT8:
      reinterpret_cast<int8_t*>(b)[i] = static_cast<int8_t>(v);
      break;
    case HVDS_UINT16:
      reinterpret_cast<uint16_t*>(b)[i] = static_cast<uint16_t>(v);
      break;
    case HVDS_INT16:
      reinterpret_cast<int16_t*>(b)[i] = static_cast<int16_t>(v);
      break;
    case HVDS_INT32:
      reinterpret_cast<int32_t*>(b)[i] = static_cast<int32_t>(v);
      break;
    case HVDS_INT64:
      reinterpret_cast<int64_t*>(b)[i] = static_cast<int64_t>(v);
      break;
    case HVDS_FLOAT16:
      reinterpret_cast<uint16_t*>(b)[i] = hvds__float_to_half(static_cast<float>(v));
      break;
    case HVDS_FLOAT32:
      reinterpret_cast<float*>(b)[i] = static_cast<float>(v);
      break;
    case HVDS_FLOAT64:
      reinterpret_cast<double*>(b)[i] = v;
      break;
    case HVDS_BOOL:
      reinterpret_cast<uint8_t*>(b)[i] = v != 0;
      break;
    case HVDS_BFLOAT16:
      reinterpret_cast<uint16_t*>(b)[i] = hvds__float_to_bf16(static_cast<float>(v));
      break;
    default:
      break;
  }
}

// Reduce ops are kept as int in the tests: BAND (100) and BOR (101) lie outside the value range
// C++ gives hvds_reduce_op_t (0..7), so holding them in that type is undefined in C++ (UBSan's
// -fsanitize=enum flags it). op_arg() converts at the call into the C code.
const int kBand = 100, kBor = 101;
inline hvds_reduce_op_t op_arg(int op) { return static_cast<hvds_reduce_op_t>(op); }

// Ops with a kernel for t: the five public ones, plus BAND/BOR for integers and bool.
inline std::vector<int> ops_for(hvds_dtype_t t) {
  std::vector<int> ops = {HVDS_SUM, HVDS_AVERAGE, HVDS_MIN, HVDS_MAX, HVDS_PRODUCT};
  if (!is_float(t)) {
    ops.push_back(kBand);
    ops.push_back(kBor);
  }
  return ops;
}

// Rank r's input element i for op: small integers whose sums and products stay exact in every
// dtype (|sum| <= 16, |product| <= 2 for up to 8 ranks).
inline double input(hvds_dtype_t t, int op, int nranks, int r, size_t i) {
  if (t == HVDS_BOOL) return ((r * 5 + i * 3) % 4) != 0;
  bool neg = !is_unsigned(t);
  switch (op) {
    case HVDS_PRODUCT:
      if (static_cast<int>(i % nranks) == r) return 2;
      return neg && (i + r) % 3 == 0 ? -1 : 1;
    case HVDS_MIN:
    case HVDS_MAX:
      return static_cast<double>((r * 13 + i * 7) % 11) - (neg ? 5 : 0);
    case kBand:
    case kBor:
      return static_cast<double>(((r + 1) * (i + 3) * 2654435761u >> 9) & 0x7f);
    default:
      return static_cast<double>((r * 7 + i * 3) % 5) - (neg ? 2 : 0);
  }
}

// Serial reference: combines two values the way op does for t (values are exact).
inline double combine(hvds_dtype_t t, int op, double a, double b) {
  if (t == HVDS_BOOL) {
    bool x = a != 0, y = b != 0;
    bool is_or = op == HVDS_SUM || op == HVDS_AVERAGE || op == HVDS_MAX || op == kBor;
    return is_or ? (x || y) : (x && y);
  }
  switch (op) {
    case HVDS_MIN:
      return std::min(a, b);
    case HVDS_MAX:
      return std::max(a, b);
    case HVDS_PRODUCT:
      return a * b;
    case kBand:
      return static_cast<double>(static_cast<int64_t>(a) & static_cast<int64_t>(b));
    case kBor:
      return static_cast<double>(static_cast<int64_t>(a) | static_cast<int64_t>(b));
    default:
      return a + b;
  }
}

// Fills buf with rank r's input and returns the expected reduction over nranks ranks.
inline std::vector<char> make_input(hvds_dtype_t t, int op, int nranks, int r, size_t count) {
  std::vector<char> buf(count * hvds__dtype_bytes(t));
  for (size_t i = 0; i < count; i++) set(t, buf.data(), i, input(t, op, nranks, r, i));
  return buf;
}

inline std::vector<char> make_expected(hvds_dtype_t t, int op, int nranks, size_t count) {
  std::vector<char> buf(count * hvds__dtype_bytes(t));
  for (size_t i = 0; i < count; i++) {
    double acc = input(t, op, nranks, 0, i);
    for (int r = 1; r < nranks; r++) acc = combine(t, op, acc, input(t, op, nranks, r, i));
    set(t, buf.data(), i, acc);
  }
  return buf;
}

// Index of the first differing element, or -1.
inline long first_diff(const std::vector<char>& a, const std::vector<char>& b, size_t esize) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); i += esize)
    if (memcmp(a.data() + i, b.data() + i, esize) != 0) return static_cast<long>(i / esize);
  return -1;
}

inline const char* dtype_str(hvds_dtype_t t) {
  static const char* names[] = {"uint8",   "int8",    "uint16",  "int16", "int32",   "int64",
                                "float16", "float32", "float64", "bool",  "bfloat16"};
  return static_cast<unsigned>(t) < HVDS_DTYPE_COUNT ? names[t] : "?";
}

}  // namespace hvds_test

#endif  // HVDS_TEST_OPS_TEST_UTIL_H_
