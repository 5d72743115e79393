/* Public API of the quantizer (ops/quantize.h): on host memory on the caller's thread, or on a
 * GPU's memory by the device library's kernels on the caller's stream. A binding that builds a
 * quantized gather from routed collectives encodes and decodes with these, so its bytes are the
 * runtime's. */
#include <stdint.h>

#include "device_library.h"
#include "dtype.h"
#include "quantize.h"
#include "state.h"

int64_t hvds_quantized_bytes(int64_t n, int32_t bits) {
  return n > 0 ? (int64_t)hvds__quant_bytes((size_t)n, bits) : 0;
}

/* The checks encode and decode share; fn names the entry in the error. */
static hvds_result_t check_quant(const char* fn, const void* src, int64_t n, hvds_dtype_t dtype,
                                 int32_t bits, const void* dst) {
  if (hvds__quant_levels(bits) == 0)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s: bits must be 2, 4 or 8, not %d", fn,
                           (int)bits);
  if (!hvds__quant_dtype_ok(dtype))
    return hvds__set_error(HVDS_INVALID_ARGUMENT,
                           "%s: dtype %s cannot be quantized (FLOAT16, BFLOAT16, FLOAT32 or "
                           "FLOAT64)",
                           fn, hvds__dtype_name(dtype) ? hvds__dtype_name(dtype) : "unknown");
  if (n < 0)
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s: n = %lld is negative", fn, (long long)n);
  if (n > 0 && (src == NULL || dst == NULL))
    return hvds__set_error(HVDS_INVALID_ARGUMENT, "%s: %s is NULL", fn, src ? "dst" : "src");
  return HVDS_SUCCESS;
}

/* The device library for a call on GPU device, or NULL with the error set. */
static const hvds_device_api_t* library_for(const char* fn, int32_t device) {
  char why[512] = "";
  const hvds_device_api_t* api = hvds__device_library(why, sizeof(why), NULL, 0);
  if (api == NULL)
    hvds__set_error(HVDS_NOT_SUPPORTED, "%s on GPU %d: no device library: %s", fn, (int)device,
                    why);
  return api;
}

hvds_result_t hvds_quantize(int32_t device, int64_t stream, const void* src, int64_t n,
                            hvds_dtype_t dtype, int32_t bits, uint64_t seed, void* dst) {
  static const char fn[] = "hvds_quantize";
  hvds_result_t rc = check_quant(fn, src, n, dtype, bits, dst);
  if (rc != HVDS_SUCCESS || n == 0) return rc;
  if (device < 0) return hvds__quant_encode(src, (size_t)n, dtype, bits, seed, dst);
  const hvds_device_api_t* api = library_for(fn, device);
  if (api == NULL) return HVDS_NOT_SUPPORTED;
  char why[512] = "";
  if (api->quant_encode(device, stream, src, (size_t)n, dtype, bits, seed, dst, why, sizeof(why)) !=
      0)
    return hvds__set_error(HVDS_SYSTEM_ERROR, "%s on GPU %d: %s", fn, (int)device, why);
  return HVDS_SUCCESS;
}

hvds_result_t hvds_dequantize(int32_t device, int64_t stream, const void* src, int64_t n,
                              int32_t bits, hvds_dtype_t dtype, void* dst) {
  static const char fn[] = "hvds_dequantize";
  hvds_result_t rc = check_quant(fn, src, n, dtype, bits, dst);
  if (rc != HVDS_SUCCESS || n == 0) return rc;
  if (device < 0) return hvds__quant_decode(src, (size_t)n, bits, dtype, dst);
  const hvds_device_api_t* api = library_for(fn, device);
  if (api == NULL) return HVDS_NOT_SUPPORTED;
  char why[512] = "";
  if (api->quant_decode(device, stream, src, (size_t)n, bits, dtype, dst, why, sizeof(why)) != 0)
    return hvds__set_error(HVDS_SYSTEM_ERROR, "%s on GPU %d: %s", fn, (int)device, why);
  return HVDS_SUCCESS;
}
