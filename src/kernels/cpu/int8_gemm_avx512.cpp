// AVX-512 VNNI int8 kernels. vpdpbusd multiplies unsigned x signed bytes, so activations enter as
// xu = x + 128 (uint8, the caller xors 0x80) and the offset is removed exactly afterwards:
//   sum_k x[k] w[k] = sum_k xu[k] w[k] - 128 * sum_k w[k]      (rowsum precomputed per weight)
// vpdpbusd does not saturate; |partial sums| <= 255 * 127 * K fits int32 for K <= 65536.
// K tails use masked byte loads (zero w bytes contribute nothing whatever xu holds there).
// GCC 12 reports a false -Wmaybe-uninitialized inside its own avx512fintrin.h helpers
// (_mm512_undefined_* used by the reduce intrinsics, -Wuninitialized once unrolled) once they are inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/cpu/int8_gemm.h"

namespace tritium::int8_detail {
namespace {
inline __mmask64 tail_mask(int64_t r) { return r >= 64 ? ~__mmask64{0} : ((__mmask64{1} << r) - 1); }
}  // namespace

namespace {
// The four weight rows of a tile are four short streams through memory (2,560 bytes each on the 2B4T head), too
// short for the hardware prefetcher to run ahead of (the head GEMV read 24-26 GB/s of a measured 31-34 on a Zen 4
// core pair); so each k-step prefetches 256 bytes of the next tile's rows (the 4 K bytes after this tile's) into L2,
// which covers them by the end of this tile (into L1 it measured 10-20% slower: the L1 fill buffers limit the
// misses in flight). Prefetches past the end of the weights do not fault.

// MR tokens x 4 output rows: per 64-byte step MR + 4 loads feed 4 * MR vpdpbusd.
template <int MR>
inline void tile_s8(const uint8_t* xu, const int8_t* w0, const int32_t* c, int64_t K, int64_t K64, __mmask64 tm,
                    int32_t* out, int64_t N) {
  const int8_t* wr[4] = {w0, w0 + K, w0 + 2 * K, w0 + 3 * K};
  __m512i a[MR][4];
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) a[r][j] = _mm512_setzero_si512();
  for (int64_t k = 0; k < K64; k += 64) {
    __m512i xv[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) xv[r] = _mm512_loadu_si512(xu + r * K + k);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(w0 + 4 * K + 4 * k + 64 * j), _MM_HINT_T1);
      const __m512i wv = _mm512_loadu_si512(wr[j] + k);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) a[r][j] = _mm512_dpbusd_epi32(a[r][j], xv[r], wv);
    }
  }
  if (K64 < K) {
    __m512i xv[MR];
#pragma GCC unroll 4
    for (int r = 0; r < MR; ++r) xv[r] = _mm512_maskz_loadu_epi8(tm, xu + r * K + K64);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i wv = _mm512_maskz_loadu_epi8(tm, wr[j] + K64);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) a[r][j] = _mm512_dpbusd_epi32(a[r][j], xv[r], wv);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) out[r * N + j] = _mm512_reduce_add_epi32(a[r][j]) - c[j];
}
}  // namespace

void gemm_avx512(const uint8_t* xu, const int8_t* w, const int32_t* w_row_sum, int64_t M, int64_t N,
                 int64_t K, int32_t* acc, int64_t n0, int64_t n1) {
  const int64_t K64 = K & ~int64_t{63};
  const __mmask64 tm = tail_mask(K - K64);
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    const int8_t* w0 = w + n * K;
    const int32_t c[4] = {128 * w_row_sum[n], 128 * w_row_sum[n + 1], 128 * w_row_sum[n + 2],
                          128 * w_row_sum[n + 3]};
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) tile_s8<4>(xu + m * K, w0, c, K, K64, tm, acc + m * N + n, N);
    for (; m + 2 <= M; m += 2) tile_s8<2>(xu + m * K, w0, c, K, K64, tm, acc + m * N + n, N);
    for (; m < M; ++m) tile_s8<1>(xu + m * K, w0, c, K, K64, tm, acc + m * N + n, N);
  }
  for (; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    const int32_t c = 128 * w_row_sum[n];
    for (int64_t m = 0; m < M; ++m) {
      const uint8_t* xa = xu + m * K;
      __m512i a = _mm512_setzero_si512();
      for (int64_t k = 0; k < K64; k += 64) a = _mm512_dpbusd_epi32(a, _mm512_loadu_si512(xa + k), _mm512_loadu_si512(wr + k));
      if (K64 < K) a = _mm512_dpbusd_epi32(a, _mm512_maskz_loadu_epi8(tm, xa + K64), _mm512_maskz_loadu_epi8(tm, wr + K64));
      acc[m * N + n] = _mm512_reduce_add_epi32(a) - c;
    }
  }
}

namespace {
// MR tokens x 1 output row: the int8 -> f32 conversion of each weight chunk is shared by MR
// tokens. Per (m, n) the lane sums, the tail and the final reduction are the same for every MR,
// so a token's result does not depend on how many tokens share the call.
template <int MR>
inline void tile_f32s8(const float* x, const int8_t* wr, float scale, int64_t K, int64_t K16, __mmask16 tm,
                       float* out, int64_t N) {
  __m512 a[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) a[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K16; k += 16) {
    const __m512 wv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + k))));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * K + k), wv, a[r]);
  }
  if (K16 < K) {
    const __m512 wv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(tm, wr + K16)));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) a[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tm, x + r * K + K16), wv, a[r]);
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) out[r * N] = _mm512_reduce_add_ps(a[r]) * scale;
}
}  // namespace

void gemm_f32s8_avx512(const float* x, const int8_t* w, const float* w_scale, int64_t M, int64_t N,
                       int64_t K, float* y, int64_t n0, int64_t n1) {
  const int64_t K16 = K & ~int64_t{15};
  const __mmask16 tm = static_cast<__mmask16>((1u << (K - K16)) - 1u);
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    int64_t m = 0;
    for (; m + 8 <= M; m += 8) tile_f32s8<8>(x + m * K, wr, w_scale[n], K, K16, tm, y + m * N + n, N);
    for (; m < M; ++m) tile_f32s8<1>(x + m * K, wr, w_scale[n], K, K16, tm, y + m * N + n, N);
  }
}

}  // namespace tritium::int8_detail
