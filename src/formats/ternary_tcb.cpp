#include "formats/ternary_tcb.h"

#include "core/error.h"
#include "core/parallel.h"

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
  // Word by word (tcb_pos inverted: lane (g, t), register r = 2 h + row half, bit i <- k = 256 c + 128 h + 4 i + t),
  // tiles over the threads: the load-time packer of a 2B model (the per-weight scatter took ~10 s more than tc2).
  const int64_t kc = s.chunks();
  std::vector<int64_t> bad_row(static_cast<size_t>(s.tiles()), -1);
  parallel_for(s.tiles(), 1, [&](int64_t t0, int64_t t1) {
    for (int64_t tile = t0; tile < t1; ++tile) {
      for (int64_t rr = 0; rr < 16; ++rr) {  // the -1 counts and the value check, row by row
        const int64_t row = tile * 16 + rr;
        if (row >= n) break;
        int neg = 0;
        for (int64_t c = 0; c < k; ++c) {
          const int v = w[row * k + c];
          neg += v == -1;
          if ((v < -1 || v > 1) && bad_row[static_cast<size_t>(tile)] < 0) bad_row[static_cast<size_t>(tile)] = row;
        }
        out.neg_count[static_cast<size_t>(row)] = neg;
      }
      for (int64_t c = 0; c < kc; ++c) {
        uint32_t* frag = out.words.data() + ((tile * kc + c) * 2) * 128;  // [plane][32 lanes][4]
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4, t = lane % 4;
          for (int reg = 0; reg < 4; ++reg) {
            const int64_t row = tile * 16 + g + 8 * (reg & 1);
            if (row >= n) continue;
            const int8_t* wr = w + row * k;
            const int64_t k0 = 256 * c + 128 * (reg >> 1) + t;
            uint32_t pw = 0, nw = 0;
            for (int i = 0; i < 32 && k0 + 4 * i < k; ++i) {
              const int v = wr[k0 + 4 * i];
              pw |= static_cast<uint32_t>(v == 1) << i;
              nw |= static_cast<uint32_t>(v == -1) << i;
            }
            frag[lane * 4 + reg] = pw;
            frag[128 + lane * 4 + reg] = nw;
          }
        }
      }
    }
  });
  for (const int64_t row : bad_row) {
    if (row < 0) continue;
    for (int64_t c = 0; c < k; ++c) {
      const int v = w[row * k + c];
      TRITIUM_CHECK(v >= -1 && v <= 1, "pack_tcb: weight [{}, {}] = {} is not ternary", row, c, v);
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
