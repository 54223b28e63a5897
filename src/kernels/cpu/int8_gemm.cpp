#include "kernels/cpu/int8_gemm.h"

#include <cstdlib>
#include <string>

#include "core/env.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/scratch.h"

namespace tritium {

std::string_view int8_kernel_name(Int8Kernel k) {
  switch (k) {
    case Int8Kernel::kRef: return "ref";
    case Int8Kernel::kAvx2: return "avx2";
    case Int8Kernel::kAvx512: return "avx512";
  }
  return "?";
}

bool int8_kernel_supported(Int8Kernel k) {
  switch (k) {
    case Int8Kernel::kRef: return true;
    case Int8Kernel::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Int8Kernel::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

Int8Kernel parse_int8_kernel(std::string_view s, std::string_view what) {
  if (s == "ref") return Int8Kernel::kRef;
  if (s == "avx2") return Int8Kernel::kAvx2;
  if (s == "avx512") return Int8Kernel::kAvx512;
  if (s == "amx") return Int8Kernel::kAvx512;  // the amx path puts the ternary GEMM on tiles; int8 stays AVX-512
  fail("{}='{}' is not one of ref, avx2, avx512, amx", what, s);
}

namespace {
Int8Kernel pick_kernel() {
  if (const std::string v = env::kernel(); !v.empty()) {
    const Int8Kernel k = parse_int8_kernel(v, "TRITIUM_KERNEL");
    TRITIUM_CHECK(int8_kernel_supported(k), "TRITIUM_KERNEL={}: this CPU does not support it", v);
    return k;
  }
  if (int8_kernel_supported(Int8Kernel::kAvx512)) return Int8Kernel::kAvx512;
  if (int8_kernel_supported(Int8Kernel::kAvx2)) return Int8Kernel::kAvx2;
  return Int8Kernel::kRef;
}

void check_args(int64_t M, int64_t N, int64_t K, Int8Kernel kernel, const char* fn) {
  TRITIUM_CHECK(M >= 0 && N >= 0 && K >= 0, "{}: negative size M={} N={} K={}", fn, M, N, K);
  TRITIUM_CHECK(K <= kInt8GemmMaxK, "{}: K={} exceeds the int32-safe limit {}", fn, K, kInt8GemmMaxK);
  TRITIUM_CHECK(int8_kernel_supported(kernel), "{}: kernel '{}' is not supported by this CPU", fn,
                int8_kernel_name(kernel));
}

// Output rows per parallel chunk: a multiple of the 4-row register tile, large enough that a
// chunk amortizes the thread hand-off, small enough that several threads get work on N = 256.
constexpr int64_t kGrainN = 32;
}  // namespace

Int8Kernel int8_default_kernel() {
  static const Int8Kernel k = pick_kernel();
  return k;
}

void int8_row_sums(const int8_t* w, int64_t N, int64_t K, int32_t* out) {
  for (int64_t n = 0; n < N; ++n) {
    int32_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += w[n * K + k];
    out[n] = s;
  }
}

void gemm_s8s8_s32(const int8_t* x, const int8_t* w, const int32_t* w_row_sum, int64_t M, int64_t N,
                   int64_t K, int32_t* acc, Int8Kernel kernel) {
  check_args(M, N, K, kernel, "gemm_s8s8_s32");
  if (M == 0 || N == 0) return;
  switch (kernel) {
    case Int8Kernel::kRef:
      parallel_for(N, kGrainN, [&](int64_t n0, int64_t n1) { int8_detail::gemm_ref(x, w, M, N, K, acc, n0, n1); });
      return;
    case Int8Kernel::kAvx2:
      parallel_for(N, kGrainN, [&](int64_t n0, int64_t n1) { int8_detail::gemm_avx2(x, w, M, N, K, acc, n0, n1); });
      return;
    case Int8Kernel::kAvx512: {
      TRITIUM_CHECK(w_row_sum != nullptr, "gemm_s8s8_s32: the avx512 kernel needs w_row_sum (int8_row_sums)");
      // x + 128 as unsigned bytes (xor flips the sign bit), converted once for all output rows, into the calling
      // thread's scratch (no allocation per call once it has grown).
      thread_local Scratch<uint8_t> xu_scratch;
      uint8_t* xu = xu_scratch.get(static_cast<size_t>(M * K));
      for (int64_t i = 0; i < M * K; ++i) xu[i] = static_cast<uint8_t>(x[i]) ^ 0x80u;
      parallel_for(N, kGrainN, [&](int64_t n0, int64_t n1) {
        int8_detail::gemm_avx512(xu, w, w_row_sum, M, N, K, acc, n0, n1);
      });
      return;
    }
  }
}

void gemm_f32s8_f32(const float* x, const int8_t* w, const float* w_scale, int64_t M, int64_t N,
                    int64_t K, float* y, Int8Kernel kernel) {
  check_args(M, N, K, kernel, "gemm_f32s8_f32");
  if (M == 0 || N == 0) return;
  parallel_for(N, kGrainN, [&](int64_t n0, int64_t n1) {
    switch (kernel) {
      case Int8Kernel::kRef: int8_detail::gemm_f32s8_ref(x, w, w_scale, M, N, K, y, n0, n1); break;
      case Int8Kernel::kAvx2: int8_detail::gemm_f32s8_avx2(x, w, w_scale, M, N, K, y, n0, n1); break;
      case Int8Kernel::kAvx512: int8_detail::gemm_f32s8_avx512(x, w, w_scale, M, N, K, y, n0, n1); break;
    }
  });
}

namespace int8_detail {

void gemm_ref(const int8_t* x, const int8_t* w, int64_t M, int64_t N, int64_t K, int32_t* acc,
              int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* xr = x + m * K;
      int32_t s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<int32_t>(xr[k]) * static_cast<int32_t>(wr[k]);
      acc[m * N + n] = s;
    }
  }
}

void gemm_f32s8_ref(const float* x, const int8_t* w, const float* w_scale, int64_t M, int64_t N,
                    int64_t K, float* y, int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = x + m * K;
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += xr[k] * static_cast<float>(wr[k]);
      y[m * N + n] = s * w_scale[n];
    }
  }
}

}  // namespace int8_detail
}  // namespace tritium
