#include "kernels/cuda/ternary_tcb.h"

#include "core/error.h"

namespace tritium::cuda {
namespace {

// Word index and bit of weight (row, k) in the tcb layout (see ternary_tcb.h), plane 0 = P, 1 = N.
struct TcbPos {
  int64_t word;
  int bit;
};
TcbPos tcb_pos(const TcbShape& s, int64_t row, int64_t k, int plane) {
  const int64_t tile = row / 16, g = row % 8, hi = (row % 16) / 8;
  const int64_t c = k / 256, h = (k % 256) / 128, i = (k % 128) / 4, t = k % 4;
  const int64_t lane = g * 4 + t, reg = h * 2 + hi;
  const int64_t word = (((tile * s.chunks() + c) * 2 + plane) * 32 + lane) * 4 + reg;
  return {word, static_cast<int>(i)};
}

}  // namespace

TcbWeights pack_tcb(const int8_t* w, int64_t n, int64_t k) {
  TRITIUM_CHECK(n > 0 && k > 0, "pack_tcb: bad shape {} x {}", n, k);
  const TcbShape s = TcbShape::of(n, k);
  TcbWeights out;
  out.words.assign(static_cast<size_t>(s.words()), 0u);
  out.neg_count.assign(static_cast<size_t>(s.np), 0);
  for (int64_t r = 0; r < n; ++r) {
    const int8_t* row = w + r * k;
    for (int64_t c = 0; c < k; ++c) {
      const int v = row[c];
      TRITIUM_CHECK(v >= -1 && v <= 1, "pack_tcb: weight [{}, {}] = {} is not ternary", r, c, v);
      if (v == 0) continue;
      const TcbPos p = tcb_pos(s, r, c, v > 0 ? 0 : 1);
      out.words[static_cast<size_t>(p.word)] |= 1u << p.bit;
      if (v < 0) ++out.neg_count[static_cast<size_t>(r)];
    }
  }
  return out;
}

std::vector<int8_t> unpack_tcb(const uint32_t* words, int64_t n, int64_t k) {
  const TcbShape s = TcbShape::of(n, k);
  std::vector<int8_t> out(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const TcbPos pp = tcb_pos(s, r, c, 0), pn = tcb_pos(s, r, c, 1);
      const int pos = (words[pp.word] >> pp.bit) & 1, neg = (words[pn.word] >> pn.bit) & 1;
      out[static_cast<size_t>(r * k + c)] = static_cast<int8_t>(pos - neg);
    }
  return out;
}

std::vector<uint32_t> pack_tcb_activations(const int8_t* x, int64_t m, int64_t k) {
  const TcbShape s = TcbShape::of(1, k);
  std::vector<uint32_t> out(static_cast<size_t>(m * s.plane_words()), 0u);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const uint32_t v = static_cast<uint8_t>(x[r * k + c]);
      const int64_t ch = c / 256, h = (c % 256) / 128, i = (c % 128) / 4, t = c % 4;
      for (int j = 0; j < 8; ++j)
        if ((v >> j) & 1u) {
          const int64_t lane = j * 4 + t;
          out[static_cast<size_t>(r * s.plane_words() + (ch * 32 + lane) * 2 + h)] |= 1u << i;
        }
    }
  return out;
}

}  // namespace tritium::cuda
