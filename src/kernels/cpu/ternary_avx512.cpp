// AVX-512 VNNI kernels for the tiled ternary formats (compiled with -mavx512* -mbmi2; run only when
// dispatch.h says the CPU has AVX-512 F/BW/VL/VNNI + BMI2). Weights become codes c = w + 1 in lane order
// (byte 4 r + j = row r, k = 4 s + j), and vpdpbusd(acc, codes, broadcast x[4 s .. 4 s + 3]) leaves the
// 16 row sums of the tile in the 16 int32 lanes of acc.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/ternary_kernels.h"
#include "formats/ternary_tq1.h"

namespace tritium::cpu::detail {
namespace {

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

inline __m512i dp(__m512i acc, __m512i codes, const int8_t* x) { return _mm512_dpbusd_epi32(acc, codes, bcast4(x)); }


// ---- i2 --------------------------------------------------------------------------------------------
// The GEMV streams the codes once, so it runs at the rate memory delivers them: the hardware prefetcher alone
// leaves one core waiting on loads (1-thread decode of the 2B4T shape 9.3-10.0 tok/s without, 11.4-11.6 with a
// software prefetch 2 KiB ahead; bench/RESULTS.md). Prefetches past the end of the codes do not fault.
constexpr int64_t kPrefetchBytes = 2048;

// Blocks [b0, b1) of a 16-row tile (p: the tile's codes) times the activations: the 16 rows' int32 sums.
inline __m512i i2_blocks(const uint8_t* p, int64_t b0, int64_t b1, const int8_t* xp) {
  const __m512i m3 = _mm512_set1_epi8(3);
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t b = b0; b < b1; ++b) {
    _mm_prefetch(reinterpret_cast<const char*>(p + b * 64 + kPrefetchBytes), _MM_HINT_T0);
    const __m512i v = _mm512_loadu_si512(p + b * 64);
    const int8_t* xb = xp + b * 16;
    a0 = dp(a0, _mm512_and_si512(v, m3), xb);
    a1 = dp(a1, _mm512_and_si512(_mm512_srli_epi16(v, 2), m3), xb + 4);
    a2 = dp(a2, _mm512_and_si512(_mm512_srli_epi16(v, 4), m3), xb + 8);
    a3 = dp(a3, _mm512_and_si512(_mm512_srli_epi16(v, 6), m3), xb + 12);
  }
  return _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3));
}

void gemv_i2(const TernaryView& w, int64_t t, int64_t g0, int64_t g1, const int8_t* xp, uint64_t*, int32_t* out) {
  const int64_t blocks = w.kp / 16;
  _mm512_storeu_si512(out, i2_blocks(w.codes + t * blocks * 64, g0 * 8, g1 * 8, xp));
}

void decode_i2(const TernaryView& w, int64_t t, uint8_t* out) {
  const int64_t blocks = w.kp / 16;
  const uint8_t* p = w.codes + t * blocks * 64;
  const __m512i m3 = _mm512_set1_epi8(3);
  for (int64_t b = 0; b < blocks; ++b) {
    const __m512i v = _mm512_loadu_si512(p + b * 64);
    uint8_t* o = out + b * 256;
    _mm512_store_si512(o, _mm512_and_si512(v, m3));
    _mm512_store_si512(o + 64, _mm512_and_si512(_mm512_srli_epi16(v, 2), m3));
    _mm512_store_si512(o + 128, _mm512_and_si512(_mm512_srli_epi16(v, 4), m3));
    _mm512_store_si512(o + 192, _mm512_and_si512(_mm512_srli_epi16(v, 6), m3));
  }
}

// A few rows (decode batches) straight from the i2 codes: every 64-byte block is unpacked in registers as in the
// GEMV and used for each row, so no decoded tile is written and read back (at 4 rows that round trip took more
// time than the arithmetic). Sums are of int32, so any order gives the GEMV's and the tiled GEMM's values.
// Accumulator sets over the four sub-steps keep enough independent vpdpbusd chains at 2-4 rows.
template <int MB>
void rows_i2_mb(const TernaryView& w, int64_t t, const int8_t* xp, int64_t ldx, int32_t* out) {
  constexpr int kSets = MB <= 2 ? 4 : MB <= 4 ? 2 : 1;
  const int64_t blocks = w.kp / 16;
  const uint8_t* p = w.codes + t * blocks * 64;
  const __m512i m3 = _mm512_set1_epi8(3);
  __m512i acc[kSets][MB];
  for (int u = 0; u < kSets; ++u)
    for (int i = 0; i < MB; ++i) acc[u][i] = _mm512_setzero_si512();
  for (int64_t b = 0; b < blocks; ++b) {
    _mm_prefetch(reinterpret_cast<const char*>(p + b * 64 + kPrefetchBytes), _MM_HINT_T0);
    const __m512i v = _mm512_loadu_si512(p + b * 64);
    const __m512i c[4] = {_mm512_and_si512(v, m3), _mm512_and_si512(_mm512_srli_epi16(v, 2), m3),
                          _mm512_and_si512(_mm512_srli_epi16(v, 4), m3),
                          _mm512_and_si512(_mm512_srli_epi16(v, 6), m3)};
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < MB; ++i) acc[j % kSets][i] = dp(acc[j % kSets][i], c[j], xp + i * ldx + b * 16 + 4 * j);
  }
  for (int i = 0; i < MB; ++i) {
    __m512i a = acc[0][i];
    for (int u = 1; u < kSets; ++u) a = _mm512_add_epi32(a, acc[u][i]);
    _mm512_storeu_si512(out + 16 * i, a);
  }
}

void rows_i2(const TernaryView& w, int64_t t, const int8_t* xp, int64_t ldx, int mb, int32_t* out) {
  switch (mb) {
#define TRITIUM_ROWS_CASE(n) \
  case n: return rows_i2_mb<n>(w, t, xp, ldx, out);
    TRITIUM_ROWS_CASE(2) TRITIUM_ROWS_CASE(3) TRITIUM_ROWS_CASE(4) TRITIUM_ROWS_CASE(5) TRITIUM_ROWS_CASE(6)
    TRITIUM_ROWS_CASE(7) TRITIUM_ROWS_CASE(8) TRITIUM_ROWS_CASE(9) TRITIUM_ROWS_CASE(10) TRITIUM_ROWS_CASE(11)
    TRITIUM_ROWS_CASE(12) TRITIUM_ROWS_CASE(13) TRITIUM_ROWS_CASE(14) TRITIUM_ROWS_CASE(15)
#undef TRITIUM_ROWS_CASE
    default: break;
  }
}

// ---- tq1 -------------------------------------------------------------------------------------------
// Trit q of every byte: ((byte * 3^q) mod 256) * 3 >> 8, done in 16-bit lanes for the low byte (held as
// lo << 8) and the high byte (hi << 8) separately, then merged.
struct Tq1Decoder {
  __m512i three = _mm512_set1_epi16(3), k768 = _mm512_set1_epi16(768), hi_mask = _mm512_set1_epi16(-256);
  __m512i m3 = _mm512_set1_epi8(3);
  __m512i wl, wh;
  void load(const uint8_t* p) {
    const __m512i v = _mm512_loadu_si512(p);
    wl = _mm512_slli_epi16(v, 8);
    wh = _mm512_and_si512(v, hi_mask);
  }
  template <int Q>
  __m512i trit() const {
    constexpr short kPow[5] = {1, 3, 9, 27, 81};
    __m512i a = wl, b = wh;
    if constexpr (Q > 0) {
      a = _mm512_mullo_epi16(a, _mm512_set1_epi16(kPow[Q]));
      b = _mm512_mullo_epi16(b, _mm512_set1_epi16(kPow[Q]));
    }
    const __m512i lo = _mm512_mulhi_epu16(a, three);  // ((lo * 3^q mod 256) * 3) >> 8 in the low byte
    const __m512i hi = _mm512_mulhi_epu16(b, k768);   // ... of the high byte, in the high byte
    return _mm512_ternarylogic_epi32(lo, hi, hi_mask, 0xF8);  // lo | (hi & 0xFF00)
  }
  // The 2-bit tail of a group: codes of k-steps 30 and 31.
  void tail(const uint8_t* p, __m512i* c0, __m512i* c1) const {
    // Lanes 0-31 get the 32 tail bytes, lanes 32-63 the same bytes shifted right by 4.
    // (Two masked loads: the second reads the same 32 bytes into the upper half; p - 32 is inside the group.)
    const __m512i lo = _mm512_maskz_loadu_epi64(0x0F, p);
    const __m512i both = _mm512_mask_loadu_epi64(lo, 0xF0, p - 32);
    const __m512i v = _mm512_mask_srli_epi16(both, 0xFFFF0000u, both, 4);
    *c0 = _mm512_and_si512(v, m3);
    *c1 = _mm512_and_si512(_mm512_srli_epi16(v, 2), m3);
  }
};

void gemv_tq1(const TernaryView& w, int64_t t, int64_t g0, int64_t g1, const int8_t* xp, uint64_t*, int32_t* out) {
  const int64_t G = w.kp / 128;
  Tq1Decoder d;
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* blk = w.codes + (t * G + g) * TernaryTQ1::kGroupBytes;
    const int8_t* xg = xp + g * 128;
    for (int s = 0; s < 6; ++s) {
      d.load(blk + 64 * s);
      const int8_t* xs = xg + 20 * s;
      a0 = dp(a0, d.trit<0>(), xs);
      a1 = dp(a1, d.trit<1>(), xs + 4);
      a2 = dp(a2, d.trit<2>(), xs + 8);
      a3 = dp(a3, d.trit<3>(), xs + 12);
      a4 = dp(a4, d.trit<4>(), xs + 16);
    }
    __m512i c0, c1;
    d.tail(blk + 384, &c0, &c1);
    a0 = dp(a0, c0, xg + 120);
    a1 = dp(a1, c1, xg + 124);
  }
  const __m512i s = _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(_mm512_add_epi32(a2, a3), a4));
  _mm512_storeu_si512(out, s);
}

void decode_tq1(const TernaryView& w, int64_t t, uint8_t* out) {
  const int64_t G = w.kp / 128;
  Tq1Decoder d;
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* blk = w.codes + (t * G + g) * TernaryTQ1::kGroupBytes;
    uint8_t* o = out + g * 32 * 64;
    for (int s = 0; s < 6; ++s) {
      d.load(blk + 64 * s);
      uint8_t* os = o + 5 * s * 64;
      _mm512_store_si512(os, d.trit<0>());
      _mm512_store_si512(os + 64, d.trit<1>());
      _mm512_store_si512(os + 128, d.trit<2>());
      _mm512_store_si512(os + 192, d.trit<3>());
      _mm512_store_si512(os + 256, d.trit<4>());
    }
    __m512i c0, c1;
    d.tail(blk + 384, &c0, &c1);
    _mm512_store_si512(o + 30 * 64, c0);
    _mm512_store_si512(o + 31 * 64, c1);
  }
}

// ---- bitcos ----------------------------------------------------------------------------------------
// The next `count` (<= 64) sign bits from bit `pos` of the stream: usually one unaligned load + shift, else
// two aligned word loads + a 128-bit funnel shift (the stream has zero padding for both reads).
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

struct BitcosDecoder {
  __m512i ones = _mm512_set1_epi8(1), twos = _mm512_set1_epi8(2), zero = _mm512_setzero_si512();
  const uint64_t* signs;
  uint64_t pos;
  // Codes of one k-step: 2 where present, then 0 where present and negative (pdep puts the compacted sign
  // bits onto the set bitmap bits), 1 elsewhere.
  __m512i step(uint64_t present) {
    const uint64_t count = static_cast<uint64_t>(_mm_popcnt_u64(present));
    const uint64_t neg = _pdep_u64(sign_window(signs, pos, count), present);
    pos += count;
    const __m512i c = _mm512_mask_mov_epi8(ones, _cvtu64_mask64(present), twos);
    return _mm512_mask_mov_epi8(c, _cvtu64_mask64(neg), zero);
  }
};

void gemv_bitcos(const TernaryView& w, int64_t t, int64_t g0, int64_t g1, const int8_t* xp, uint64_t* sign_pos,
                 int32_t* out) {
  const int64_t steps = w.kp / 4;
  const uint64_t* bm = w.bitmap + t * steps;
  BitcosDecoder d;
  d.signs = w.signs;
  d.pos = *sign_pos;
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (int64_t s = g0 * 32; s < g1 * 32; s += 4) {
    a0 = dp(a0, d.step(bm[s]), xp + 4 * s);
    a1 = dp(a1, d.step(bm[s + 1]), xp + 4 * s + 4);
    a2 = dp(a2, d.step(bm[s + 2]), xp + 4 * s + 8);
    a3 = dp(a3, d.step(bm[s + 3]), xp + 4 * s + 12);
  }
  *sign_pos = d.pos;
  _mm512_storeu_si512(out, _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)));
}

void decode_bitcos(const TernaryView& w, int64_t t, uint8_t* out) {
  const int64_t steps = w.kp / 4;
  const uint64_t* bm = w.bitmap + t * steps;
  BitcosDecoder d;
  d.signs = w.signs;
  d.pos = w.sign_offsets[t];
  for (int64_t s = 0; s < steps; ++s) _mm512_store_si512(out + s * 64, d.step(bm[s]));
}

// ---- GEMM microkernel: MB rows of x against one decoded tile -----------------------------------------
// Row i's k-step s at xp + i * ldx + s * step: row-major x (ldx, 4) or x packed by k-step (4, 64). The k-step
// ranges are whole groups of 32 (an even count).
template <int MB>
void mm(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int64_t step, int32_t* out) {
  // Few rows: two accumulator sets over even / odd k-steps hide the vpdpbusd latency.
  constexpr int kSets = MB <= 4 ? 2 : 1;
  __m512i acc[kSets][MB];
  for (int u = 0; u < kSets; ++u)
    for (int i = 0; i < MB; ++i) acc[u][i] = _mm512_setzero_si512();
  for (int64_t s = s0; s < s1; s += kSets) {
    for (int u = 0; u < kSets; ++u) {
      const __m512i wv = _mm512_load_si512(codes + (s + u) * 64);
      for (int i = 0; i < MB; ++i) acc[u][i] = dp(acc[u][i], wv, xp + i * ldx + (s + u) * step);
    }
  }
  for (int i = 0; i < MB; ++i) {
    __m512i a = acc[0][i];
    if constexpr (kSets == 2) a = _mm512_add_epi32(a, acc[1][i]);
    _mm512_storeu_si512(out + 16 * i, a);
  }
}

// Sixteen rows of x packed by k-step (TernaryIsa::mm_packed: a k-step of the 16 rows is one 64-byte line, so the
// loop keeps one x pointer and one code pointer, and each row's 4 bytes are a broadcast at a constant offset),
// the whole tile in asm: the 16 accumulators in zmm16-31, per k-step one 64-byte code load and
// sixteen vpdpbusd, each with its row's 4 bytes as an embedded broadcast. With intrinsics GCC 12 gives each
// vpdpbusd's accumulator a new register and copies it back every iteration, and keeps the accumulator array's
// memory copy up to date inside the loop (16 register moves and up to 16 stores per 16 multiplies).
void mm_packed16(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xk, int32_t* out) {
  const uint8_t* c = codes + s0 * 64;
  const int8_t* x = xk + s0 * 64;
  int64_t n = s1 - s0;
  if (n <= 0) {
    std::memset(out, 0, 16 * 16 * sizeof(int32_t));
    return;
  }
  asm volatile(
      "vpxord %%zmm16, %%zmm16, %%zmm16\n\t"
      "vpxord %%zmm17, %%zmm17, %%zmm17\n\t"
      "vpxord %%zmm18, %%zmm18, %%zmm18\n\t"
      "vpxord %%zmm19, %%zmm19, %%zmm19\n\t"
      "vpxord %%zmm20, %%zmm20, %%zmm20\n\t"
      "vpxord %%zmm21, %%zmm21, %%zmm21\n\t"
      "vpxord %%zmm22, %%zmm22, %%zmm22\n\t"
      "vpxord %%zmm23, %%zmm23, %%zmm23\n\t"
      "vpxord %%zmm24, %%zmm24, %%zmm24\n\t"
      "vpxord %%zmm25, %%zmm25, %%zmm25\n\t"
      "vpxord %%zmm26, %%zmm26, %%zmm26\n\t"
      "vpxord %%zmm27, %%zmm27, %%zmm27\n\t"
      "vpxord %%zmm28, %%zmm28, %%zmm28\n\t"
      "vpxord %%zmm29, %%zmm29, %%zmm29\n\t"
      "vpxord %%zmm30, %%zmm30, %%zmm30\n\t"
      "vpxord %%zmm31, %%zmm31, %%zmm31\n\t"
      "1:\n\t"
      "vmovdqa64 (%[c]), %%zmm0\n\t"
      "vpdpbusd 0(%[x])%{1to16%}, %%zmm0, %%zmm16\n\t"
      "vpdpbusd 4(%[x])%{1to16%}, %%zmm0, %%zmm17\n\t"
      "vpdpbusd 8(%[x])%{1to16%}, %%zmm0, %%zmm18\n\t"
      "vpdpbusd 12(%[x])%{1to16%}, %%zmm0, %%zmm19\n\t"
      "vpdpbusd 16(%[x])%{1to16%}, %%zmm0, %%zmm20\n\t"
      "vpdpbusd 20(%[x])%{1to16%}, %%zmm0, %%zmm21\n\t"
      "vpdpbusd 24(%[x])%{1to16%}, %%zmm0, %%zmm22\n\t"
      "vpdpbusd 28(%[x])%{1to16%}, %%zmm0, %%zmm23\n\t"
      "vpdpbusd 32(%[x])%{1to16%}, %%zmm0, %%zmm24\n\t"
      "vpdpbusd 36(%[x])%{1to16%}, %%zmm0, %%zmm25\n\t"
      "vpdpbusd 40(%[x])%{1to16%}, %%zmm0, %%zmm26\n\t"
      "vpdpbusd 44(%[x])%{1to16%}, %%zmm0, %%zmm27\n\t"
      "vpdpbusd 48(%[x])%{1to16%}, %%zmm0, %%zmm28\n\t"
      "vpdpbusd 52(%[x])%{1to16%}, %%zmm0, %%zmm29\n\t"
      "vpdpbusd 56(%[x])%{1to16%}, %%zmm0, %%zmm30\n\t"
      "vpdpbusd 60(%[x])%{1to16%}, %%zmm0, %%zmm31\n\t"
      "add $64, %[c]\n\t"
      "add $64, %[x]\n\t"
      "dec %[n]\n\t"
      "jnz 1b\n\t"
      "vmovdqu64 %%zmm16, 0(%[out])\n\t"
      "vmovdqu64 %%zmm17, 64(%[out])\n\t"
      "vmovdqu64 %%zmm18, 128(%[out])\n\t"
      "vmovdqu64 %%zmm19, 192(%[out])\n\t"
      "vmovdqu64 %%zmm20, 256(%[out])\n\t"
      "vmovdqu64 %%zmm21, 320(%[out])\n\t"
      "vmovdqu64 %%zmm22, 384(%[out])\n\t"
      "vmovdqu64 %%zmm23, 448(%[out])\n\t"
      "vmovdqu64 %%zmm24, 512(%[out])\n\t"
      "vmovdqu64 %%zmm25, 576(%[out])\n\t"
      "vmovdqu64 %%zmm26, 640(%[out])\n\t"
      "vmovdqu64 %%zmm27, 704(%[out])\n\t"
      "vmovdqu64 %%zmm28, 768(%[out])\n\t"
      "vmovdqu64 %%zmm29, 832(%[out])\n\t"
      "vmovdqu64 %%zmm30, 896(%[out])\n\t"
      "vmovdqu64 %%zmm31, 960(%[out])\n\t"
      : [c] "+r"(c), [x] "+r"(x), [n] "+r"(n)
      : [out] "r"(out)
      : "cc", "memory", "xmm0", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31");
}

void mm_packed_rows(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xk, int mb, int32_t* out) {
  switch (mb) {
#define TRITIUM_MM_CASE(n) \
  case n: return mm<n>(codes, s0, s1, xk, 4, 64, out);
    TRITIUM_MM_CASE(1) TRITIUM_MM_CASE(2) TRITIUM_MM_CASE(3) TRITIUM_MM_CASE(4) TRITIUM_MM_CASE(5)
    TRITIUM_MM_CASE(6) TRITIUM_MM_CASE(7) TRITIUM_MM_CASE(8) TRITIUM_MM_CASE(9) TRITIUM_MM_CASE(10)
    TRITIUM_MM_CASE(11) TRITIUM_MM_CASE(12) TRITIUM_MM_CASE(13) TRITIUM_MM_CASE(14) TRITIUM_MM_CASE(15)
    case 16: return mm_packed16(codes, s0, s1, xk, out);
#undef TRITIUM_MM_CASE
    default: break;
  }
}

void mm_codes(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int mb, int32_t* out) {
  switch (mb) {
#define TRITIUM_MM_CASE(n) \
  case n: return mm<n>(codes, s0, s1, xp, ldx, 4, out);
    TRITIUM_MM_CASE(1) TRITIUM_MM_CASE(2) TRITIUM_MM_CASE(3) TRITIUM_MM_CASE(4) TRITIUM_MM_CASE(5)
    TRITIUM_MM_CASE(6) TRITIUM_MM_CASE(7) TRITIUM_MM_CASE(8) TRITIUM_MM_CASE(9) TRITIUM_MM_CASE(10)
    TRITIUM_MM_CASE(11) TRITIUM_MM_CASE(12) TRITIUM_MM_CASE(13) TRITIUM_MM_CASE(14) TRITIUM_MM_CASE(15)
    TRITIUM_MM_CASE(16)
#undef TRITIUM_MM_CASE
    default: break;
  }
}

// The group-scaled GEMM's per-group step (TernaryIsa::group_accumulate). The empty asm keeps the product a separate
// rounding step (the compiler would otherwise be free to fuse the multiplication and the addition, which rounds
// once and differs from the scalar oracle).
inline __m512 scaled(__m512i a, __m512 scale) {
  __m512 p = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(a));
  asm("" : "+v"(p));
  return p;
}

void group_accumulate(const int32_t* out, int mb, const int32_t* sumx, int64_t G, const float* gs, float* s) {
  const __m512 scale = _mm512_loadu_ps(gs);
  for (int i = 0; i < mb; ++i) {
    const __m512i a = _mm512_sub_epi32(_mm512_loadu_si512(out + 16 * i), _mm512_set1_epi32(sumx[i * G]));
    _mm512_storeu_ps(s + 16 * i, _mm512_add_ps(_mm512_loadu_ps(s + 16 * i), scaled(a, scale)));
  }
}

// gemv_i2 with the group's sums scaled and added as each group of 8 blocks ends (TernaryIsa::gemv_i2_grouped).
void gemv_i2_grouped(const TernaryView& w, int64_t t, const int8_t* xp, const int32_t* sumx, const float* gs,
                     float* s) {
  const int64_t blocks = w.kp / 16, G = blocks / 8;
  const uint8_t* p = w.codes + t * blocks * 64;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    const __m512i a = _mm512_sub_epi32(i2_blocks(p, g * 8, g * 8 + 8, xp), _mm512_set1_epi32(sumx[g]));
    acc = _mm512_add_ps(acc, scaled(a, _mm512_loadu_ps(gs + g * 16)));
  }
  _mm512_storeu_ps(s, acc);
}

// fp16 -> float32 (F16C), exact.
void widen_f16(const uint16_t* h, int64_t n, float* f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(f + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) f[i] = _cvtsh_ss(h[i]);
}

}  // namespace

const TernaryIsa& ternary_isa_avx512() {
  static const TernaryIsa isa = [] {
    TernaryIsa t{&gemv_i2,   &gemv_tq1, &gemv_bitcos, &decode_i2, &decode_tq1,
                 &decode_bitcos, &mm_codes, 16, &mm_packed_rows, &rows_i2, 15};
    t.group_accumulate = &group_accumulate;
    t.gemv_i2_grouped = &gemv_i2_grouped;
    t.widen_f16 = &widen_f16;
    return t;
  }();
  return isa;
}

}  // namespace tritium::cpu::detail
