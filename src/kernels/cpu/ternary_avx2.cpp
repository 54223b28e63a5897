// AVX2 kernels for the tiled ternary formats (compiled with -mavx2 -mbmi2; run only when dispatch.h says
// the CPU has AVX2 + FMA + BMI2). A 64-byte k-step of codes is two 32-byte halves: rows 0-7 and rows 8-15.
// maddubs(codes u8, x s8) gives exact int16 pair sums (|c x + c' x'| <= 512, no saturation); a few of them
// are added in int16 (<= 2048), then madd with 1s widens to the int32 row sums.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/ternary_kernels.h"
#include "formats/ternary_tq1.h"

namespace tritium::cpu::detail {
namespace {

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i mul(__m256i codes, __m256i x) { return _mm256_maddubs_epi16(codes, x); }
inline __m256i widen(__m256i s16) { return _mm256_madd_epi16(s16, _mm256_set1_epi16(1)); }

inline void store_rows(__m256i lo, __m256i hi, int32_t* out) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), lo);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), hi);
}

// ---- i2 --------------------------------------------------------------------------------------------
// Adds blocks [b0, b1) of a 16-row tile (p: the tile's codes) times the activations to the int32 sums of rows
// 0-7 (alo) and 8-15 (ahi).
inline void i2_blocks(const uint8_t* p, int64_t b0, int64_t b1, const int8_t* xp, __m256i& alo, __m256i& ahi) {
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int64_t b = b0; b < b1; ++b) {
    const __m256i vl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + b * 64));
    const __m256i vh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + b * 64 + 32));
    const int8_t* xb = xp + b * 16;
    __m256i sl = _mm256_setzero_si256(), sh = sl;
    for (int q = 0; q < 4; ++q) {
      const __m256i x = bcast4(xb + 4 * q);
      const __m128i cnt = _mm_cvtsi32_si128(2 * q);
      sl = _mm256_add_epi16(sl, mul(_mm256_and_si256(_mm256_srl_epi16(vl, cnt), m3), x));
      sh = _mm256_add_epi16(sh, mul(_mm256_and_si256(_mm256_srl_epi16(vh, cnt), m3), x));
    }
    alo = _mm256_add_epi32(alo, widen(sl));
    ahi = _mm256_add_epi32(ahi, widen(sh));
  }
}

void gemv_i2(const TernaryView& w, int64_t t, int64_t g0, int64_t g1, const int8_t* xp, uint64_t*, int32_t* out) {
  const int64_t blocks = w.kp / 16;
  __m256i alo = _mm256_setzero_si256(), ahi = alo;
  i2_blocks(w.codes + t * blocks * 64, g0 * 8, g1 * 8, xp, alo, ahi);
  store_rows(alo, ahi, out);
}

void decode_i2(const TernaryView& w, int64_t t, uint8_t* out) {
  const int64_t blocks = w.kp / 16;
  const uint8_t* p = w.codes + t * blocks * 64;
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int64_t b = 0; b < blocks; ++b) {
    for (int h = 0; h < 2; ++h) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + b * 64 + 32 * h));
      for (int q = 0; q < 4; ++q) {
        const __m256i c = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * q)), m3);
        _mm256_store_si256(reinterpret_cast<__m256i*>(out + (4 * b + q) * 64 + 32 * h), c);
      }
    }
  }
}

// ---- tq1 -------------------------------------------------------------------------------------------
// Trit q of every byte: ((byte * 3^q) mod 256) * 3 >> 8 (see the AVX-512 file).
struct Tq1Half {
  __m256i wl, wh;
  void load(const uint8_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    wl = _mm256_slli_epi16(v, 8);
    wh = _mm256_and_si256(v, _mm256_set1_epi16(-256));
  }
  __m256i trit(int q) const {
    static constexpr short kPow[5] = {1, 3, 9, 27, 81};
    __m256i a = wl, b = wh;
    if (q > 0) {
      a = _mm256_mullo_epi16(a, _mm256_set1_epi16(kPow[q]));
      b = _mm256_mullo_epi16(b, _mm256_set1_epi16(kPow[q]));
    }
    const __m256i lo = _mm256_mulhi_epu16(a, _mm256_set1_epi16(3));
    const __m256i hi = _mm256_mulhi_epu16(b, _mm256_set1_epi16(768));
    return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi16(-256)));
  }
};

// Tail codes of a group: k-step 30 / 31, rows 0-7 (lo) and 8-15 (hi).
inline void tq1_tail(const uint8_t* p, __m256i c[2][2]) {
  const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i m3 = _mm256_set1_epi8(3);
  c[0][0] = _mm256_and_si256(y, m3);
  c[1][0] = _mm256_and_si256(_mm256_srli_epi16(y, 2), m3);
  c[0][1] = _mm256_and_si256(_mm256_srli_epi16(y, 4), m3);
  c[1][1] = _mm256_and_si256(_mm256_srli_epi16(y, 6), m3);
}

void gemv_tq1(const TernaryView& w, int64_t t, int64_t g0, int64_t g1, const int8_t* xp, uint64_t*, int32_t* out) {
  const int64_t G = w.kp / 128;
  __m256i alo = _mm256_setzero_si256(), ahi = alo;
  Tq1Half lo, hi;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* blk = w.codes + (t * G + g) * TernaryTQ1::kGroupBytes;
    const int8_t* xg = xp + g * 128;
    for (int s = 0; s < 6; ++s) {
      lo.load(blk + 64 * s);
      hi.load(blk + 64 * s + 32);
      __m256i sl = _mm256_setzero_si256(), sh = sl;
      for (int q = 0; q < 5; ++q) {
        const __m256i x = bcast4(xg + 20 * s + 4 * q);
        sl = _mm256_add_epi16(sl, mul(lo.trit(q), x));
        sh = _mm256_add_epi16(sh, mul(hi.trit(q), x));
      }
      alo = _mm256_add_epi32(alo, widen(sl));
      ahi = _mm256_add_epi32(ahi, widen(sh));
    }
    __m256i c[2][2];
    tq1_tail(blk + 384, c);
    const __m256i x0 = bcast4(xg + 120), x1 = bcast4(xg + 124);
    alo = _mm256_add_epi32(alo, widen(_mm256_add_epi16(mul(c[0][0], x0), mul(c[1][0], x1))));
    ahi = _mm256_add_epi32(ahi, widen(_mm256_add_epi16(mul(c[0][1], x0), mul(c[1][1], x1))));
  }
  store_rows(alo, ahi, out);
}

void decode_tq1(const TernaryView& w, int64_t t, uint8_t* out) {
  const int64_t G = w.kp / 128;
  Tq1Half h;
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* blk = w.codes + (t * G + g) * TernaryTQ1::kGroupBytes;
    uint8_t* o = out + g * 32 * 64;
    for (int s = 0; s < 6; ++s) {
      for (int half = 0; half < 2; ++half) {
        h.load(blk + 64 * s + 32 * half);
        for (int q = 0; q < 5; ++q) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(o + (5 * s + q) * 64 + 32 * half), h.trit(q));
        }
      }
    }
    __m256i c[2][2];
    tq1_tail(blk + 384, c);
    for (int q = 0; q < 2; ++q)
      for (int half = 0; half < 2; ++half)
        _mm256_store_si256(reinterpret_cast<__m256i*>(o + (30 + q) * 64 + 32 * half), c[q][half]);
  }
}

// ---- bitcos ----------------------------------------------------------------------------------------
inline uint64_t sign_window(const uint64_t* signs, uint64_t pos, uint64_t count) {
  if (count <= 57) [[likely]] {  // one unaligned 8-byte load holds >= 57 bits from pos on
    uint64_t v;
    std::memcpy(&v, reinterpret_cast<const uint8_t*>(signs) + (pos >> 3), 8);
    return v >> (pos & 7);
  }
  const uint64_t i = pos >> 6;
  const unsigned __int128 v = (static_cast<unsigned __int128>(signs[i + 1]) << 64) | signs[i];
  return static_cast<uint64_t>(v >> (pos & 63));
}

// 32 mask bits -> 32 bytes of 0xFF / 0x00.
inline __m256i expand_bits(uint32_t m) {
  const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                       3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(m)), sel);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// Codes c = 1 - P + 2 S from the presence bytes P and the negative bytes S (0 or -1 each).
inline __m256i bitcos_codes(uint32_t present, uint32_t neg) {
  const __m256i p = expand_bits(present), s = expand_bits(neg);
  return _mm256_add_epi8(_mm256_sub_epi8(_mm256_set1_epi8(1), p), _mm256_add_epi8(s, s));
}

struct BitcosStep {
  __m256i lo, hi;
};

inline BitcosStep bitcos_step(uint64_t present, const uint64_t* signs, uint64_t* pos) {
  const uint64_t count = static_cast<uint64_t>(_mm_popcnt_u64(present));
  const uint64_t neg = _pdep_u64(sign_window(signs, *pos, count), present);
  *pos += count;
  return {bitcos_codes(static_cast<uint32_t>(present), static_cast<uint32_t>(neg)),
          bitcos_codes(static_cast<uint32_t>(present >> 32), static_cast<uint32_t>(neg >> 32))};
}

void gemv_bitcos(const TernaryView& w, int64_t t, int64_t g0, int64_t g1, const int8_t* xp, uint64_t* sign_pos,
                 int32_t* out) {
  const int64_t steps = w.kp / 4;
  const uint64_t* bm = w.bitmap + t * steps;
  uint64_t pos = *sign_pos;
  __m256i alo = _mm256_setzero_si256(), ahi = alo;
  for (int64_t s = g0 * 32; s < g1 * 32; s += 4) {
    __m256i sl = _mm256_setzero_si256(), sh = sl;
    for (int u = 0; u < 4; ++u) {
      const BitcosStep c = bitcos_step(bm[s + u], w.signs, &pos);
      const __m256i x = bcast4(xp + 4 * (s + u));
      sl = _mm256_add_epi16(sl, mul(c.lo, x));
      sh = _mm256_add_epi16(sh, mul(c.hi, x));
    }
    alo = _mm256_add_epi32(alo, widen(sl));
    ahi = _mm256_add_epi32(ahi, widen(sh));
  }
  *sign_pos = pos;
  store_rows(alo, ahi, out);
}

void decode_bitcos(const TernaryView& w, int64_t t, uint8_t* out) {
  const int64_t steps = w.kp / 4;
  const uint64_t* bm = w.bitmap + t * steps;
  uint64_t pos = w.sign_offsets[t];
  for (int64_t s = 0; s < steps; ++s) {
    const BitcosStep c = bitcos_step(bm[s], w.signs, &pos);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + s * 64), c.lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + s * 64 + 32), c.hi);
  }
}

// ---- GEMM microkernel: MB rows of x against one decoded tile; pairs of k-steps summed in int16 ------
template <int MB>
void mm(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int32_t* out) {
  __m256i lo[MB], hi[MB];
  for (int i = 0; i < MB; ++i) lo[i] = hi[i] = _mm256_setzero_si256();
  for (int64_t s = s0; s < s1; s += 2) {  // ranges are whole groups: an even number of k-steps
    const uint8_t* c = codes + s * 64;
    const __m256i w0l = _mm256_load_si256(reinterpret_cast<const __m256i*>(c));
    const __m256i w0h = _mm256_load_si256(reinterpret_cast<const __m256i*>(c + 32));
    const __m256i w1l = _mm256_load_si256(reinterpret_cast<const __m256i*>(c + 64));
    const __m256i w1h = _mm256_load_si256(reinterpret_cast<const __m256i*>(c + 96));
    for (int i = 0; i < MB; ++i) {
      const int8_t* x = xp + i * ldx + 4 * s;
      const __m256i x0 = bcast4(x), x1 = bcast4(x + 4);
      lo[i] = _mm256_add_epi32(lo[i], widen(_mm256_add_epi16(mul(w0l, x0), mul(w1l, x1))));
      hi[i] = _mm256_add_epi32(hi[i], widen(_mm256_add_epi16(mul(w0h, x0), mul(w1h, x1))));
    }
  }
  for (int i = 0; i < MB; ++i) store_rows(lo[i], hi[i], out + 16 * i);
}

void mm4_groups(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int32_t* out);

void mm_codes(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int mb, int32_t* out) {
  switch (mb) {
    case 1: return mm<1>(codes, s0, s1, xp, ldx, out);
    case 2: return mm<2>(codes, s0, s1, xp, ldx, out);
    case 3: return mm<3>(codes, s0, s1, xp, ldx, out);
    case 4: return mm4_groups(codes, s0, s1, xp, ldx, out);
    default: break;
  }
}

// The group-scaled GEMM's per-group step (TernaryIsa::group_accumulate), in two halves of 8 rows. The empty asm
// keeps the product a separate rounding step (no fused multiply-add: the scalar oracle's arithmetic).
inline __m256 scaled(__m256i a, __m256 scale) {
  __m256 p = _mm256_mul_ps(scale, _mm256_cvtepi32_ps(a));
  asm("" : "+x"(p));
  return p;
}

void group_accumulate(const int32_t* out, int mb, const int32_t* sumx, int64_t G, const float* gs, float* s) {
  const __m256 scale[2] = {_mm256_loadu_ps(gs), _mm256_loadu_ps(gs + 8)};
  for (int i = 0; i < mb; ++i) {
    const __m256i sx = _mm256_set1_epi32(sumx[i * G]);
    for (int h = 0; h < 2; ++h) {
      const __m256i a = _mm256_sub_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(out + 16 * i + 8 * h)), sx);
      _mm256_storeu_ps(s + 16 * i + 8 * h, _mm256_add_ps(_mm256_loadu_ps(s + 16 * i + 8 * h), scaled(a, scale[h])));
    }
  }
}

// One group (32 k-steps) of a decoded tile against four rows of x (x0..x3 at the group's first k), summed in the
// 16-bit lanes maddubs produces: a lane holds sum over the group of c x + c' x' with c in {0, 1, 2} and x in
// [-128, 127], |.| <= 32 x 512 = 16,384, so the 16-bit sums are exact and are widened once per group. Per k-step
// and row that is 2 maddubs + 2 adds (mm: 2 maddubs + 1 add + 1 madd + 1 add). The empty asm keeps the eight sums
// in registers: without it GCC 12 shuffles them through spare registers and the stack every k-step (0.7x).
struct Rows4 {
  __m256i l0, l1, l2, l3, h0, h1, h2, h3;
};

__attribute__((always_inline)) inline Rows4 group_rows4(const uint8_t* c, const int8_t* x0, const int8_t* x1,
                                                        const int8_t* x2, const int8_t* x3) {
  __m256i l0 = _mm256_setzero_si256(), l1 = l0, l2 = l0, l3 = l0, h0 = l0, h1 = l0, h2 = l0, h3 = l0;
  for (int st = 0; st < 32; ++st) {
    const __m256i wl = _mm256_load_si256(reinterpret_cast<const __m256i*>(c + st * 64));
    const __m256i wh = _mm256_load_si256(reinterpret_cast<const __m256i*>(c + st * 64 + 32));
    __m256i x = bcast4(x0 + 4 * st);
    l0 = _mm256_add_epi16(l0, mul(wl, x));
    h0 = _mm256_add_epi16(h0, mul(wh, x));
    x = bcast4(x1 + 4 * st);
    l1 = _mm256_add_epi16(l1, mul(wl, x));
    h1 = _mm256_add_epi16(h1, mul(wh, x));
    x = bcast4(x2 + 4 * st);
    l2 = _mm256_add_epi16(l2, mul(wl, x));
    h2 = _mm256_add_epi16(h2, mul(wh, x));
    x = bcast4(x3 + 4 * st);
    l3 = _mm256_add_epi16(l3, mul(wl, x));
    h3 = _mm256_add_epi16(h3, mul(wh, x));
    asm("" : "+x"(l0), "+x"(l1), "+x"(l2), "+x"(l3), "+x"(h0), "+x"(h1), "+x"(h2), "+x"(h3));
  }
  return {l0, l1, l2, l3, h0, h1, h2, h3};
}

// mm_codes for four rows: the group sums of group_rows4 widened and added to the int32 sums in out.
void mm4_groups(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int32_t* out) {
  std::memset(out, 0, 4 * 16 * sizeof(int32_t));
  for (int64_t s = s0; s < s1; s += 32) {
    const Rows4 r = group_rows4(codes + s * 64, xp + 4 * s, xp + ldx + 4 * s, xp + 2 * ldx + 4 * s,
                                xp + 3 * ldx + 4 * s);
    const __m256i lo[4] = {r.l0, r.l1, r.l2, r.l3}, hi[4] = {r.h0, r.h1, r.h2, r.h3};
    for (int i = 0; i < 4; ++i) {
      __m256i* o = reinterpret_cast<__m256i*>(out + 16 * i);
      _mm256_storeu_si256(o, _mm256_add_epi32(_mm256_loadu_si256(o), widen(lo[i])));
      _mm256_storeu_si256(o + 1, _mm256_add_epi32(_mm256_loadu_si256(o + 1), widen(hi[i])));
    }
  }
}

// TernaryIsa::mm_grouped: four rows at a time through group_rows4, then each group's scaled step; fewer rows
// through mm and group_accumulate.
void mm_grouped(const uint8_t* codes, int64_t G, const int8_t* xp, int64_t ldx, int mb, const int32_t* sumx,
                const float* gs, float* s) {
  if (mb != 4) {
    alignas(32) int32_t out[16 * 4];
    for (int64_t g = 0; g < G; ++g) {
      mm_codes(codes, g * 32, (g + 1) * 32, xp, ldx, mb, out);
      group_accumulate(out, mb, sumx + g, G, gs + g * 16, s);
    }
    return;
  }
  for (int64_t g = 0; g < G; ++g) {
    const int64_t k = g * kTernaryGroupK;
    const Rows4 r = group_rows4(codes + g * 32 * 64, xp + k, xp + ldx + k, xp + 2 * ldx + k, xp + 3 * ldx + k);
    const __m256i lo[4] = {r.l0, r.l1, r.l2, r.l3}, hi[4] = {r.h0, r.h1, r.h2, r.h3};
    const __m256 sl = _mm256_loadu_ps(gs + g * 16), sh = _mm256_loadu_ps(gs + g * 16 + 8);
    for (int i = 0; i < 4; ++i) {
      const __m256i sx = _mm256_set1_epi32(sumx[i * G + g]);
      float* si = s + 16 * i;
      _mm256_storeu_ps(si, _mm256_add_ps(_mm256_loadu_ps(si), scaled(_mm256_sub_epi32(widen(lo[i]), sx), sl)));
      _mm256_storeu_ps(si + 8,
                       _mm256_add_ps(_mm256_loadu_ps(si + 8), scaled(_mm256_sub_epi32(widen(hi[i]), sx), sh)));
    }
  }
}

// gemv_i2 with the group's sums scaled and added as each group of 8 blocks ends (TernaryIsa::gemv_i2_grouped).
void gemv_i2_grouped(const TernaryView& w, int64_t t, const int8_t* xp, const int32_t* sumx, const float* gs,
                     float* s) {
  const int64_t blocks = w.kp / 16, G = blocks / 8;
  const uint8_t* p = w.codes + t * blocks * 64;
  __m256 flo = _mm256_setzero_ps(), fhi = flo;
  for (int64_t g = 0; g < G; ++g) {
    __m256i alo = _mm256_setzero_si256(), ahi = alo;
    i2_blocks(p, g * 8, g * 8 + 8, xp, alo, ahi);
    const __m256i sx = _mm256_set1_epi32(sumx[g]);
    flo = _mm256_add_ps(flo, scaled(_mm256_sub_epi32(alo, sx), _mm256_loadu_ps(gs + g * 16)));
    fhi = _mm256_add_ps(fhi, scaled(_mm256_sub_epi32(ahi, sx), _mm256_loadu_ps(gs + g * 16 + 8)));
  }
  _mm256_storeu_ps(s, flo);
  _mm256_storeu_ps(s + 8, fhi);
}

// fp16 -> float32 (F16C), exact.
void widen_f16(const uint16_t* h, int64_t n, float* f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) f[i] = _cvtsh_ss(h[i]);
}

}  // namespace

const TernaryIsa& ternary_isa_avx2() {
  static const TernaryIsa isa = [] {
    TernaryIsa t{&gemv_i2,   &gemv_tq1,   &gemv_bitcos, &decode_i2,
                 &decode_tq1, &decode_bitcos, &mm_codes, 4};
    t.group_accumulate = &group_accumulate;
    t.gemv_i2_grouped = &gemv_i2_grouped;
    t.widen_f16 = &widen_f16;
    t.mm_grouped = &mm_grouped;
    return t;
  }();
  return isa;
}

}  // namespace tritium::cpu::detail
