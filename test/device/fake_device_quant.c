/* The fake device library's quant_encode and quant_decode (device_api.h): the CPU quantizer
 * (ops/quantize.c) on host copies of the fake GPU memory, so a test can follow a binding's
 * quantized gather through the device entry. Control flow only: the kernels, which are held to
 * the CPU's bytes, are checked on a GPU. */
#include <stdio.h>
#include <stdlib.h>

#include "fake_device_internal.h"
#include "quantize.h"

static size_t value_bytes(int dtype) {
  return dtype == HVDS_FLOAT64 ? 8 : dtype == HVDS_FLOAT32 ? 4 : 2;
}

/* Reads in_bytes of src, runs the CPU's coder into out_bytes, writes them to dst. */
static int code(int device, int64_t stream, const void* src, size_t in_bytes, void* dst,
                size_t out_bytes, int encode, size_t n, int dtype, int bits, uint64_t seed,
                char* why, size_t why_len) {
  if (fake_device_check_memory(device, src, "quant", "src", why, why_len) ||
      fake_device_check_memory(device, dst, "quant", "dst", why, why_len))
    return -1;
  char* in = malloc(in_bytes + 1);
  char* out = malloc(out_bytes + 1);
  fake_device_read_memory(in, src, in_bytes);
  hvds_result_t rc = encode ? hvds__quant_encode(in, n, (hvds_dtype_t)dtype, bits, seed, out)
                            : hvds__quant_decode(in, n, bits, (hvds_dtype_t)dtype, out);
  if (rc == HVDS_SUCCESS) fake_device_write_memory(dst, out, out_bytes);
  free(in);
  free(out);
  if (rc != HVDS_SUCCESS) {
    snprintf(why, why_len, "fake quant: the CPU's %s refused (result %d)",
             encode ? "encoder" : "decoder", (int)rc);
    return -1;
  }
  fake_device_count_quant(stream);
  return 0;
}

int fake_quant_encode(int device, int64_t stream, const void* src, size_t n, int dtype, int bits,
                      uint64_t seed, void* dst, char* why, size_t why_len) {
  return code(device, stream, src, n * value_bytes(dtype), dst, hvds__quant_bytes(n, bits), 1, n,
              dtype, bits, seed, why, why_len);
}

int fake_quant_decode(int device, int64_t stream, const void* src, size_t n, int bits, int dtype,
                      void* dst, char* why, size_t why_len) {
  return code(device, stream, src, hvds__quant_bytes(n, bits), dst, n * value_bytes(dtype), 0, n,
              dtype, bits, 0, why, why_len);
}
