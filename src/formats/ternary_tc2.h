// tritium formats: the "tc2" ternary layout the CUDA kernels read (host-side packing, no CUDA needed).
// Glossary of the GPU layouts: docs/formats.md, "GPU weight layouts (tc2, tcb)".
//
// W [N, K] with values in {-1, 0, +1} is stored as 2-bit codes c = w + 1 (0, 1, 2; padding 1 = weight 0).
// Rows are padded to Np = 64 * ceil(N / 64) and K to Kp = 64 * ceil(K / 64). Storage: uint32 [Np][Kp / 16],
// row-major; word j of row n covers k = 16 j .. 16 j + 15, and in it byte b, bits 2g .. 2g+1 hold the code of
// k = 16 j + 4 g + b (g, b = 0..3). So (word >> 2g) & 0x03030303 is four int8 codes of four consecutive k,
// the operand of one dp4a with a 4-byte activation word, or one 4-element k-slice of an int8 MMA fragment
// (m16n8k32: a thread's B register of k-slice 4t..4t+3 is group g = t of word 2s or 2s + 1).
// A GEMV warp reads a row in 16-byte pieces (64 weights), 8 lanes per row fully coalesced.
// Size: Np * Kp / 4 bytes (2 bits/weight plus padding).
#pragma once

#include <cstdint>
#include <vector>

namespace tritium::cuda {

struct Tc2Shape {
  int64_t n = 0, k = 0, np = 0, kp = 0;
  static Tc2Shape of(int64_t n, int64_t k) { return {n, k, (n + 63) / 64 * 64, (k + 63) / 64 * 64}; }
  int64_t words() const { return np * kp / 16; }
  int64_t bytes() const { return words() * 4; }
};

/// Packs w (int8 [n, k], values in {-1, 0, 1}) into tc2 words [np * kp / 16]. Throws tritium::Error on a value
/// outside {-1, 0, 1}.
std::vector<uint32_t> pack_tc2(const int8_t* w, int64_t n, int64_t k);

/// Inverse of pack_tc2 (for tests): int8 [n, k].
std::vector<int8_t> unpack_tc2(const uint32_t* words, int64_t n, int64_t k);

}  // namespace tritium::cuda
