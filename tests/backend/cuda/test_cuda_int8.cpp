// The int8 linear layers on the GPU (backend/cuda/int8_linear.h) against the CPU Int8Projection: the integer GEMM
// exactly, every method's outputs bit for bit (weight-only int8 within a stated tolerance), batch independence
// on the GPU, and tiny-qwen2 under LLM.int8() and vector-wise int8 on the GPU against the CPU (greedy tokens,
// perplexity). Skipped (visibly) without CUDA or without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/int8_gemm.h"
#include "model/loader.h"
#include "quant/int8_projection.h"
#include "backend/cuda/cuda_backend.h"
#include "test_util.h"

#if TRITIUM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "eval/perplexity.h"
#include "eval/text_file.h"
#include "kernels/cuda/kernels.h"
#include "kv/block_allocator.h"
#include "backend/cuda/int8_linear.h"
#include "engine/generator.h"
#endif

using namespace tritium;

#if !TRITIUM_HAVE_CUDA

TEST(CudaInt8, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA: CUDA int8 tests skipped"; }

#else

namespace {

#define REQUIRE_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: CUDA int8 test skipped"

template <class T>
struct DevVec {
  T* p = nullptr;
  size_t n = 0;
  explicit DevVec(size_t count) : n(count) {
    cuda::check(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(count * sizeof(T), 256)), "cudaMalloc");
    cuda::check(cudaMemset(p, 0, std::max<size_t>(count * sizeof(T), 256)), "cudaMemset");
  }
  explicit DevVec(const std::vector<T>& h) : DevVec(h.size()) { put(h); }
  ~DevVec() { cudaFree(p); }
  DevVec(const DevVec&) = delete;
  DevVec& operator=(const DevVec&) = delete;
  void put(const std::vector<T>& h) {
    cuda::check(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "H2D");
  }
  std::vector<T> get() const {
    std::vector<T> h(n);
    cuda::check(cudaDeviceSynchronize(), "sync");
    cuda::check(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "D2H");
    return h;
  }
};

const Int8Method kAllMethods[] = {Int8Method::kAbsmax,     Int8Method::kZeropoint, Int8Method::kRowwise,
                                  Int8Method::kVectorwise, Int8Method::kLlmInt8,   Int8Method::kWeightOnly};

/// Row partitions used by the tests (first row of each request).
std::vector<int64_t> partition_for(int M) {
  switch (M) {
    case 1: return {0};
    case 3: return {0, 1, 2};
    case 17: return {0, 5, 6, 17 - 4};
    default: return {0, M / 3, M / 3 + 1, M - 7};
  }
}

std::vector<int32_t> seq_of(const std::vector<int64_t>& rb, int M) {
  std::vector<int32_t> s(M);
  for (size_t g = 0; g < rb.size(); ++g) {
    const int64_t e = g + 1 < rb.size() ? rb[g + 1] : M;
    for (int64_t r = rb[g]; r < e; ++r) s[r] = static_cast<int32_t>(g);
  }
  return s;
}

/// Activations with per-request outlier columns (different columns in different requests), some negative
/// rows, a shifted request (zero-point sees an asymmetric range) and an all-zero row.
std::vector<float> activations(std::mt19937& rng, int M, int K, const std::vector<int64_t>& rb) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(M) * K);
  for (auto& v : x) v = nd(rng);
  std::uniform_int_distribution<int> col(0, K - 1);
  for (size_t g = 0; g < rb.size(); ++g) {
    const int64_t b = rb[g], e = g + 1 < rb.size() ? rb[g + 1] : M;
    const int nout = static_cast<int>(g % 3);  // 0, 1 or 2 outlier columns
    for (int j = 0; j < nout; ++j) {
      const int c = col(rng);
      for (int64_t r = b; r < e; ++r)
        if ((r + j) % 2 == 0 || e - b == 1) x[r * K + c] = (r % 3 == 0 ? -1.0f : 1.0f) * (7.0f + 20.0f * j);
    }
    if (g % 4 == 3)
      for (int64_t i = b * K; i < e * K; ++i) x[i] = x[i] * 0.5f + 2.0f;
  }
  if (M >= 17) std::fill(x.begin() + 4 * K, x.begin() + 5 * K, 0.0f);
  return x;
}

std::vector<float> random_weights(std::mt19937& rng, int N, int K) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(N) * K);
  for (auto& v : w) v = nd(rng);
  return w;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

}  // namespace

TEST(CudaInt8, GemmExactRaggedBothKernels) {
  REQUIRE_GPU();
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> d(-127, 127);
  cuda::Int8Workspace ws;
  for (auto [N, K] : std::vector<std::pair<int, int>>{{37, 100}, {130, 1000}, {16, 16}, {257, 4099}}) {
    const int np = (N + 15) / 16 * 16, kp = (K + 15) / 16 * 16;
    for (int M : {1, 3, 8, 17, 100}) {
      std::vector<int8_t> w(static_cast<size_t>(N) * K), x(static_cast<size_t>(M) * K);
      for (auto& v : w) v = static_cast<int8_t>(d(rng));
      for (auto& v : x) v = static_cast<int8_t>(d(rng));
      std::vector<int32_t> ref(static_cast<size_t>(M) * N);
      gemm_s8s8_s32(x.data(), w.data(), nullptr, M, N, K, ref.data(), Int8Kernel::kRef);
      std::vector<int8_t> wp(static_cast<size_t>(np) * kp, 0), xp(static_cast<size_t>(M + 16) * kp, 0);
      for (int r = 0; r < N; ++r) std::copy_n(&w[static_cast<size_t>(r) * K], K, &wp[static_cast<size_t>(r) * kp]);
      for (int r = 0; r < M; ++r) std::copy_n(&x[static_cast<size_t>(r) * K], K, &xp[static_cast<size_t>(r) * kp]);
      DevVec<int8_t> dw(wp), dx(xp);
      for (int kind : {1, 2}) {
        DevVec<int32_t> acc(static_cast<size_t>(M + 16) * np);
        ws.gemm(dw.p, np, kp, dx.p, M, acc.p, np, nullptr, kind);
        const auto got = acc.get();
        int bad = 0;
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < N; ++n) bad += got[static_cast<size_t>(m) * np + n] != ref[static_cast<size_t>(m) * N + n];
        EXPECT_EQ(bad, 0) << "kind " << kind << " M " << M << " N " << N << " K " << K;
      }
    }
  }
}

// Every method, ragged shapes, several requests with different outlier columns in one batch, both GEMM kernels,
// with and without the residual add: GPU == CPU bit for bit (weight-only: within 1e-5 of the output scale).
TEST(CudaInt8, EveryMethodMatchesCpuBitForBit) {
  REQUIRE_GPU();
  std::mt19937 rng(3);
  size_t checked = 0, weight_only_checked = 0;
  double wo_worst = 0;
  for (auto [N, K] : std::vector<std::pair<int, int>>{{37, 100}, {96, 333}, {200, 1030}}) {
    const auto w = random_weights(rng, N, K);
    std::vector<float> bias(N);
    for (int n = 0; n < N; ++n) bias[n] = 0.01f * static_cast<float>(n % 13) - 0.05f;
    for (Int8Method method : kAllMethods) {
      for (OutlierWeights ow : {OutlierWeights::kFp16Copy, OutlierWeights::kInt8Dequant}) {
        if (ow == OutlierWeights::kInt8Dequant && method != Int8Method::kLlmInt8) continue;
        Int8ProjectionOptions opt;
        opt.outlier_weights = ow;
        opt.kernel = Int8Kernel::kRef;
        const Int8Projection cpu(method, w.data(), N, K, N % 2 ? bias.data() : nullptr, opt);
        cuda::Int8Workspace ws;
        const cuda::CudaInt8Linear gpu(cpu, ws);
        ws.ensure(100);
        for (int M : {1, 3, 17, 100}) {
          const auto rb = partition_for(M);
          const auto x = activations(rng, M, K, rb);
          std::vector<float> ref(static_cast<size_t>(M) * N);
          cpu.forward(x.data(), M, ref.data(), rb);
          DevVec<float> dx(x);
          DevVec<int32_t> dseq(seq_of(rb, M));
          std::vector<float> base(static_cast<size_t>(M) * N);
          for (size_t i = 0; i < base.size(); ++i) base[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
          for (int kind : {0, 1, 2}) {
            for (bool add : {false, true}) {
              DevVec<float> dy(base);
              gpu.forward(dx.p, K, M, dseq.p, nullptr, dy.p, N, add, ws, nullptr, kind);
              const auto got = dy.get();
              int bad = 0;
              double scale = 0, worst = 0;
              for (size_t i = 0; i < ref.size(); ++i) {
                const float want = add ? base[i] + ref[i] : ref[i];
                scale = std::max(scale, static_cast<double>(std::fabs(want)));
                worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want)));
                bad += !same_bits(got[i], want);
              }
              if (method == Int8Method::kWeightOnly) {
                EXPECT_LE(worst, 1e-5 * std::max(scale, 1.0)) << "weight-only M " << M << " N " << N << " K " << K;
                wo_worst = std::max(wo_worst, worst / std::max(scale, 1.0));
                ++weight_only_checked;
              } else {
                EXPECT_EQ(bad, 0) << int8_method_name(method) << (ow == OutlierWeights::kInt8Dequant ? " (int8 outlier weights)" : "")
                                  << " M " << M << " N " << N << " K " << K << " kind " << kind << " add " << add
                                  << " worst " << worst;
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  std::printf("  %zu bit-exact comparisons, %zu weight-only (worst |d| / max|y| = %.3g)\n", checked,
              weight_only_checked, wo_worst);
}

// A request gives the same output rows on the GPU alone as batched with others (different outlier columns,
// different scales), whichever GEMM kernel the batch size selects.
TEST(CudaInt8, BatchIndependentOnGpu) {
  REQUIRE_GPU();
  std::mt19937 rng(21);
  const int N = 120, K = 333, M = 40;
  const auto w = random_weights(rng, N, K);
  const std::vector<int64_t> rb = {0, 9, 10, 31};
  const auto x = activations(rng, M, K, rb);
  for (Int8Method method : kAllMethods) {
    const Int8Projection cpu(method, w.data(), N, K);
    cuda::Int8Workspace ws;
    const cuda::CudaInt8Linear gpu(cpu, ws);
    ws.ensure(M);
    DevVec<float> dx(x);
    DevVec<int32_t> dseq(seq_of(rb, M));
    DevVec<float> dy(static_cast<size_t>(M) * N);
    gpu.forward(dx.p, K, M, dseq.p, nullptr, dy.p, N, false, ws, nullptr);
    const auto batched = dy.get();
    for (size_t g = 0; g < rb.size(); ++g) {
      const int b = static_cast<int>(rb[g]), e = g + 1 < rb.size() ? static_cast<int>(rb[g + 1]) : M;
      const std::vector<float> xa(x.begin() + static_cast<size_t>(b) * K, x.begin() + static_cast<size_t>(e) * K);
      DevVec<float> dxa(xa);
      DevVec<float> dya(static_cast<size_t>(e - b) * N);
      gpu.forward(dxa.p, K, e - b, nullptr, nullptr, dya.p, N, false, ws, nullptr);
      const auto alone = dya.get();
      int bad = 0;
      for (size_t i = 0; i < alone.size(); ++i) bad += !same_bits(alone[i], batched[static_cast<size_t>(b) * N + i]);
      EXPECT_EQ(bad, 0) << int8_method_name(method) << " request " << g << " (" << e - b << " rows)";
    }
  }
}

// Selected rows through row_map (the lm_head path): request ids come from seq[row_map[r]].
TEST(CudaInt8, RowMapRequestsMatchCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(8);
  const int N = 64, K = 200, rows = 5;
  const auto w = random_weights(rng, N, K);
  const Int8Projection cpu(Int8Method::kLlmInt8, w.data(), N, K);
  cuda::Int8Workspace ws;
  const cuda::CudaInt8Linear gpu(cpu, ws);
  ws.ensure(rows);
  // Source batch of 12 rows in 4 sequences; the selected rows: all of seq 1 (3 rows), last of seq 2 and seq 3.
  const std::vector<int32_t> seq = {0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3};
  const std::vector<int32_t> row_map = {2, 3, 4, 8, 11};
  const std::vector<int64_t> rb = {0, 3, 4};
  const auto x = activations(rng, rows, K, rb);
  std::vector<float> ref(static_cast<size_t>(rows) * N);
  cpu.forward(x.data(), rows, ref.data(), rb);
  DevVec<float> dx(x), dy(static_cast<size_t>(rows) * N);
  DevVec<int32_t> dseq(seq), dmap(row_map);
  gpu.forward(dx.p, K, rows, dseq.p, dmap.p, dy.p, N, false, ws, nullptr);
  const auto got = dy.get();
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) bad += !same_bits(got[i], ref[i]);
  EXPECT_EQ(bad, 0);
}

namespace {

std::shared_ptr<Backend> load_qwen(const std::string& dir, const std::string& quant, const std::string& head,
                                   bool cuda) {
  LoadOptions lo;
  lo.quant = quant;
  lo.lm_head = head;
  std::shared_ptr<const Transformer> m = load_transformer(dir, lo);
  CudaOptions co;
  co.lm_head_bf16 = false;  // a float head in f32 like the CPU's (the int8 head is int8 on both)
  if (cuda) return make_cuda_backend(m, co);
  return test::cpu_backend(m);
}

std::vector<int32_t> greedy(Backend& m, const Tokenizer& tok, const std::string& prompt, int n) {
  Generator gen(m, tok);
  GenerateOptions go;
  go.max_new_tokens = n;
  go.sampling.temperature = 0;
  go.ignore_eos = true;
  return gen.generate(gen.encode_prompt(prompt), go, nullptr, nullptr);
}

double ppl(Backend& m, const std::vector<int32_t>& tokens) {
  PerplexityOptions po;
  po.n_ctx = 256;
  po.max_chunks = 8;
  po.bos_id = *m.model().config().bos_token_id;
  return compute_perplexity(m, tokens, po).ppl;
}

}  // namespace

// tiny-qwen2 with its projections (and, third case, its lm_head) in int8 on the GPU against the same model on
// the CPU. The int8 layers are bit-exact given the same input, but the GPU's float attention / softmax differ
// from the CPU's in the last bits, and a last-bit change of an activation can move one int8 code: the two
// forwards are close, not identical. Asserted: the first 24 greedy tokens equal (all 32 are reported; measured
// on an H200: 32/32 except one prompt at 29/32 with the int8 head), perplexity (8 chunks of 256) within 0.25%
// (measured 0.03-0.13% at 3 chunks); the float model (no --quant) is printed as the baseline.
TEST(CudaInt8, TinyQwen2GpuMatchesCpu) {
  REQUIRE_GPU();
  REQUIRE_SHARED_DATA(s);
  const std::string dir = s + "/models/tiny-qwen2";
  auto tok = Tokenizer::from_file(dir + "/tokenizer.json");
  const auto text = tok->encode(read_text_universal_newlines(s + "/data/wikitext-2-raw/wiki.test.raw"), false);
  struct Case { const char* quant; const char* head; };
  for (Case c : {Case{"", ""}, Case{"llm-int8", ""}, Case{"int8-vectorwise", ""}, Case{"llm-int8", "int8"}}) {
    auto cpu = load_qwen(dir, c.quant, c.head, false);
    auto gpu = load_qwen(dir, c.quant, c.head, true);
    for (const char* prompt : {"The history of the city", "Once upon a time"}) {
      const auto a = greedy(*cpu, *tok, prompt, 32), b = greedy(*gpu, *tok, prompt, 32);
      size_t same = 0;
      while (same < a.size() && same < b.size() && a[same] == b[same]) ++same;
      EXPECT_GE(same, 24u) << c.quant << " lm_head '" << c.head << "': " << prompt;
      std::printf("  %s (lm_head %s) '%s': %zu/32 greedy tokens equal\n", *c.quant ? c.quant : "float", *c.head ? c.head : "f32", prompt,
                  same);
    }
    const double pc = ppl(*cpu, text), pg = ppl(*gpu, text);
    EXPECT_NEAR(pg / pc, 1.0, 2.5e-3) << c.quant;
    std::printf("  %s (lm_head %s): ppl cpu %.4f gpu %.4f (ratio %.6f)\n", *c.quant ? c.quant : "float", *c.head ? c.head : "f32", pc,
                pg, pg / pc);
  }
}

// The whole GPU forward of an all-int8 model (projections LLM.int8(), lm_head int8) is batch independent:
// a sequence's logits are bit-identical alone and batched with another sequence that has other outliers.
TEST(CudaInt8, TinyQwen2BatchIndependentLogits) {
  REQUIRE_GPU();
  REQUIRE_SHARED_DATA(s);
  auto m = load_qwen(s + "/models/tiny-qwen2", "llm-int8", "int8", true);
  const ModelConfig& c = m->model().config();
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 16};
  std::vector<int32_t> a, b;
  for (int i = 0; i < 23; ++i) a.push_back((i * 131 + 7) % 1000 + 3);
  for (int i = 0; i < 40; ++i) b.push_back((i * 17 + 400) % 3000 + 3);
  const std::vector<int32_t> bta = {0, 1}, btb = {2, 3, 4}, btc = {5, 6};
  std::vector<float> alone, batched;
  {
    KvCache cache(spec);
    BatchChunk ch{a, 0, bta, true};
    m->forward(std::span<const BatchChunk>(&ch, 1), cache, alone);
  }
  {
    KvCache cache(spec);
    const BatchChunk chs[] = {{b, 0, btb, false}, {a, 0, btc, true}};
    m->forward(std::span<const BatchChunk>(chs, 2), cache, batched);
  }
  const size_t V = static_cast<size_t>(c.vocab_size);
  ASSERT_EQ(alone.size(), a.size() * V);
  ASSERT_EQ(batched.size(), (1 + a.size()) * V);
  int bad = 0;
  for (size_t i = 0; i < alone.size(); ++i) bad += !same_bits(alone[i], batched[V + i]);
  EXPECT_EQ(bad, 0);
}

#endif
