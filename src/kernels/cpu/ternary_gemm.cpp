// Drives the tiled ternary kernels: activation padding, the code-sum correction, threading over tiles,
// GEMV (M = 1, streaming) vs GEMM (M >= 2, decode a tile once, reuse it for all rows of x), and the
// group-scale combination (done here, in plain scalar code, so that every path rounds identically).
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/scratch.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ternary_kernels.h"

namespace tritium::cpu {
namespace {

// x [M, K] copied into xp [M, kp] with zero padding (unless copy is false: then xp is null), per-group sums
// sumx [M, G] of x and their totals row_sum [M] (the code-sum correction of a whole row). Rows are split over the
// threads at prefill sizes. The pointers are the calling thread's scratch, valid until its next pad_activations.
struct PaddedX {
  int8_t* xp;
  int32_t *sumx, *row_sum;
};

PaddedX pad_activations(const TernaryView& w, const int8_t* x, int64_t M, int64_t pad_rows = 1, bool copy = true) {
  const int64_t K = w.k, kp = w.kp, G = w.groups();
  const int64_t Mp = (M + pad_rows - 1) / pad_rows * pad_rows;  // rows the microkernel may read
  thread_local Scratch<int8_t> xp_buf;
  thread_local Scratch<int32_t> sumx_buf, row_sum_buf;
  PaddedX p{copy ? xp_buf.get(static_cast<size_t>(Mp * kp + 64)) : nullptr,  // +64: slack for vector broadcasts
            sumx_buf.get(static_cast<size_t>(M * G)), row_sum_buf.get(static_cast<size_t>(M))};
  if (copy) std::memset(p.xp + M * kp, 0, static_cast<size_t>((Mp - M) * kp + 64));
  auto rows = [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const int8_t* xr = x + m * K;
      if (copy) {
        std::memcpy(p.xp + m * kp, xr, static_cast<size_t>(K));
        std::memset(p.xp + m * kp + K, 0, static_cast<size_t>(kp - K));
      }
      int32_t total = 0;
      for (int64_t g = 0; g < G; ++g) {
        const int64_t k0 = g * kTernaryGroupK, k1 = std::min(K, k0 + kTernaryGroupK);
        int32_t s = 0;
        for (int64_t k = k0; k < k1; ++k) s += xr[k];
        p.sumx[m * G + g] = s;
        total += s;
      }
      p.row_sum[m] = total;
    }
  };
  if (M >= 32) {
    parallel_for(M, 8, rows);
  } else {
    rows(0, M);
  }
  return p;
}

// x [M, K] in the order of TernaryIsa::mm_packed, zero-padded to kp: block b of mb rows is [kp / 4][mb][4] bytes
// at xk + b * mb * kp, row i's k-step s at 4 * (s * mb + i). The rows past M in the last block are not written (the
// microkernel does not read them). The calling thread's scratch, valid until its next call.
const int8_t* pack_x_blocks(const int8_t* x, int64_t M, int64_t K, int64_t kp, int mb) {
  thread_local Scratch<int8_t> buf;
  const int64_t blocks = (M + mb - 1) / mb, steps = kp / 4, full = K / 4;
  int8_t* xk = buf.get(static_cast<size_t>(blocks * mb * kp));
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      int8_t* dst = xk + b * mb * kp;
      const int64_t rows = std::min<int64_t>(mb, M - b * mb);
      for (int64_t i = 0; i < rows; ++i) {
        const int8_t* src = x + (b * mb + i) * K;
        for (int64_t s = 0; s < full; ++s) std::memcpy(dst + 4 * (s * mb + i), src + 4 * s, 4);
        for (int64_t s = full; s < steps; ++s) {  // the k-step holding the last K % 4 values, then zeros
          int8_t* d = dst + 4 * (s * mb + i);
          for (int64_t j = 0; j < 4; ++j) d[j] = 4 * s + j < K ? src[4 * s + j] : 0;
        }
      }
    }
  });
  return xk;
}

const detail::TernaryIsa& isa_for(KernelPath path) {
  switch (path) {
    case KernelPath::kAmx: return detail::ternary_isa_amx();
    case KernelPath::kAvx512: return detail::ternary_isa_avx512();
    default: return detail::ternary_isa_avx2();
  }
}

void check_view(const TernaryView& w) {
  if (w.fmt == TernaryFormat::kInt8) fail("ternary kernels: the int8 format has no tiled kernels");
}

// The calling thread's 64-byte aligned scratch for one decoded tile: [kp / 4][64] codes.
uint8_t* code_buffer(int64_t kp) {
  thread_local Scratch<uint8_t> raw;
  uint8_t* p = raw.get(static_cast<size_t>(16 * kp + 64));
  const auto a = reinterpret_cast<uintptr_t>(p);
  return p + ((64 - a % 64) % 64);
}

}  // namespace

void ternary_gemm_i32(const TernaryView& w, const int8_t* x, int64_t M, int32_t* acc) {
  check_view(w);
  if (M <= 0) return;
  const KernelPath path = cpu_kernel_path();
  if (path == KernelPath::kRef) return detail::ternary_gemm_i32_ref(w, x, M, acc);
  const detail::TernaryIsa& isa = isa_for(path);
  const int64_t N = w.n, kp = w.kp;
  // Decode batches over i2 weights run rows_i2 (no decoded tile). The tiled GEMM over packed rows reads x through
  // pack_x_blocks only; every other kernel reads the padded rows.
  const bool i2_rows = M >= 2 && w.fmt == TernaryFormat::kI2 && M <= isa.max_rows_i2;
  const bool packed = isa.mm_packed && M >= 2 && !i2_rows;
  const PaddedX px = pad_activations(w, x, M, M >= 2 ? isa.pad_rows : 1, !packed);
  auto store = [&](int64_t t, int64_t m, const int32_t* out) {
    const int32_t sx = px.row_sum[m];
    const int64_t nr = std::min<int64_t>(16, N - t * 16);
    int32_t* dst = acc + m * N + t * 16;
    for (int64_t r = 0; r < nr; ++r) dst[r] = out[r] - sx;
  };
  if (M == 1) {
    parallel_for(w.tiles, 1, [&](int64_t t0, int64_t t1) {
      alignas(64) int32_t out[16];
      for (int64_t t = t0; t < t1; ++t) {
        uint64_t pos = w.fmt == TernaryFormat::kBitcos ? w.sign_offsets[t] : 0;
        isa.gemv_tile(w, t, 0, w.groups(), px.xp, &pos, out);
        store(t, 0, out);
      }
    });
    return;
  }
  if (i2_rows) {
    parallel_for(w.tiles, 1, [&](int64_t t0, int64_t t1) {
      alignas(64) int32_t out[16 * 16];
      for (int64_t t = t0; t < t1; ++t) {
        isa.rows_i2(w, t, px.xp, kp, static_cast<int>(M), out);
        for (int64_t m = 0; m < M; ++m) store(t, m, out + 16 * m);
      }
    });
    return;
  }
  const int8_t* xk = packed ? pack_x_blocks(x, M, w.k, kp, isa.max_mb) : nullptr;
  parallel_for(w.tiles, 1, [&](int64_t t0, int64_t t1) {
    uint8_t* codes = code_buffer(kp);
    thread_local Scratch<int32_t> out_buf;
    int32_t* out = out_buf.get(static_cast<size_t>(16 * isa.max_mb));
    for (int64_t t = t0; t < t1; ++t) {
      isa.decode_tile(w, t, codes);
      for (int64_t m0 = 0; m0 < M; m0 += isa.max_mb) {
        const int mb = static_cast<int>(std::min<int64_t>(isa.max_mb, M - m0));
        if (xk) isa.mm_packed(codes, 0, kp / 4, xk + m0 * kp, mb, out);
        else isa.mm_codes(codes, 0, kp / 4, px.xp + m0 * kp, kp, mb, out);
        for (int i = 0; i < mb; ++i) store(t, m0 + i, out + 16 * i);
      }
    }
  });
}

namespace {

// The group scales of one tile, [G][16] float, as the kernels read them: a pointer into float32 scales, or the
// tile's fp16 scales widened (exactly) into the calling thread's scratch.
struct TileScalesF32 {
  const float* gs;
  int64_t G;
  const float* tile(int64_t t) const { return gs + t * G * 16; }
};
struct TileScalesF16 {
  const uint16_t* gs;
  int64_t G;
  void (*widen)(const uint16_t*, int64_t, float*);
  const float* tile(int64_t t) const {
    thread_local Scratch<float> buf;
    float* f = buf.get(static_cast<size_t>(G * 16));
    widen(gs + t * G * 16, G * 16, f);
    return f;
  }
};

void widen_f16_scalar(const uint16_t* h, int64_t n, float* f) {
  for (int64_t i = 0; i < n; ++i) f[i] = f16_to_f32(h[i]);
}

template <class Scales>
void gemm_f32_grouped(const detail::TernaryIsa& isa, const TernaryView& w, const int8_t* x, const float* act_scale,
                      int64_t M, const Scales& scales, float* y) {
  const int64_t N = w.n, kp = w.kp, G = w.groups();
  const bool packed = isa.mm_packed && M >= 2;  // the tiled GEMM below reads x through pack_x_blocks only
  const PaddedX px = pad_activations(w, x, M, M >= 2 ? isa.pad_rows : 1, !packed);
  // s[i][r] += group_scale * (code sum - x sum): the same float operations, in the same order, as the ref.
  auto accumulate = [&](int64_t t, int64_t g, const float* gs, int64_t m, const int32_t* out, float* s) {
    for (int64_t r = 0; r < 16 && t * 16 + r < N; ++r) {
      const int32_t a = out[r] - px.sumx[m * G + g];
      s[r] += gs[r] * static_cast<float>(a);
    }
  };
  // The ISA's vector step when it has one (the same arithmetic lane by lane). gs: the group's 16 scales.
  auto accumulate_rows = [&](int64_t t, int64_t g, const float* gs, int64_t m0, int mb, const int32_t* out, float* s) {
    if (!isa.group_accumulate) {
      for (int i = 0; i < mb; ++i) accumulate(t, g, gs, m0 + i, out + 16 * i, s + 16 * i);
      return;
    }
    isa.group_accumulate(out, mb, px.sumx + m0 * G + g, G, gs, s);
  };
  auto finish = [&](int64_t t, int64_t m, const float* s) {
    for (int64_t r = 0; r < 16 && t * 16 + r < N; ++r) y[m * N + t * 16 + r] = act_scale[m] * s[r];
  };
  if (M == 1) {
    parallel_for(w.tiles, 1, [&](int64_t t0, int64_t t1) {
      alignas(64) int32_t out[16];
      for (int64_t t = t0; t < t1; ++t) {
        const float* gs = scales.tile(t);
        float s[16] = {};
        if (w.fmt == TernaryFormat::kI2 && isa.gemv_i2_grouped) {
          isa.gemv_i2_grouped(w, t, px.xp, px.sumx, gs, s);
          finish(t, 0, s);
          continue;
        }
        uint64_t pos = w.fmt == TernaryFormat::kBitcos ? w.sign_offsets[t] : 0;
        for (int64_t g = 0; g < G; ++g) {
          isa.gemv_tile(w, t, g, g + 1, px.xp, &pos, out);
          accumulate_rows(t, g, gs + g * 16, 0, 1, out, s);
        }
        finish(t, 0, s);
      }
    });
    return;
  }
  const int8_t* xk = packed ? pack_x_blocks(x, M, w.k, kp, isa.max_mb) : nullptr;
  parallel_for(w.tiles, 1, [&](int64_t t0, int64_t t1) {
    uint8_t* codes = code_buffer(kp);
    thread_local Scratch<int32_t> out_buf;
    thread_local Scratch<float> s_buf;
    int32_t* out = out_buf.get(static_cast<size_t>(16 * isa.max_mb));
    float* s = s_buf.get(static_cast<size_t>(16 * isa.max_mb));
    for (int64_t t = t0; t < t1; ++t) {
      isa.decode_tile(w, t, codes);
      const float* gs = scales.tile(t);
      for (int64_t m0 = 0; m0 < M; m0 += isa.max_mb) {
        const int mb = static_cast<int>(std::min<int64_t>(isa.max_mb, M - m0));
        std::fill(s, s + 16 * isa.max_mb, 0.0f);
        if (!xk && isa.mm_grouped) {
          isa.mm_grouped(codes, G, px.xp + m0 * kp, kp, mb, px.sumx + m0 * G, gs, s);
          for (int i = 0; i < mb; ++i) finish(t, m0 + i, s + 16 * i);
          continue;
        }
        for (int64_t g = 0; g < G; ++g) {
          if (xk) isa.mm_packed(codes, g * 32, (g + 1) * 32, xk + m0 * kp, mb, out);
          else isa.mm_codes(codes, g * 32, (g + 1) * 32, px.xp + m0 * kp, kp, mb, out);
          accumulate_rows(t, g, gs + g * 16, m0, mb, out, s);
        }
        for (int i = 0; i < mb; ++i) finish(t, m0 + i, s + 16 * i);
      }
    }
  });
}

}  // namespace

void ternary_gemm_f32(const TernaryView& w, const int8_t* x, const float* act_scale, int64_t M,
                      const float* group_scales, float* y) {
  check_view(w);
  if (M <= 0) return;
  const KernelPath path = cpu_kernel_path();
  if (path == KernelPath::kRef) return detail::ternary_gemm_f32_ref(w, x, act_scale, M, group_scales, y);
  gemm_f32_grouped(isa_for(path), w, x, act_scale, M, TileScalesF32{group_scales, w.groups()}, y);
}

void ternary_gemm_f32(const TernaryView& w, const int8_t* x, const float* act_scale, int64_t M,
                      const uint16_t* group_scales_f16, float* y) {
  check_view(w);
  if (M <= 0) return;
  const KernelPath path = cpu_kernel_path();
  if (path == KernelPath::kRef) {
    std::vector<float> gs(static_cast<size_t>(w.tiles * w.groups() * 16));
    widen_f16_scalar(group_scales_f16, static_cast<int64_t>(gs.size()), gs.data());
    return detail::ternary_gemm_f32_ref(w, x, act_scale, M, gs.data(), y);
  }
  const detail::TernaryIsa& isa = isa_for(path);
  gemm_f32_grouped(isa, w, x, act_scale, M,
                   TileScalesF16{group_scales_f16, w.groups(), isa.widen_f16 ? isa.widen_f16 : &widen_f16_scalar}, y);
}

std::vector<float> tile_group_scales(const float* row_major, int64_t n, int64_t groups) {
  const int64_t tiles = (n + 15) / 16;
  std::vector<float> out(static_cast<size_t>(tiles * groups * 16), 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < groups; ++g) out[static_cast<size_t>(((r / 16) * groups + g) * 16 + r % 16)] = row_major[r * groups + g];
  return out;
}

std::vector<float> row_group_scales(const float* tile_major, int64_t n, int64_t groups) {
  std::vector<float> out(static_cast<size_t>(n * groups));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < groups; ++g) out[static_cast<size_t>(r * groups + g)] = tile_major[((r / 16) * groups + g) * 16 + r % 16];
  return out;
}

}  // namespace tritium::cpu
