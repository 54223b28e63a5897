// tritium kernels/cuda: reads and writes of paged KV pool elements (kernels.h KvElem / KvFormat) for the attention
// kernels: float32 as is; bf16 rounded to nearest even on write and widened to float on read; fp8 e4m3 (OCP
// "e4m3fn", kv/fp8.h) with a per-tensor scale s as vLLM's fp8 KV cache: stored = e4m3(x / s) (round to nearest
// even, saturating at +-448), read back as float(stored) * s, the float operations of the CPU cache (kv/kv_cache.h).
// Every function takes the scale; float32 and bf16 ignore it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernels.h"

namespace tritium::cuda {

template <class KT>
struct KvIO;

template <>
struct KvIO<float> {
  /// The value a write then a read of x gives.
  static __device__ __forceinline__ float round(float x, float) { return x; }
  static __device__ __forceinline__ void store(float* p, float x, float) { *p = x; }
  /// N floats (N a multiple of 8) from p (16-byte aligned).
  template <int N>
  static __device__ __forceinline__ void load(const float* p, float4 (&out)[N / 4], float) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) out[i] = reinterpret_cast<const float4*>(p)[i];
  }
  /// 4 elements from p (aligned to 4 elements).
  static __device__ __forceinline__ float4 load4(const float* p, float) { return *reinterpret_cast<const float4*>(p); }
};

template <>
struct KvIO<__nv_bfloat16> {
  static __device__ __forceinline__ float lo(uint32_t w) { return __uint_as_float(w << 16); }
  static __device__ __forceinline__ float hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
  static __device__ __forceinline__ float round(float x, float) { return __bfloat162float(__float2bfloat16_rn(x)); }
  static __device__ __forceinline__ void store(__nv_bfloat16* p, float x, float) { *p = __float2bfloat16_rn(x); }
  template <int N>
  static __device__ __forceinline__ void load(const __nv_bfloat16* p, float4 (&out)[N / 4], float) {
    static_assert(N % 8 == 0, "bf16 KV loads take 8 elements at a time");
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const uint4 w = reinterpret_cast<const uint4*>(p)[j];
      out[2 * j] = make_float4(lo(w.x), hi(w.x), lo(w.y), hi(w.y));
      out[2 * j + 1] = make_float4(lo(w.z), hi(w.z), lo(w.w), hi(w.w));
    }
  }
  static __device__ __forceinline__ float4 load4(const __nv_bfloat16* p, float) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    return make_float4(lo(w.x), hi(w.x), lo(w.y), hi(w.y));
  }
};

template <>
struct KvIO<__nv_fp8_e4m3> {
  static __device__ __forceinline__ __nv_fp8_storage_t enc(float x, float s) {
    return __nv_cvt_float_to_fp8(__fdiv_rn(x, s), __NV_SATFINITE, __NV_E4M3);
  }
  static __device__ __forceinline__ float dec(__nv_fp8_storage_t b, float s) {
    return __fmul_rn(__half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3))), s);
  }
  /// 4 stored bytes of one word -> 4 floats (two paired conversions).
  static __device__ __forceinline__ float4 dec4(uint32_t w, float s) {
    const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xffffu), __NV_E4M3);
    const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
    const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
    return make_float4(__fmul_rn(a.x, s), __fmul_rn(a.y, s), __fmul_rn(b.x, s), __fmul_rn(b.y, s));
  }
  static __device__ __forceinline__ float round(float x, float s) { return dec(enc(x, s), s); }
  static __device__ __forceinline__ void store(__nv_fp8_e4m3* p, float x, float s) {
    *reinterpret_cast<__nv_fp8_storage_t*>(p) = enc(x, s);
  }
  template <int N>
  static __device__ __forceinline__ void load(const __nv_fp8_e4m3* p, float4 (&out)[N / 4], float s) {
    static_assert(N % 8 == 0, "fp8 KV loads take 8 elements at a time");
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const uint2 w = reinterpret_cast<const uint2*>(p)[j];
      out[2 * j] = dec4(w.x, s);
      out[2 * j + 1] = dec4(w.y, s);
    }
  }
  static __device__ __forceinline__ float4 load4(const __nv_fp8_e4m3* p, float s) {
    return dec4(*reinterpret_cast<const uint32_t*>(p), s);
  }
};

/// Calls f(KT{}) with KT the element type of `e` (float, __nv_bfloat16 or __nv_fp8_e4m3): the launchers' one switch.
template <class F>
void with_kv_type(KvElem e, F&& f) {
  switch (e) {
    case KvElem::kF32: f(float{}); return;
    case KvElem::kBF16: f(__nv_bfloat16{}); return;
    case KvElem::kFP8: f(__nv_fp8_e4m3{}); return;
  }
}

}  // namespace tritium::cuda
