// The CUDA attention kernels (paged, split-K, fused decode, GQA decode, flash prefill) and the KV pool element
// types (f32, bf16, fp8 e4m3) against each other and a double-precision reference. Skipped (visibly) without CUDA or
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kv/fp8.h"
#include "backend/cuda/cuda_backend.h"
#include "test_util.h"

#if TRITIUM_HAVE_CUDA
#include "kernels/cuda/cuda_test_util.h"
#include "kernels/cuda/attention_gqa.cuh"
#include "kernels/cuda/kernels.h"

using namespace tritium;
using test::DevBuf;
using test::random_floats;

// Fused decode attention (RoPE + KV write + attention) equals rope_kv_write then attention_paged: the KV pools
// exactly, the output within 1e-6 relative (the new position enters the softmax last), for three sequences at
// ragged positions (0, a block boundary, mid-block) over a shuffled block table, head_dim 64 and 128.
TEST(CudaKernels, AttentionDecodeRopeMatchesUnfused) {
  REQUIRE_GPU();
  std::mt19937 rng(23);
  for (int D : {64, 128}) {
    const int H = 8, KVH = 2, bs = 16, nblocks = 24, maxpos = 128, half = D / 2, btw = 8;
    const int qd = H * D, kvd = KVH * D, w = qd + 2 * kvd;
    std::vector<float> ct(static_cast<size_t>(maxpos) * half), st(ct.size());
    for (size_t i = 0; i < ct.size(); ++i) {
      ct[i] = std::cos(0.013f * static_cast<float>(i));
      st[i] = std::sin(0.013f * static_cast<float>(i));
    }
    std::vector<int32_t> blocks(nblocks);
    for (int i = 0; i < nblocks; ++i) blocks[i] = i;
    std::shuffle(blocks.begin(), blocks.end(), rng);
    std::vector<int32_t> bt(3 * btw);
    for (int i = 0; i < 3 * btw; ++i) bt[i] = blocks[i];
    const std::vector<int32_t> pos = {0, 16, 77}, seq = {0, 1, 2};
    const int rows = 3;
    const auto qkv = random_floats(rng, static_cast<size_t>(rows) * w);
    const auto pool0 = random_floats(rng, static_cast<size_t>(nblocks) * bs * kvd);  // earlier positions
    DevBuf<float> dct(ct), dst(st);
    DevBuf<int32_t> dpos(pos), dseq(seq), dbt(bt);
    DevBuf<float> q1(qkv), k1(pool0), v1(pool0), o1(static_cast<size_t>(rows) * qd);
    cuda::rope_kv_write(q1.p, rows, H, KVH, D, dct.p, dst.p, dpos.p, dseq.p, dbt.p, btw, bs, k1.p, v1.p, nullptr);
    cuda::attention_paged(q1.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, btw, bs, k1.p, v1.p, o1.p, nullptr);
    DevBuf<float> q2(qkv), k2(pool0), v2(pool0), o2(static_cast<size_t>(rows) * qd);
    cuda::attention_decode_rope(q2.p, w, rows, H, KVH, D, dct.p, dst.p, dpos.p, dseq.p, dbt.p, btw, bs, k2.p, v2.p,
                                o2.p, nullptr);
    EXPECT_EQ(k2.down(), k1.down()) << "k pool D=" << D;
    EXPECT_EQ(v2.down(), v1.down()) << "v pool D=" << D;
    EXPECT_EQ(q2.down(), qkv) << "qkv left as it was";
    const auto a = o1.down(), b = o2.down();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(b[i], a[i], 1e-6 * std::fabs(a[i]) + 1e-6) << i << " D=" << D;
  }
}

namespace {

// A paged KV cache of several sequences with random K/V over a shuffled (non-contiguous) block table, and a
// double-precision reference of causal GQA attention over it.
struct PagedCase {
  int H, KVH, D, bs = 16, btw = 0, nblocks = 0;
  std::vector<int32_t> bt;
  std::vector<float> kpool, vpool;
  PagedCase(std::mt19937& rng, int H_, int KVH_, int D_, const std::vector<int>& ctx) : H(H_), KVH(KVH_), D(D_) {
    int maxc = 1;
    for (int c : ctx) maxc = std::max(maxc, c);
    btw = (maxc + bs - 1) / bs + 1;
    nblocks = static_cast<int>(ctx.size()) * btw + 3;
    std::vector<int32_t> ids(nblocks);
    for (int i = 0; i < nblocks; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    bt.assign(ctx.size() * btw, 0);
    for (size_t i = 0; i < bt.size(); ++i) bt[i] = ids[i];
    kpool = random_floats(rng, static_cast<size_t>(nblocks) * bs * KVH * D);
    vpool = random_floats(rng, kpool.size());
  }
  /// out[H * D] for query row q (head h at h * D) at position p of sequence s.
  std::vector<double> ref(const float* q, int p, int s) const {
    std::vector<double> o(static_cast<size_t>(H) * D, 0.0);
    const int kvd = KVH * D;
    std::vector<double> sc(p + 1);
    for (int h = 0; h < H; ++h) {
      const int kvh = h / (H / KVH);
      double mx = -1e300;
      for (int j = 0; j <= p; ++j) {
        const size_t off = (static_cast<size_t>(bt[s * btw + j / bs]) * bs + j % bs) * kvd + kvh * D;
        double d = 0;
        for (int i = 0; i < D; ++i) d += static_cast<double>(q[h * D + i]) * kpool[off + i];
        sc[j] = d / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (int j = 0; j <= p; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
      for (int j = 0; j <= p; ++j) {
        const size_t off = (static_cast<size_t>(bt[s * btw + j / bs]) * bs + j % bs) * kvd + kvh * D;
        for (int i = 0; i < D; ++i) o[h * D + i] += sc[j] / sum * vpool[off + i];
      }
    }
    return o;
  }
};

/// ||a - b|| / ||b|| over one row of n values.
template <class A, class B>
double rel_err(const A* a, const B* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(static_cast<double>(a[i]))) return 1e30;
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

// Split-K decode attention equals attention_paged (and a double reference) within 1e-5 relative per row, for
// contexts 1, 17, 300 and 1500 in one batch over a shuffled block table, head_dim 64 / 128, GQA ratios 1 and 4,
// several chunk counts; the counters are left zero; a graph captured once (with programmatic dependent launch)
// and replayed after the positions change still matches.
TEST(CudaKernels, AttentionSplitMatchesPaged) {
  REQUIRE_GPU();
  std::mt19937 rng(41);
  const std::vector<int> ctx = {1, 17, 300, 1500, 64, 65};
  for (int D : {64, 128}) {
    for (auto [H, KVH] : std::vector<std::pair<int, int>>{{4, 4}, {8, 2}}) {
      PagedCase pc(rng, H, KVH, D, ctx);
      const int rows = static_cast<int>(ctx.size()), qd = H * D, ldq = qd + 64;  // strided q rows
      std::vector<int32_t> pos(rows), seq(rows);
      for (int r = 0; r < rows; ++r) pos[r] = ctx[r] - 1, seq[r] = r;
      const auto q = random_floats(rng, static_cast<size_t>(rows) * ldq);
      DevBuf<float> dq(q), dk(pc.kpool), dv(pc.vpool), o1(static_cast<size_t>(rows) * qd),
          o2(static_cast<size_t>(rows) * qd),
          part(static_cast<size_t>(rows) * H * cuda::kAttentionMaxSplit * (D + 2));
      DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), cnt(static_cast<size_t>(rows) * H);
      cnt.up(std::vector<int32_t>(static_cast<size_t>(rows) * H, 0));
      cuda::attention_paged(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p, o1.p,
                            nullptr);
      const auto a = o1.down();
      for (int r = 0; r < rows; ++r) {
        const auto want = pc.ref(&q[static_cast<size_t>(r) * ldq], pos[r], seq[r]);
        EXPECT_LT(rel_err(&a[static_cast<size_t>(r) * qd], want.data(), qd), 1e-5) << "paged ctx " << ctx[r];
      }
      for (int ns : {2, 5, cuda::kAttentionMaxSplit, cuda::attention_split_count(rows, H)}) {
        cuda::attention_paged_split(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p,
                                    o2.p, ns, part.p, cnt.p, nullptr);
        const auto b = o2.down();
        for (int r = 0; r < rows; ++r)
          EXPECT_LT(rel_err(&b[static_cast<size_t>(r) * qd], &a[static_cast<size_t>(r) * qd], qd), 1e-5)
              << "D=" << D << " H=" << H << " KVH=" << KVH << " nsplit " << ns << " ctx " << ctx[r];
        for (int32_t c : cnt.down()) ASSERT_EQ(c, 0) << "split counters must be left zero";
      }
      // Graph: captured once with 16 chunks, replayed at other positions.
      cudaStream_t st;
      cuda::check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      cuda::check(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "capture");
      for (int rep = 0; rep < 2; ++rep)  // two dependent launches in a row (PDL between them)
        cuda::attention_paged_split(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p,
                                    o2.p, cuda::kAttentionMaxSplit, part.p, cnt.p, st);
      cuda::check(cudaStreamEndCapture(st, &g), "end capture");
      cuda::check(cudaGraphInstantiate(&ge, g, 0), "instantiate");
      for (int shift : {0, -7, -250}) {
        std::vector<int32_t> p2(rows);
        for (int r = 0; r < rows; ++r) p2[r] = std::max(0, pos[r] + shift);
        dpos.up(p2);
        cuda::check(cudaGraphLaunch(ge, st), "graph launch");
        cuda::check(cudaStreamSynchronize(st), "sync");
        cuda::attention_paged(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p, o1.p,
                              nullptr);
        const auto ra = o1.down(), rb = o2.down();
        for (int r = 0; r < rows; ++r)
          EXPECT_LT(rel_err(&rb[static_cast<size_t>(r) * qd], &ra[static_cast<size_t>(r) * qd], qd), 1e-5)
              << "graph replay, shift " << shift << " ctx " << p2[r] + 1;
        for (int32_t c : cnt.down()) ASSERT_EQ(c, 0);
      }
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
      cudaStreamDestroy(st);
    }
  }
}

// Split-K fused decode attention (RoPE + KV write + attention) equals attention_decode_rope: the KV pools
// exactly, the output within 1e-5 relative, at contexts 1, 17, 300, 1500 (and chunk boundaries 64 / 65 / 129).
TEST(CudaKernels, AttentionDecodeRopeSplitMatchesUnsplit) {
  REQUIRE_GPU();
  std::mt19937 rng(43);
  const std::vector<int> ctx = {1, 17, 300, 1500, 65, 129, 64};
  for (int D : {64, 128}) {
    for (auto [H, KVH] : std::vector<std::pair<int, int>>{{4, 4}, {8, 2}}) {
      PagedCase pc(rng, H, KVH, D, ctx);
      const int rows = static_cast<int>(ctx.size()), qd = H * D, kvd = KVH * D, w = qd + 2 * kvd, half = D / 2;
      const int maxpos = 1600;
      std::vector<float> ct(static_cast<size_t>(maxpos) * half), sn(ct.size());
      for (size_t i = 0; i < ct.size(); ++i) {
        ct[i] = std::cos(0.0007f * static_cast<float>(i));
        sn[i] = std::sin(0.0007f * static_cast<float>(i));
      }
      std::vector<int32_t> pos(rows), seq(rows);
      for (int r = 0; r < rows; ++r) pos[r] = ctx[r] - 1, seq[r] = r;
      const auto qkv = random_floats(rng, static_cast<size_t>(rows) * w);
      DevBuf<float> dct(ct), dsn(sn), dq(qkv), k1(pc.kpool), v1(pc.vpool), k2(pc.kpool), v2(pc.vpool),
          o1(static_cast<size_t>(rows) * qd), o2(static_cast<size_t>(rows) * qd),
          part(static_cast<size_t>(rows) * H * cuda::kAttentionMaxSplit * (D + 2));
      DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), cnt(static_cast<size_t>(rows) * H);
      cnt.up(std::vector<int32_t>(static_cast<size_t>(rows) * H, 0));
      cuda::attention_decode_rope(dq.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, k1.p,
                                  v1.p, o1.p, nullptr);
      const auto a = o1.down();
      const auto kref = k1.down(), vref = v1.down();
      for (int ns : {3, cuda::kAttentionMaxSplit, cuda::attention_split_count(rows, H)}) {
        k2.up(pc.kpool);
        v2.up(pc.vpool);
        cuda::attention_decode_rope_split(dq.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw,
                                          pc.bs, k2.p, v2.p, o2.p, ns, part.p, cnt.p, nullptr);
        EXPECT_EQ(k2.down(), kref) << "k pool D=" << D << " nsplit " << ns;
        EXPECT_EQ(v2.down(), vref) << "v pool D=" << D << " nsplit " << ns;
        const auto b = o2.down();
        for (int r = 0; r < rows; ++r)
          EXPECT_LT(rel_err(&b[static_cast<size_t>(r) * qd], &a[static_cast<size_t>(r) * qd], qd), 1e-5)
              << "D=" << D << " H=" << H << " KVH=" << KVH << " nsplit " << ns << " ctx " << ctx[r];
        for (int32_t c : cnt.down()) ASSERT_EQ(c, 0);
      }
      EXPECT_EQ(dq.down(), qkv) << "qkv left as it was";
    }
  }
}

// The automatic chunks per block: a power of two within [1, nsplit] that keeps at least 4 warps per SM, at most 8
// chunks of 32 positions (contexts up to 256) or 4 beyond; on the H200 (132 SMs) the values measured best.
TEST(CudaKernels, AttentionGqaChunksPerBlock) {
  REQUIRE_GPU();
  const int sms = cuda::sm_count();
  for (int rows : {1, 2, 16, 64, 256, 1024}) {
    for (int nsplit = 1; nsplit <= cuda::kAttentionMaxSplit; ++nsplit) {
      const int c = cuda::attention_gqa_chunks_per_block(rows, 20, nsplit);
      ASSERT_GE(c, 1);
      EXPECT_LE(c, nsplit) << rows << " rows, nsplit " << nsplit;
      EXPECT_EQ(c & (c - 1), 0) << c;
      EXPECT_LE(c, nsplit <= 8 ? 8 : 4) << rows << " rows, nsplit " << nsplit;
      if (c > 1) {
        EXPECT_GE(int64_t{rows} * 20 * ((nsplit + c - 1) / c), 4 * sms) << rows << " rows, nsplit " << nsplit;
      }
    }
  }
  if (sms == 132) {
    const int ctx128 = cuda::attention_gqa_chunks(128), ctx256 = cuda::attention_gqa_chunks(256),
              ctx1024 = cuda::attention_gqa_chunks(1024);
    EXPECT_EQ(cuda::attention_gqa_chunks_per_block(1, 20, ctx1024), 1);
    EXPECT_EQ(cuda::attention_gqa_chunks_per_block(16, 20, ctx128), 2);
    EXPECT_EQ(cuda::attention_gqa_chunks_per_block(64, 20, ctx128), 4);
    EXPECT_EQ(cuda::attention_gqa_chunks_per_block(64, 20, ctx256), 8);
    EXPECT_EQ(cuda::attention_gqa_chunks_per_block(64, 20, ctx1024), 4);
    EXPECT_EQ(cuda::attention_gqa_chunks_per_block(64, 20, cuda::attention_gqa_chunks(600)), 4);  // 10 chunks of 64
    // 6 chunks: blocks of 4 and 2 (all 6 in one block: fp8 decode at batch 64 3% slower, bench/CUDA_NOTES.md)
    EXPECT_EQ(cuda::attention_gqa_chunks_per_block(64, 20, cuda::attention_gqa_chunks(192)), 4);
  }
}

// The tensor-core kernel's split (bf16 pools): a few rows of 2-4 chunks get a warp per chunk in one block; else a
// block is one warp holding a power of two of a row's chunks, or all of them, while 2 warps per SM remain; on the H200
// (132 SMs) the values measured best.
TEST(CudaKernels, AttentionGqaTcSplit) {
  REQUIRE_GPU();
  const int sms = cuda::sm_count(), KVH = 5;
  for (int rows : {1, 2, 16, 64, 256, 1024}) {
    for (int nsplit = 1; nsplit <= cuda::kAttentionMaxSplit; ++nsplit) {
      const cuda::GqaTcSplit s = cuda::attention_gqa_tc_split(rows, KVH, nsplit);
      const int c = s.chunks;
      ASSERT_GE(c, 1);
      EXPECT_LE(c, nsplit) << rows << " rows, nsplit " << nsplit;
      if (s.warps > 1) {
        EXPECT_EQ(s.warps, c);
        EXPECT_EQ(c, nsplit);
        EXPECT_LE(s.warps, cuda::kGqaTcMaxWarps);
        EXPECT_LE(rows * KVH, sms);
      } else {
        EXPECT_EQ(s.warps, 1);
        EXPECT_TRUE((c & (c - 1)) == 0 || c == nsplit) << c;
        if (c > 1 && nsplit > 2) {
          EXPECT_GE(int64_t{rows} * KVH * ((nsplit + c - 1) / c), 2 * sms) << rows << " rows, nsplit " << nsplit;
        }
      }
    }
  }
  if (sms == 132) {
    auto split = [&](int rows, int nsplit) {
      const cuda::GqaTcSplit s = cuda::attention_gqa_tc_split(rows, KVH, nsplit);
      return std::pair{s.chunks, s.warps};
    };
    EXPECT_EQ(split(1, 2), std::pair(2, 2));
    EXPECT_EQ(split(16, 4), std::pair(4, 4));
    EXPECT_EQ(split(1, 8), std::pair(1, 1));
    EXPECT_EQ(split(16, 8), std::pair(2, 1));
    EXPECT_EQ(split(64, 6), std::pair(6, 1));  // not blocks of 4 and 2 chunks
    EXPECT_EQ(split(256, 5), std::pair(5, 1));
    EXPECT_EQ(split(64, 16), std::pair(16, 1));
  }
}

// GQA decode attention (a block per KV head, split over positions by the context): the fused kernel equals
// attention_decode_rope (the KV pools exactly, the output within 1e-5 relative per row, 3e-5 on the tensor cores of
// the bf16 pools) at contexts 1 .. 1500 over a shuffled block table, head_dim 64 / 128, GQA ratios 1, 4 and 6, f32,
// bf16 and fp8 pools, with any grid depth from the largest chunk count up, one block per KV head or per query head,
// 1, 3 or all of a row's chunks per block, and (bf16) 2-4 chunks per block a warp each (the same bits); the unfused
// kernel after rope_kv_write gives the fused kernel's bits, also for a subset of the rows through a row list; the
// counters are left zero.
TEST(CudaKernels, AttentionDecodeGqaMatchesPerHead) {
  REQUIRE_GPU();
  std::mt19937 rng(47);
  const std::vector<int> ctx = {1, 2, 17, 300, 1500, 65, 129, 64, 1025};
  int maxchunks = 1;
  for (int c : ctx) maxchunks = std::max(maxchunks, cuda::attention_gqa_chunks(c));
  for (int D : {64, 128}) {
    for (auto [H, KVH] : std::vector<std::pair<int, int>>{{4, 4}, {8, 2}, {12, 2}}) {
      for (cuda::KvElem elem : {cuda::KvElem::kF32, cuda::KvElem::kBF16, cuda::KvElem::kFP8}) {
        PagedCase pc(rng, H, KVH, D, ctx);
        const int rows = static_cast<int>(ctx.size()), qd = H * D, kvd = KVH * D, w = qd + 2 * kvd, half = D / 2;
        const int maxpos = 1600;
        std::vector<float> ct(static_cast<size_t>(maxpos) * half), sn(ct.size());
        for (size_t i = 0; i < ct.size(); ++i) {
          ct[i] = std::cos(0.0007f * static_cast<float>(i));
          sn[i] = std::sin(0.0007f * static_cast<float>(i));
        }
        std::vector<int32_t> pos(rows), seq(rows);
        for (int r = 0; r < rows; ++r) pos[r] = ctx[r] - 1, seq[r] = r;
        const auto qkv = random_floats(rng, static_cast<size_t>(rows) * w);
        // bf16 / fp8 pools: the same random values as bf16 bits / e4m3 codes (scale 1).
        const size_t es = elem == cuda::KvElem::kBF16 ? 2 : (elem == cuda::KvElem::kFP8 ? 1 : 4),
                     pool_bytes = pc.kpool.size() * es;
        std::vector<uint8_t> kb(pool_bytes), vb(pool_bytes);
        if (es == 4) {
          std::memcpy(kb.data(), pc.kpool.data(), pool_bytes);
          std::memcpy(vb.data(), pc.vpool.data(), pool_bytes);
        } else if (es == 1) {
          for (size_t i = 0; i < pc.kpool.size(); ++i)
            kb[i] = f32_to_fp8_e4m3(pc.kpool[i]), vb[i] = f32_to_fp8_e4m3(pc.vpool[i]);
        } else {
          for (size_t i = 0; i < pc.kpool.size(); ++i) {
            const uint16_t a = f32_to_bf16(pc.kpool[i]), b = f32_to_bf16(pc.vpool[i]);
            std::memcpy(&kb[2 * i], &a, 2);
            std::memcpy(&vb[2 * i], &b, 2);
          }
        }
        DevBuf<float> dct(ct), dsn(sn), dq(qkv), o1(static_cast<size_t>(rows) * qd), o2(o1.n), o3(o1.n),
            part(static_cast<size_t>(rows) * H * cuda::kAttentionMaxSplit * (D + 2));
        DevBuf<uint8_t> k1(kb), v1(vb), k2(kb), v2(vb), k3(kb), v3(vb);
        DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), cnt(static_cast<size_t>(rows) * H);
        cnt.up(std::vector<int32_t>(cnt.n, 0));
        cuda::attention_decode_rope(dq.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs,
                                    k1.p, v1.p, o1.p, nullptr, elem);
        const std::string what = "D=" + std::to_string(D) + " H=" + std::to_string(H) + " KVH=" +
                                 std::to_string(KVH) + (es == 2 ? " bf16" : (es == 1 ? " fp8" : " f32"));
        std::vector<float> fused;
        for (int ns : {maxchunks, cuda::kAttentionMaxSplit}) {
          for (int hb : {H / KVH, 1, 0}) {  // a block per KV head, per query head, automatic
            // 1, 3 or all of a row's chunks per block (the 11-16 chunks of contexts 1025 / 1500 in 4-6 blocks with
            // 3), automatic; bf16 (tensor cores): also 2, 3 or 4 chunks per block at once, a warp each (the rule
            // picks these at 9 rows).
            for (auto [cpb, wpb] : std::vector<std::pair<int, int>>{
                     {1, 0}, {3, 0}, {cuda::kAttentionMaxSplit, 0}, {0, 0}, {2, 2}, {3, 3}, {0, 4}}) {
              if (wpb > 0 && (elem != cuda::KvElem::kBF16 || hb != H / KVH)) continue;
              k2.up(kb), v2.up(vb);
              cuda::attention_decode_gqa(dq.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw,
                                         pc.bs, k2.p, v2.p, o2.p, ns, part.p, cnt.p, nullptr, elem, hb, cpb, nullptr,
                                         wpb);
              const std::string how = what + " nsplit " + std::to_string(ns) + ", heads per block " +
                                      std::to_string(hb) + ", chunks per block " + std::to_string(cpb) +
                                      ", warps per block " + std::to_string(wpb);
              EXPECT_EQ(k2.down(), k1.down()) << "k pool " << how;
              EXPECT_EQ(v2.down(), v1.down()) << "v pool " << how;
              const auto a = o1.down(), b = o2.down();
              // bf16 pools run on the tensor cores with q and the weights as two bf16 parts each (~16 bits): 3e-5
              // (one bf16 rounding of either would be ~1e-3); f32 / fp8 on the CUDA cores: 1e-5.
              const double tol = elem == cuda::KvElem::kBF16 ? 3e-5 : 1e-5;
              for (int r = 0; r < rows; ++r)
                EXPECT_LT(rel_err(&b[static_cast<size_t>(r) * qd], &a[static_cast<size_t>(r) * qd], qd), tol)
                    << how << " ctx " << ctx[r];
              if (fused.empty()) fused = b;
              EXPECT_EQ(b, fused) << how << ": the grid or the blocks' shares changed the bits";
              for (int32_t c : cnt.down()) ASSERT_EQ(c, 0) << "counters must be left zero (" << how << ")";
            }
          }
        }
        EXPECT_EQ(dq.down(), qkv) << "qkv left as it was";
        {  // q, k, v from the qkv projection's pending int8-GEMM sums: the bits of the epilogue's floats
          const int ld = w + 4;
          std::uniform_int_distribution<int> ad(-3000, 3000);
          std::vector<int32_t> acc(static_cast<size_t>(rows) * ld);
          for (auto& a : acc) a = ad(rng);
          std::vector<float> inv(rows);
          for (int r = 0; r < rows; ++r) inv[r] = 1e-3f * static_cast<float>(r + 1);
          DevBuf<int32_t> dacc(acc);
          DevBuf<float> dinv(inv), qe(qkv.size()), nan(std::vector<float>(qkv.size(), NAN)), o4(o1.n), o5(o1.n);
          cuda::PendingSums ps;
          ps.acc = dacc.p;
          ps.ldacc = ld;
          ps.inv_s = dinv.p;
          ps.ep.seg_end[0] = qd, ps.ep.seg_end[1] = qd + kvd, ps.ep.seg_end[2] = w;
          ps.ep.seg_scale[0] = 0.37f, ps.ep.seg_scale[1] = 1.9f, ps.ep.seg_scale[2] = 0.05f;
          cuda::TernaryEpilogue ep = ps.ep;
          ep.y = qe.p;
          ep.ldy = w;
          cuda::ternary_epilogue(dacc.p, ld, rows, w, dinv.p, ep, nullptr);
          DevBuf<uint8_t> k4(kb), v4(vb), k5(kb), v5(vb);
          cuda::attention_decode_gqa(qe.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs,
                                     k4.p, v4.p, o4.p, maxchunks, part.p, cnt.p, nullptr, elem);
          cuda::attention_decode_gqa(nan.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs,
                                     k5.p, v5.p, o5.p, maxchunks, part.p, cnt.p, nullptr, elem, 0, 0, &ps);
          EXPECT_EQ(o5.down(), o4.down()) << "pending qkv sums " << what;
          EXPECT_EQ(k5.down(), k4.down()) << "pending qkv sums, k pool " << what;
          EXPECT_EQ(v5.down(), v4.down()) << "pending qkv sums, v pool " << what;
          ps.parts = 2, ps.part_stride = static_cast<int64_t>(acc.size());  // a K-split GEMM's parts: refused
          EXPECT_THROW(cuda::attention_decode_gqa(nan.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p,
                                                  pc.btw, pc.bs, k5.p, v5.p, o5.p, maxchunks, part.p, cnt.p, nullptr,
                                                  elem, 0, 0, &ps),
                       Error);
          ps.parts = 1, ps.part_stride = 0;
          ps.ldacc = w + 2;  // not a multiple of 4
          EXPECT_THROW(cuda::attention_decode_gqa(nan.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p,
                                                  pc.btw, pc.bs, k5.p, v5.p, o5.p, maxchunks, part.p, cnt.p, nullptr,
                                                  elem, 0, 0, &ps),
                       Error);
        }
        // Unfused after rope_kv_write, every row, then rows 1, 4, 6 through a row list into a poisoned output.
        DevBuf<float> dq3(qkv);
        cuda::rope_kv_write(dq3.p, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, k3.p, v3.p,
                            nullptr, elem);
        EXPECT_EQ(k3.down(), k1.down()) << "rope_kv_write k pool " << what;
        for (int hb : {H / KVH, 1}) {
          for (int cpb : {1, 3, cuda::kAttentionMaxSplit}) {
            // bf16: with cpb 3 also a warp per chunk
            for (int wpb : {0, 3}) {
              if (wpb > 0 && (elem != cuda::KvElem::kBF16 || cpb != 3)) continue;
              cuda::attention_gqa(dq3.p, w, nullptr, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, k3.p,
                                  v3.p, o3.p, maxchunks, part.p, cnt.p, nullptr, elem, hb, cpb, wpb);
              EXPECT_EQ(o3.down(), fused) << "unfused vs fused " << what << " heads per block " << hb
                                          << ", chunks per block " << cpb << ", warps per block " << wpb;
            }
          }
        }
        if (elem == cuda::KvElem::kBF16) {  // a warp per chunk needs chunks per block = warps <= 4
          for (auto [cpb, wpb] : std::vector<std::pair<int, int>>{{3, 2}, {5, 5}, {0, 5}, {0, -1}})
            EXPECT_THROW(cuda::attention_gqa(dq3.p, w, nullptr, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw,
                                             pc.bs, k3.p, v3.p, o3.p, maxchunks, part.p, cnt.p, nullptr, elem, 0,
                                             cpb, wpb),
                         Error)
                << "chunks per block " << cpb << ", warps per block " << wpb;
        }
        const std::vector<int32_t> list = {1, 4, 6};
        DevBuf<int32_t> dlist(list);
        o3.up(std::vector<float>(o3.n, -7.0f));
        cuda::attention_gqa(dq3.p, w, dlist.p, 3, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, k3.p, v3.p, o3.p,
                            maxchunks, part.p, cnt.p, nullptr, elem);
        const auto c3 = o3.down();
        for (int r = 0; r < rows; ++r) {
          const bool listed = std::find(list.begin(), list.end(), r) != list.end();
          for (int i = 0; i < qd; ++i) {
            const size_t at = static_cast<size_t>(r) * qd + i;
            ASSERT_EQ(c3[at], listed ? fused[at] : -7.0f) << what << " row " << r << (listed ? " listed" : " not listed");
          }
        }
        for (int32_t c : cnt.down()) ASSERT_EQ(c, 0);
      }
    }
  }
  DevBuf<float> o(1);
  EXPECT_FALSE(cuda::attention_gqa_supported(18, 2, 64));  // 9 query heads per KV head
  EXPECT_THROW(cuda::attention_decode_gqa(o.p, 1, 1, 18, 2, 64, o.p, o.p, nullptr, nullptr, nullptr, 1, 16, o.p, o.p,
                                          o.p, 1, nullptr, nullptr, nullptr),
               Error);
  EXPECT_EQ(cuda::attention_gqa_chunks(1), 1);
  EXPECT_EQ(cuda::attention_gqa_chunks(32), 1);
  EXPECT_EQ(cuda::attention_gqa_chunks(33), 2);
  EXPECT_EQ(cuda::attention_gqa_chunks(512), 16);
  EXPECT_EQ(cuda::attention_gqa_chunks(513), 9);  // 64-position chunks: fewer of them than at 512
  EXPECT_EQ(cuda::attention_gqa_chunks(4096), 16);
}

// The prefill tiling: runs of one sequence with consecutive positions, cut at tile_rows.
TEST(CudaKernels, AttentionPrefillTiles) {
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 9, 10, 5, 6, 0};
  const std::vector<int32_t> seq = {0, 0, 0, 0, 0, 0, 0, 1, 1, 2};
  std::vector<int32_t> tiles;
  cuda::attention_prefill_tiles(pos.data(), seq.data(), 10, 3, tiles);
  EXPECT_EQ(tiles, (std::vector<int32_t>{0, 3, 3, 2, 5, 2, 7, 2, 9, 1}));
  EXPECT_EQ(cuda::attention_prefill_tile_rows(20, 5), 16);
  EXPECT_EQ(cuda::attention_prefill_tile_rows(8, 8), 64);
  EXPECT_EQ(cuda::attention_prefill_tile_rows(8, 3), 0);
  EXPECT_THROW(cuda::attention_prefill_tiles(pos.data(), seq.data(), 10, 0, tiles), Error);
}

// Flash-style prefill attention equals attention_paged (and a double reference on a sample of rows) within
// 1e-5 relative per row: chunks of 300 rows at position 0, 300 rows ending at position 1499 (context 1500),
// 17 rows at 0, a single row at 0 and a decode row at 799, head_dim 64 / 128, GQA ratios 1 and 4.
TEST(CudaKernels, AttentionPrefillMatchesPaged) {
  REQUIRE_GPU();
  std::mt19937 rng(47);
  struct Chunk { int start, T; };
  const std::vector<Chunk> chunks = {{0, 300}, {1200, 300}, {0, 17}, {0, 1}, {799, 1}};
  std::vector<int> ctx;
  for (const auto& c : chunks) ctx.push_back(c.start + c.T);
  for (int D : {64, 128}) {
    for (auto [H, KVH] : std::vector<std::pair<int, int>>{{4, 4}, {8, 2}}) {
      PagedCase pc(rng, H, KVH, D, ctx);
      const int qd = H * D, ldq = qd + 2 * KVH * D;
      std::vector<int32_t> pos, seq;
      for (size_t s = 0; s < chunks.size(); ++s)
        for (int t = 0; t < chunks[s].T; ++t) pos.push_back(chunks[s].start + t), seq.push_back(static_cast<int>(s));
      const int rows = static_cast<int>(pos.size());
      const auto q = random_floats(rng, static_cast<size_t>(rows) * ldq);
      std::vector<int32_t> tiles;
      const int tr = cuda::attention_prefill_tile_rows(H, KVH);
      ASSERT_EQ(tr, 64 / (H / KVH));
      cuda::attention_prefill_tiles(pos.data(), seq.data(), rows, tr, tiles);
      DevBuf<float> dq(q), dk(pc.kpool), dv(pc.vpool), o1(static_cast<size_t>(rows) * qd),
          o2(static_cast<size_t>(rows) * qd);
      DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), dtiles(tiles);
      cuda::attention_paged(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p, o1.p,
                            nullptr);
      cuda::attention_prefill(dq.p, ldq, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p, o2.p,
                              dtiles.p, static_cast<int>(tiles.size() / 2), nullptr);
      const auto a = o1.down(), b = o2.down();
      for (int r = 0; r < rows; ++r) {
        ASSERT_LT(rel_err(&b[static_cast<size_t>(r) * qd], &a[static_cast<size_t>(r) * qd], qd), 1e-5)
            << "D=" << D << " H=" << H << " KVH=" << KVH << " row " << r << " pos " << pos[r];
        if (r % 13 == 0 || r == rows - 1) {
          const auto want = pc.ref(&q[static_cast<size_t>(r) * ldq], pos[r], seq[r]);
          EXPECT_LT(rel_err(&b[static_cast<size_t>(r) * qd], want.data(), qd), 1e-5) << "vs double, row " << r;
        }
      }
    }
  }
}


// bf16 KV pools: rope_kv_write stores each k / v rounded to bf16 (round to nearest even, core/dtype.h); the paged,
// split-K and prefill kernels over them give bit for bit what they give over f32 pools holding the rounded values;
// the fused decode kernel writes the same pool bits and attends the rounded new position (within 1e-5 of the
// unfused kernels, which add it in another order).
TEST(CudaKernels, Bf16KvPoolsMatchF32PoolsOfRoundedValues) {
  REQUIRE_GPU();
  std::mt19937 rng(53);
  for (int D : {64, 128}) {
    const int H = 8, KVH = 2, bs = 16, half = D / 2, qd = H * D, kvd = KVH * D, w = qd + 2 * kvd;
    const std::vector<int> T = {37, 300};  // prefill lengths of two sequences
    PagedCase pc(rng, H, KVH, D, T);
    const size_t pool = pc.kpool.size();
    const int maxpos = 400;
    std::vector<float> ct(static_cast<size_t>(maxpos) * half), sn(ct.size());
    for (size_t i = 0; i < ct.size(); ++i) ct[i] = std::cos(0.003f * i), sn[i] = std::sin(0.003f * i);
    std::vector<int32_t> pos, seq;
    for (int s = 0; s < 2; ++s)
      for (int t = 0; t < T[s]; ++t) pos.push_back(t), seq.push_back(s);
    const int rows = static_cast<int>(pos.size());
    const auto qkv = random_floats(rng, static_cast<size_t>(rows) * w);
    DevBuf<float> dct(ct), dsn(sn), q32(qkv), q16(qkv), k32(pool), v32(pool), o32(static_cast<size_t>(rows) * qd),
        o16(static_cast<size_t>(rows) * qd), part(static_cast<size_t>(rows) * H * cuda::kAttentionMaxSplit * (D + 2));
    DevBuf<uint16_t> k16(pool), v16(pool);
    DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), cnt(static_cast<size_t>(rows) * H);
    cnt.up(std::vector<int32_t>(cnt.n, 0));
    k32.up(std::vector<float>(pool, 0.0f)), v32.up(std::vector<float>(pool, 0.0f));
    k16.up(std::vector<uint16_t>(pool, 0)), v16.up(std::vector<uint16_t>(pool, 0));
    cuda::rope_kv_write(q32.p, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, nullptr);
    cuda::rope_kv_write(q16.p, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, bs, k16.p, v16.p, nullptr,
                        cuda::KvElem::kBF16);
    EXPECT_EQ(q32.down(), q16.down()) << "rotated q / k rows";
    auto kf = k32.down(), vf = v32.down();
    const auto kb = k16.down(), vb = v16.down();
    for (size_t i = 0; i < pool; ++i) {
      ASSERT_EQ(kb[i], f32_to_bf16(kf[i])) << "k pool " << i;
      ASSERT_EQ(vb[i], f32_to_bf16(vf[i])) << "v pool " << i;
      kf[i] = bf16_to_f32(kb[i]), vf[i] = bf16_to_f32(vb[i]);
    }
    k32.up(kf), v32.up(vf);
    const cuda::KvElem bf = cuda::KvElem::kBF16;
    cuda::attention_paged(q32.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, o32.p, nullptr);
    cuda::attention_paged(q16.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k16.p, v16.p, o16.p, nullptr,
                          bf);
    EXPECT_EQ(o32.down(), o16.down()) << "paged D=" << D;
    cuda::attention_paged_split(q32.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, o32.p, 4,
                                part.p, cnt.p, nullptr);
    cuda::attention_paged_split(q16.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k16.p, v16.p, o16.p, 4,
                                part.p, cnt.p, nullptr, bf);
    EXPECT_EQ(o32.down(), o16.down()) << "split D=" << D;
    std::vector<int32_t> tiles;
    cuda::attention_prefill_tiles(pos.data(), seq.data(), rows, cuda::attention_prefill_tile_rows(H, KVH), tiles);
    DevBuf<int32_t> dtiles(tiles);
    const int nt = static_cast<int>(tiles.size() / 2);
    cuda::attention_prefill(q32.p, w, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, o32.p, dtiles.p, nt,
                            nullptr);
    cuda::attention_prefill(q16.p, w, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k16.p, v16.p, o16.p, dtiles.p, nt,
                            nullptr, bf);
    EXPECT_EQ(o32.down(), o16.down()) << "prefill D=" << D;

    // Fused decode of the last position of each sequence over the bf16 pools vs rope_kv_write + attention_paged.
    std::vector<int32_t> dp = {T[0] - 1, T[1] - 1}, ds = {0, 1};
    const auto dq = random_floats(rng, static_cast<size_t>(2) * w);
    DevBuf<float> fq(dq), uq(dq), fo(static_cast<size_t>(2) * qd), uo(static_cast<size_t>(2) * qd);
    DevBuf<int32_t> ddp(dp), dds(ds);
    cuda::attention_decode_rope(fq.p, w, 2, H, KVH, D, dct.p, dsn.p, ddp.p, dds.p, dbt.p, pc.btw, bs, k16.p, v16.p,
                                fo.p, nullptr, bf);
    const auto kfused = k16.down(), vfused = v16.down();
    cuda::rope_kv_write(uq.p, 2, H, KVH, D, dct.p, dsn.p, ddp.p, dds.p, dbt.p, pc.btw, bs, k16.p, v16.p, nullptr, bf);
    EXPECT_EQ(k16.down(), kfused) << "fused k write D=" << D;
    EXPECT_EQ(v16.down(), vfused) << "fused v write D=" << D;
    cuda::attention_paged(uq.p, w, 2, H, KVH, D, ddp.p, dds.p, dbt.p, pc.btw, bs, k16.p, v16.p, uo.p, nullptr, bf);
    const auto a = fo.down(), b = uo.down();
    for (int r = 0; r < 2; ++r)
      EXPECT_LT(rel_err(&a[static_cast<size_t>(r) * qd], &b[static_cast<size_t>(r) * qd], qd), 1e-5) << "fused D=" << D;
  }
}

// fp8 e4m3 KV pools with a per-tensor scale: rope_kv_write stores e4m3(x / scale) as the CPU cache does
// (kv/fp8.h); the paged, split-K and prefill kernels over them give bit for bit what they give over f32 pools
// holding the dequantized values; the fused decode kernels (per head and GQA) write the same pool bytes as
// rope_kv_write and attend within 1e-5 of the unfused kernel.
TEST(CudaKernels, Fp8KvPoolsMatchF32PoolsOfDequantizedValues) {
  REQUIRE_GPU();
  std::mt19937 rng(59);
  const float scale = 0.0137f;  // random values in [-1, 1] / scale reach the e4m3 range (448) only partly
  for (int D : {64, 128}) {
    const int H = 8, KVH = 2, bs = 16, half = D / 2, qd = H * D, kvd = KVH * D, w = qd + 2 * kvd;
    const std::vector<int> T = {37, 300};
    PagedCase pc(rng, H, KVH, D, T);
    const size_t pool = pc.kpool.size();
    const int maxpos = 400;
    std::vector<float> ct(static_cast<size_t>(maxpos) * half), sn(ct.size());
    for (size_t i = 0; i < ct.size(); ++i) ct[i] = std::cos(0.003f * i), sn[i] = std::sin(0.003f * i);
    std::vector<int32_t> pos, seq;
    for (int s = 0; s < 2; ++s)
      for (int t = 0; t < T[s]; ++t) pos.push_back(t), seq.push_back(s);
    const int rows = static_cast<int>(pos.size());
    const auto qkv = random_floats(rng, static_cast<size_t>(rows) * w, 6.0f);
    DevBuf<float> dct(ct), dsn(sn), q32(qkv), q8(qkv), k32(pool), v32(pool), o32(static_cast<size_t>(rows) * qd),
        o8(static_cast<size_t>(rows) * qd), part(static_cast<size_t>(rows) * H * cuda::kAttentionMaxSplit * (D + 2));
    DevBuf<uint8_t> k8(pool), v8(pool);
    DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), cnt(static_cast<size_t>(rows) * H);
    cnt.up(std::vector<int32_t>(cnt.n, 0));
    k32.up(std::vector<float>(pool, 0.0f)), v32.up(std::vector<float>(pool, 0.0f));
    k8.up(std::vector<uint8_t>(pool, 0)), v8.up(std::vector<uint8_t>(pool, 0));
    const cuda::KvFormat f8(cuda::KvElem::kFP8, scale);
    cuda::rope_kv_write(q32.p, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, nullptr);
    cuda::rope_kv_write(q8.p, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, bs, k8.p, v8.p, nullptr, f8);
    EXPECT_EQ(q32.down(), q8.down()) << "rotated q / k rows";
    auto kf = k32.down(), vf = v32.down();
    const auto kb = k8.down(), vb = v8.down();
    for (size_t i = 0; i < pool; ++i) {
      ASSERT_EQ(kb[i], f32_to_fp8_e4m3(kf[i] / scale)) << "k pool " << i << " value " << kf[i];
      ASSERT_EQ(vb[i], f32_to_fp8_e4m3(vf[i] / scale)) << "v pool " << i << " value " << vf[i];
      kf[i] = fp8_e4m3_to_f32(kb[i]) * scale, vf[i] = fp8_e4m3_to_f32(vb[i]) * scale;
    }
    k32.up(kf), v32.up(vf);
    cuda::attention_paged(q32.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, o32.p, nullptr);
    cuda::attention_paged(q8.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k8.p, v8.p, o8.p, nullptr, f8);
    EXPECT_EQ(o32.down(), o8.down()) << "paged D=" << D;
    cuda::attention_paged_split(q32.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, o32.p, 4,
                                part.p, cnt.p, nullptr);
    cuda::attention_paged_split(q8.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k8.p, v8.p, o8.p, 4,
                                part.p, cnt.p, nullptr, f8);
    EXPECT_EQ(o32.down(), o8.down()) << "split D=" << D;
    std::vector<int32_t> tiles;
    cuda::attention_prefill_tiles(pos.data(), seq.data(), rows, cuda::attention_prefill_tile_rows(H, KVH), tiles);
    DevBuf<int32_t> dtiles(tiles);
    const int nt = static_cast<int>(tiles.size() / 2);
    cuda::attention_prefill(q32.p, w, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, o32.p, dtiles.p, nt,
                            nullptr);
    cuda::attention_prefill(q8.p, w, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k8.p, v8.p, o8.p, dtiles.p, nt,
                            nullptr, f8);
    EXPECT_EQ(o32.down(), o8.down()) << "prefill D=" << D;

    // Fused decode of the last position of each sequence (per-head and GQA kernels) vs rope_kv_write + paged.
    std::vector<int32_t> dp = {T[0] - 1, T[1] - 1}, ds = {0, 1};
    const auto dq = random_floats(rng, static_cast<size_t>(2) * w, 6.0f);
    DevBuf<float> fq(dq), gq(dq), uq(dq), fo(static_cast<size_t>(2) * qd), go(static_cast<size_t>(2) * qd),
        uo(static_cast<size_t>(2) * qd);
    DevBuf<int32_t> ddp(dp), dds(ds);
    const auto k_before = k8.down(), v_before = v8.down();
    cuda::attention_decode_rope(fq.p, w, 2, H, KVH, D, dct.p, dsn.p, ddp.p, dds.p, dbt.p, pc.btw, bs, k8.p, v8.p,
                                fo.p, nullptr, f8);
    const auto kfused = k8.down(), vfused = v8.down();
    k8.up(k_before), v8.up(v_before);
    DevBuf<float> gpart(static_cast<size_t>(2) * H * cuda::kAttentionMaxSplit * (D + 2));
    DevBuf<int32_t> gcnt(static_cast<size_t>(2) * H);
    gcnt.up(std::vector<int32_t>(gcnt.n, 0));
    cuda::attention_decode_gqa(gq.p, w, 2, H, KVH, D, dct.p, dsn.p, ddp.p, dds.p, dbt.p, pc.btw, bs, k8.p, v8.p, go.p,
                               cuda::kAttentionMaxSplit, gpart.p, gcnt.p, nullptr, f8);
    EXPECT_EQ(k8.down(), kfused) << "GQA k write D=" << D;
    EXPECT_EQ(v8.down(), vfused) << "GQA v write D=" << D;
    cuda::rope_kv_write(uq.p, 2, H, KVH, D, dct.p, dsn.p, ddp.p, dds.p, dbt.p, pc.btw, bs, k8.p, v8.p, nullptr, f8);
    EXPECT_EQ(k8.down(), kfused) << "fused k write D=" << D;
    EXPECT_EQ(v8.down(), vfused) << "fused v write D=" << D;
    cuda::attention_paged(uq.p, w, 2, H, KVH, D, ddp.p, dds.p, dbt.p, pc.btw, bs, k8.p, v8.p, uo.p, nullptr, f8);
    const auto a = fo.down(), b = uo.down(), c = go.down();
    for (int r = 0; r < 2; ++r) {
      EXPECT_LT(rel_err(&a[static_cast<size_t>(r) * qd], &b[static_cast<size_t>(r) * qd], qd), 1e-5) << "fused D=" << D;
      EXPECT_LT(rel_err(&c[static_cast<size_t>(r) * qd], &b[static_cast<size_t>(r) * qd], qd), 1e-5) << "GQA D=" << D;
    }
  }
}

#endif
