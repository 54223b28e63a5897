// tritium kernels/cpu: what the q4 and q6 head GEMMs (q4_gemm.h, q6_gemm.h) share around their SIMD row kernels:
// the activations' per-group offsets and the walk over tiles of rows and tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tritium::cpu {

/// The int32 count per token of grouped_head_offsets for K columns.
inline int64_t grouped_head_offset_stride(int64_t K) { return (K / 32 + 3) / 4 * 8; }

/// The codes' bias (u = q + bias) as activation sums, the xoff input of grouped_head::rows (grouped_head_avx2.h):
/// int32 [M, ceil(G / 4) * 8] for x int8 [M, K], G = K / 32 groups; for each 4 groups g..g+3, -(bias / 2) * (sum
/// of x over group g + i) at i and 4 + i, 0 past the last group. bias must be even.
std::vector<int32_t> grouped_head_offsets(const int8_t* x, int64_t M, int64_t K, int32_t bias);

/// Calls tile(m, T, r0, r1) for tokens [m, m + T), T <= 4, and rows [r0, r1) so that every row of [0, N) meets
/// every token once: rows in chunks of 128 (a q6 chunk is 312 KB at K = 2560, so it stays in L2 while each tile of
/// tokens passes over it), chunks spread over the threads (core/parallel.h).
void for_each_head_tile(int64_t N, int64_t M, const std::function<void(int64_t, int, int64_t, int64_t)>& tile);

}  // namespace tritium::cpu
