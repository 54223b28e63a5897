// tritium kernels/cpu: the grouped-query attention row kernel, J query rows of one KV head over the same n
// positions, as a template over the number of 8-float vector registers the ISA has. Included by
// attention_avx2.cpp (16 ymm registers) and attention_avx512.cpp (AVX-512VL's 32); both compile the same 256-bit
// operations, so both give attention_row_avx2's bits.
//
// Every output row is bit for bit attention_row_avx2's: per (row, position) the score is the 8-lane FMA chain over
// d in increasing order, reduced as (lanes i + i+4), then (0+2, 1+3), then (0 + 1), times the scale; the max and
// the double sum of exp run over positions in increasing order; each output lane is the FMA chain over positions
// in increasing order, times 1 / sum. What the budget changes is only how many (row, position) score chains and
// (row, 8 dimensions) output chains are in flight at once: P positions per K pass share each q load, DC
// dimension chunks per V pass share each weight broadcast, so a loaded vector serves several FMAs (the one-row
// loop loads one vector per FMA).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace tritium::cpu::detail::attention_rows_impl {

// The one-row kernel's reduction of one score chain.
inline float hsum(__m256 acc) {
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1));
  return _mm_cvtss_f32(s4);
}

// hsum of eight chains at once, the same additions on the same operands: lanes [0..3 | 4..7] of the result are
// the sums of a[0], a[2], a[4], a[6] | a[1], a[3], a[5], a[7].
inline __m256 hsum8(const __m256* a) {
  __m256 b[4];
  for (int i = 0; i < 4; ++i) {  // b[i] = [a[2i]'s 4 lane pairs i + i+4 | a[2i+1]'s]
    const __m256 lo = _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20);
    const __m256 hi = _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31);
    b[i] = _mm256_add_ps(lo, hi);
  }
  // c = [b0 + b2, b1 + b3] per chain: per 128-bit half, chains 2i / 2i + 2 (low half) and 2i + 1 / 2i + 3 (high).
  const __m256 c01 = _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 c23 = _mm256_add_ps(_mm256_shuffle_ps(b[2], b[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(b[2], b[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // s = c0 + c1 per chain: low half chains 0, 2, 4, 6; high half 1, 3, 5, 7.
  return _mm256_add_ps(_mm256_shuffle_ps(c01, c23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(c01, c23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane of hsum8's result that holds chain i.
constexpr int kHsum8Lane[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// Scores of P positions p0.. for J rows: sc[j * ld + p] = (q_j . k_p) * scale.
template <int J, int P>
inline void scores_block(const float* const* q, const float* k, int64_t p0, int64_t kv_stride, int D, float scale,
                         float* sc, int64_t ld) {
  __m256 acc[J * P];
  for (int a = 0; a < J * P; ++a) acc[a] = _mm256_setzero_ps();
  for (int d = 0; d < D; d += 8) {
    __m256 kd[P];
    for (int p = 0; p < P; ++p) kd[p] = _mm256_loadu_ps(k + (p0 + p) * kv_stride + d);
    for (int j = 0; j < J; ++j) {
      const __m256 qd = _mm256_loadu_ps(q[j] + d);
      for (int p = 0; p < P; ++p) acc[j * P + p] = _mm256_fmadd_ps(qd, kd[p], acc[j * P + p]);
    }
  }
  constexpr int kFull = J * P / 8 * 8;
  alignas(32) float s[8];
  for (int a0 = 0; a0 < kFull; a0 += 8) {
    _mm256_store_ps(s, hsum8(acc + a0));
    for (int i = 0; i < 8; ++i) {
      const int a = a0 + i;
      sc[(a / P) * ld + p0 + a % P] = s[kHsum8Lane[i]] * scale;
    }
  }
  for (int a = kFull; a < J * P; ++a) sc[(a / P) * ld + p0 + a % P] = hsum(acc[a]) * scale;
}

// out_j[d0 .. d0 + 8 DC) = sum_p w_j[p] v_p[...] for DC chunks of 8 dimensions, times inv_j.
template <int J, int DC>
inline void values_block(const float* sc, int64_t ld, const float* v, int64_t n, int64_t kv_stride, int d0,
                         const float* inv, float* const* out) {
  __m256 acc[J * DC];
  for (int a = 0; a < J * DC; ++a) acc[a] = _mm256_setzero_ps();
  for (int64_t p = 0; p < n; ++p) {
    __m256 vd[DC];
    for (int c = 0; c < DC; ++c) vd[c] = _mm256_loadu_ps(v + p * kv_stride + d0 + 8 * c);
    for (int j = 0; j < J; ++j) {
      const __m256 w = _mm256_set1_ps(sc[j * ld + p]);
      for (int c = 0; c < DC; ++c) acc[j * DC + c] = _mm256_fmadd_ps(w, vd[c], acc[j * DC + c]);
    }
  }
  for (int j = 0; j < J; ++j)
    for (int c = 0; c < DC; ++c)
      _mm256_storeu_ps(out[j] + d0 + 8 * c, _mm256_mul_ps(acc[j * DC + c], _mm256_set1_ps(inv[j])));
}

// The largest count c in {1, 2, 4, 8} whose blocks fit the registers: J * c accumulators, c loaded vectors and
// one broadcast or q vector.
constexpr int fit(int J, int regs) {
  int c = 1;
  while (c < 8 && (J + 1) * (2 * c) + 1 <= regs) c *= 2;
  return c;
}

template <int J, int kRegs>
void rows(const float* const* q, float* const* out, float* scores, int64_t ld, const float* k, const float* v,
          int64_t n, int64_t kv_stride, int D, float scale) {
  constexpr int P = fit(J, kRegs), DC = fit(J, kRegs);
  int64_t p = 0;
  for (; p + P <= n; p += P) scores_block<J, P>(q, k, p, kv_stride, D, scale, scores, ld);
  for (; p < n; ++p) scores_block<J, 1>(q, k, p, kv_stride, D, scale, scores, ld);
  float mx[J];
  double sum[J];
  for (int j = 0; j < J; ++j) {
    mx[j] = -INFINITY;
    sum[j] = 0.0;
  }
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < J; ++j) {
      const float s = scores[j * ld + i];
      mx[j] = s > mx[j] ? s : mx[j];
    }
  for (int64_t i = 0; i < n; ++i)  // the rows' sums interleaved: J independent chains
    for (int j = 0; j < J; ++j) {
      float& s = scores[j * ld + i];
      s = std::exp(s - mx[j]);
      sum[j] += s;
    }
  float inv[J];
  for (int j = 0; j < J; ++j) inv[j] = static_cast<float>(1.0 / sum[j]);
  const int chunks = D / 8;
  int c = 0;
  for (; c + DC <= chunks; c += DC) values_block<J, DC>(scores, ld, v, n, kv_stride, 8 * c, inv, out);
  for (; c < chunks; ++c) values_block<J, 1>(scores, ld, v, n, kv_stride, 8 * c, inv, out);
}

template <int kRegs>
void rows_any(int J, const float* const* q, float* const* out, float* scores, int64_t ld, const float* k,
              const float* v, int64_t n, int64_t kv_stride, int D, float scale) {
  switch (J) {
    case 1: return rows<1, kRegs>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 2: return rows<2, kRegs>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 3: return rows<3, kRegs>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 4: return rows<4, kRegs>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 5: return rows<5, kRegs>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 6: return rows<6, kRegs>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 7: return rows<7, kRegs>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    default: return rows<8, kRegs>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
  }
}

}  // namespace tritium::cpu::detail::attention_rows_impl
