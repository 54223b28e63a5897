// tritium formats: the "tcb" ternary layout (bit planes for the binary tensor-core MMA; host-side packing,
// no CUDA needed).
// Glossary of the GPU layouts: docs/formats.md, "GPU weight layouts (tc2, tcb)".
//
// W [N, K] with values in {-1, 0, +1} is stored as two bit planes, P (w == +1) and N (w == -1): 2 bits per
// weight, like tc2, but laid out as the A operand of mma.sync.m16n8k256.row.col.s32.b1.b1.s32.and.popc, so the
// GEMV loads them straight into MMA registers and spends no instruction on decoding.
// Rows are padded to Np = 16 * ceil(N / 16) (one 16-row tile per warp), K to Kp = 256 * ceil(K / 256) (one MMA
// k-step of 256). Storage: uint32 [Np / 16][Kp / 256][2 planes][32 lanes][4], one 512-byte A fragment per
// (tile, chunk, plane). In chunk c, lane (g = lane / 4, t = lane % 4) holds register r of the fragment:
// row g + 8 (r & 1), k-word h = r >> 1, and bit i of it is the weight at
//   k = 256 c + 128 h + 4 i + t.
// (the MMA's own k index 128 h + 32 t + i, permuted so that the activations' bit planes can be built from
// 128 consecutive k with warp ballots; see pack_tcb_activations). neg_count [Np] is the number of -1 weights of
// each row (the kernel's correction term, below).
//
// Activations enter as the 8 bit planes of their two's-complement int8 values (plane j = bit j, weight 2^j, and
// -2^7 for j = 7), one plane per MMA column n = j: uint32 [M][Kp / 256][32 lanes][2], lane (j = lane / 4,
// t = lane % 4), word h of chunk c: bit i = bit j of x[256 c + 128 h + 4 i + t] (a chunk's 32 lanes contiguous:
// one coalesced 256-byte load per warp). Per output the kernel computes
// D_j = popc(P & X_j) + popc(N & ~X_j) = popc(P & X_j) - popc(N & X_j) + popc(N) for all 8 columns with one
// MMA per plane, so sum_k w_k x_k = sum_j s_j 2^j D_j + neg_count (sum_j s_j 2^j = -1). Exact integers.
#pragma once

#include <cstdint>
#include <vector>

namespace tritium::cuda {

struct TcbShape {
  int64_t n = 0, k = 0, np = 0, kp = 0;
  static TcbShape of(int64_t n, int64_t k) { return {n, k, (n + 15) / 16 * 16, (k + 255) / 256 * 256}; }
  int64_t chunks() const { return kp / 256; }
  int64_t tiles() const { return np / 16; }
  int64_t words() const { return tiles() * chunks() * 2 * 32 * 4; }  // = np * kp / 16
  int64_t bytes() const { return words() * 4; }
  int64_t plane_words() const { return 32 * chunks() * 2; }  // activation bit planes per token
};

/// The tcb weights of one projection.
struct TcbWeights {
  std::vector<uint32_t> words;      // [TcbShape::words()]
  std::vector<int32_t> neg_count;   // [np]: number of -1 weights per row
};

/// Packs w (int8 [n, k], values in {-1, 0, 1}) into the tcb layout. Throws tritium::Error on a value outside
/// {-1, 0, 1} or a bad shape.
TcbWeights pack_tcb(const int8_t* w, int64_t n, int64_t k);

/// Inverse of pack_tcb (for tests): int8 [n, k].
std::vector<int8_t> unpack_tcb(const uint32_t* words, int64_t n, int64_t k);

/// Host-side activation bit planes of x (int8 [m, k]; for tests and benchmarks: on the GPU, norm_quant writes
/// them): uint32 [m * TcbShape::plane_words()].
std::vector<uint32_t> pack_tcb_activations(const int8_t* x, int64_t m, int64_t k);

}  // namespace tritium::cuda
