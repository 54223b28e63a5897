// AMX-INT8 GEMM microkernel for the tiled ternary formats (compiled with -mamx-tile -mamx-int8 and the AVX-512
// flags; run only when dispatch.h's amx path says the CPU has AMX and Linux granted this process the tile state).
// GEMV, decoders and the rows AMX does not cover are the AVX-512 kernels (ternary_avx512.cpp).
//
// A decoded tile's codes, [kp / 4][64] bytes with byte 4 r + j = row r at k = 4 s + j, are already the B operand
// of TDPBSUD in its VNNI layout: 16 k-steps (64 k, 1 KiB) form one B tile of 16 rows x 64 bytes. Sixteen rows of
// x (int8, stride ldx) over the same 64 k form the A tile, and C[m][r] += sum_k x[m][k] * codes[r][k] is out's
// [row][16] layout. Tiles: C 0-3 (up to 64 rows of x), B 4, A 5-6 (alternating, so a load overlaps a TDPBSUD).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/ternary_kernels.h"

namespace tritium::cpu::detail {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Every tile is 16 rows x 64 bytes. The configuration is per thread and stays loaded (no other code of the
// process uses the tile registers).
void configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  TileConfig c;
  for (int i = 0; i < 7; ++i) c.rows[i] = 16, c.colsb[i] = 64;
  _tile_loadconfig(&c);
  configured = true;
}

// NB blocks of 16 x rows against the codes of k-steps [s0, s1) ((s1 - s0) % 16 == 0): out[(16 b + m) * 16 + r].
template <int NB>
void amx_blocks(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int32_t* out) {
  _tile_zero(0);
  if constexpr (NB > 1) _tile_zero(1);
  if constexpr (NB > 2) _tile_zero(2);
  if constexpr (NB > 3) _tile_zero(3);
  const int64_t blk = 16 * ldx;
  for (int64_t s = s0; s < s1; s += 16) {
    const int8_t* x = xp + 4 * s;
    _tile_loadd(4, codes + s * 64, 64);
    _tile_loadd(5, x, ldx);
    _tile_dpbsud(0, 5, 4);
    if constexpr (NB > 1) {
      _tile_loadd(6, x + blk, ldx);
      _tile_dpbsud(1, 6, 4);
    }
    if constexpr (NB > 2) {
      _tile_loadd(5, x + 2 * blk, ldx);
      _tile_dpbsud(2, 5, 4);
    }
    if constexpr (NB > 3) {
      _tile_loadd(6, x + 3 * blk, ldx);
      _tile_dpbsud(3, 6, 4);
    }
  }
  _tile_stored(0, out, 64);
  if constexpr (NB > 1) _tile_stored(1, out + 256, 64);
  if constexpr (NB > 2) _tile_stored(2, out + 512, 64);
  if constexpr (NB > 3) _tile_stored(3, out + 768, 64);
}

constexpr int kMaxBlocks = 4;

// The TernaryIsa::mm_codes contract for mb <= 64 rows: blocks of 16 rows (the last one partly the caller's zero
// padding, pad_rows 16) and whole 16-step chunks of k on the tiles, k-steps past the last whole chunk by the
// AVX-512 kernel.
void mm_codes(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int mb, int32_t* out) {
  const TernaryIsa& v = ternary_isa_avx512();
  const int nb = (mb + 15) / 16;
  const int64_t s_amx = s0 + (s1 - s0) / 16 * 16;
  if (nb > 0 && s_amx > s0) {
    configure_tiles();
    switch (nb) {
      case 1: amx_blocks<1>(codes, s0, s_amx, xp, ldx, out); break;
      case 2: amx_blocks<2>(codes, s0, s_amx, xp, ldx, out); break;
      case 3: amx_blocks<3>(codes, s0, s_amx, xp, ldx, out); break;
      default: amx_blocks<4>(codes, s0, s_amx, xp, ldx, out); break;
    }
    if (s_amx < s1) {  // the k-steps past the last whole chunk, added 16 rows at a time
      alignas(64) int32_t tail[16 * 16];
      for (int b = 0; b < nb; ++b) {
        const int rows = std::min(16, mb - 16 * b);
        v.mm_codes(codes, s_amx, s1, xp + 16 * b * ldx, ldx, rows, tail);
        for (int i = 0; i < 16 * rows; ++i) out[256 * b + i] += tail[i];
      }
    }
  } else {
    for (int b = 0; b < nb; ++b)
      v.mm_codes(codes, s0, s1, xp + 16 * b * ldx, ldx, std::min(16, mb - 16 * b), out + 256 * b);
  }
}

}  // namespace

const TernaryIsa& ternary_isa_amx() {
  static const TernaryIsa isa = [] {
    TernaryIsa t = ternary_isa_avx512();
    t.mm_codes = &mm_codes;
    t.mm_packed = nullptr;  // the tiles load row-major x
    t.max_mb = 16 * kMaxBlocks;
    t.pad_rows = 16;  // 2-15 rows run the AVX-512 register GEMM (rows_i2): at 4 rows the tiles, mostly padding,
                      // gave 132 ms per decode step of the 2B4T shape against its 87 ms (bench/RESULTS.md)
    return t;
  }();
  return isa;
}

}  // namespace tritium::cpu::detail
