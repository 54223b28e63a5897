// tritium kernels/cuda: reads and writes of paged KV pool elements (kernels.h KvElem) for the attention kernels:
// float32 as is, bf16 rounded to nearest even on write and widened to float on read.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace tritium::cuda {

template <class KT>
struct KvIO;

template <>
struct KvIO<float> {
  /// The value a write then a read of x gives.
  static __device__ __forceinline__ float round(float x) { return x; }
  static __device__ __forceinline__ void store(float* p, float x) { *p = x; }
  /// N floats (N a multiple of 8) from p (16-byte aligned).
  template <int N>
  static __device__ __forceinline__ void load(const float* p, float4 (&out)[N / 4]) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) out[i] = reinterpret_cast<const float4*>(p)[i];
  }
  /// 4 elements from p (aligned to 4 elements).
  static __device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
};

template <>
struct KvIO<__nv_bfloat16> {
  static __device__ __forceinline__ float lo(uint32_t w) { return __uint_as_float(w << 16); }
  static __device__ __forceinline__ float hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
  static __device__ __forceinline__ float round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
  static __device__ __forceinline__ void store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }
  template <int N>
  static __device__ __forceinline__ void load(const __nv_bfloat16* p, float4 (&out)[N / 4]) {
    static_assert(N % 8 == 0, "bf16 KV loads take 8 elements at a time");
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const uint4 w = reinterpret_cast<const uint4*>(p)[j];
      out[2 * j] = make_float4(lo(w.x), hi(w.x), lo(w.y), hi(w.y));
      out[2 * j + 1] = make_float4(lo(w.z), hi(w.z), lo(w.w), hi(w.w));
    }
  }
  static __device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    return make_float4(lo(w.x), hi(w.x), lo(w.y), hi(w.y));
  }
};

}  // namespace tritium::cuda
