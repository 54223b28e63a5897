// tritium cuda-bench: the CUDA kernels on the 2B4T shapes vs cuBLAS bf16, and end-to-end decode throughput of a
// model on the GPU at several batch sizes with the HBM roofline. Each decode step is a forward plus greedy sampling on
// the device (Backend::forward_sample: only the ids come back, fed to the next step), as the server runs it.
#include <fmt/format.h>

#include <chrono>
#include <random>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "formats/ternary_tc2.h"
#include "engine/engine.h"
#include "kv/block_allocator.h"
#include "backend/cuda/cuda_backend.h"
#include "bench/cuda_kernel_bench.h"
#include "bench/cuda_grouped_bench.h"
#include "bench/cuda_int8_bench.h"

namespace tritium::cli {
namespace {

struct CudaBenchArgs {
  ModelOptions model;
  bool kernels = false;
  bool int8_kernels = false;
  bool grouped_kernels = false;
  std::vector<int> kernel_batches = {1, 4, 16, 512};
  bool no_pdl = false;
  std::vector<int> batches = {1, 16};
  int prompt = 32;
  int gen = 64;
  int reps = 3;
  std::string kv_dtype = "auto";
};

/// Bytes of weights the GPU reads per decode step: tc2 ternary projections (+ their float32 group scales) / int8 /
/// f32 projections, and the lm_head (ternary as the projections, int8 codes, or bf16).
double gpu_weight_bytes(const Transformer& m) {
  auto ternary = [](const TernaryLinear& t) {
    const double codes = static_cast<double>(cuda::Tc2Shape::of(t.out_features(), t.in_features()).bytes());
    return codes + (t.has_group_scales() ? 4.0 * static_cast<double>(t.out_features() * t.packed().groups()) : 0.0);
  };
  double b = 0;
  auto lin = [&](const Linear& l) {
    if (const auto* t = dynamic_cast<const TernaryLinear*>(&l)) b += ternary(*t);
    else if (dynamic_cast<const Int8Linear*>(&l)) b += static_cast<double>(l.out_features() * l.in_features());
    else b += 4.0 * static_cast<double>(l.out_features() * l.in_features());
  };
  for (const auto& L : m.layers()) {
    lin(*L.qkv);
    lin(*L.o);
    lin(*L.gate_up);
    lin(*L.down);
  }
  const Linear& h = m.lm_head();
  const double head = static_cast<double>(h.out_features() * h.in_features());
  if (const auto* t = dynamic_cast<const TernaryLinear*>(&h)) b += ternary(*t);
  else b += dynamic_cast<const Int8Linear*>(&h) ? head : 2.0 * head;  // int8 codes or bf16
  return b;
}

int run(CudaBenchArgs a) {
  if (a.kernels) {
    CudaKernelBenchOptions ko;
    ko.batches = a.kernel_batches;
    fmt::print("{}\n", cuda_kernel_bench(ko));
  }
  if (a.int8_kernels) fmt::print("{}\n", cuda_int8_kernel_bench(CudaKernelBenchOptions{}));
  if (a.grouped_kernels) {
    CudaKernelBenchOptions ko;
    ko.batches = a.kernel_batches;
    fmt::print("{}\n", cuda_grouped_kernel_bench(ko));
  }
  if (a.model.model_dir.empty()) return 0;
  cuda_set_dependent_launch(!a.no_pdl);
  a.model.device = a.model.device == "cpu" ? "cuda" : a.model.device;
  LoadedModel lm = load_model(a.model, false);
  const Transformer& model = lm.model();
  Backend& be = *lm.backend;
  const ModelConfig& c = model.config();
  fmt::print("model {} on {} (loaded in {:.1f} s)\n", lm.dir, be.name(),
             lm.load_seconds);
  const double bw = cuda_copy_bandwidth_gbs(0);
  const double wbytes = gpu_weight_bytes(model);
  const double roof_step = wbytes / (bw * 1e9);
  fmt::print("weights read per decode step: {:.1f} MB; copy bandwidth {:.0f} GB/s -> roofline {:.1f} steps/s\n\n",
             wbytes / 1e6, bw, 1.0 / roof_step);
  const KvDType kv_dtype = kv_dtype_for(a.kv_dtype);
  // fp8: the per-tensor scale calibrated as the server does (engine/engine.h calibrate_kv_scale).
  // Without a tokenizer (synthetic models) 128 fixed pseudo-random tokens stand for the text.
  std::vector<int32_t> cal;
  if (lm.tokenizer) {
    cal = lm.tokenizer->encode(kv_calibration_text(), true);
  } else {
    for (int i = 0; i < 128; ++i) cal.push_back(static_cast<int32_t>((7919LL * i + 13) % c.vocab_size));
  }
  const float kv_scale = calibrate_kv_scale(be, kv_dtype, cal);
  fmt::print("KV cache {}{}, {} bytes/token; sampling {}\n\n", kv_dtype_name(kv_dtype),
             kv_dtype == KvDType::kFP8E4M3 ? fmt::format(" (scale {:.4g})", kv_scale) : "",
             KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 1, kv_dtype}.bytes_per_token(),
             be.samples_on_device() ? "greedy on the device" : "none (logits copied to the host)");
  fmt::print("| batch | prompt | generated | prefill tok/s | decode steps/s | decode tok/s | % of roofline (steps) |\n");
  fmt::print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  using clock = std::chrono::steady_clock;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  for (int B : a.batches) {
    const int total = a.prompt + a.gen;
    KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, static_cast<int64_t>(B) * ((total + 15) / 16)};
    spec.dtype = kv_dtype;
    spec.quant_scale = kv_scale;
    KvCache cache(spec);
    BlockAllocator alloc(spec.num_blocks);
    std::vector<BlockTable> bts(B);
    for (auto& bt : bts)
      if (!bt.reserve(alloc, total, spec.block_size)) fail("cuda-bench: KV pool too small");
    std::vector<std::vector<int32_t>> prompts(B, std::vector<int32_t>(a.prompt));
    for (auto& p : prompts)
      for (auto& t : p) t = tok(rng);
    std::vector<double> pre, dec;
    std::vector<float> logits;
    std::vector<RowSampling> rows(B);
    for (auto& r : rows) r.temperature = 0;  // greedy
    std::vector<SampledToken> sampled;
    auto step = [&](std::span<const BatchChunk> batch) {
      if (be.samples_on_device()) be.forward_sample(batch, cache, rows, sampled);
      else be.forward(batch, cache, logits);
    };
    for (int r = 0; r < a.reps + 1; ++r) {
      std::vector<BatchChunk> batch(B);
      for (int b = 0; b < B; ++b) batch[b] = BatchChunk{prompts[b], 0, bts[b].blocks, false};
      auto t0 = clock::now();
      step(batch);
      const double ps = std::chrono::duration<double>(clock::now() - t0).count();
      std::vector<int32_t> next(B);
      for (int b = 0; b < B; ++b) next[b] = tok(rng);
      t0 = clock::now();
      for (int g = 0; g < a.gen; ++g) {
        for (int b = 0; b < B; ++b)
          batch[b] = BatchChunk{std::span<const int32_t>(&next[b], 1), a.prompt + g, bts[b].blocks, false};
        step(batch);
        for (int b = 0; b < B; ++b)
          next[b] = be.samples_on_device() ? sampled[b].id : static_cast<int32_t>((next[b] * 7 + g) % c.vocab_size);
      }
      const double ds = std::chrono::duration<double>(clock::now() - t0).count();
      if (r > 0) {
        pre.push_back(B * a.prompt / ps);
        dec.push_back(a.gen / ds);
      }
    }
    std::sort(pre.begin(), pre.end());
    std::sort(dec.begin(), dec.end());
    const double steps = dec[dec.size() / 2];
    fmt::print("| {} | {} | {} | {:.0f} | {:.1f} | {:.1f} | {:.0f}% |\n", B, a.prompt, a.gen, pre[pre.size() / 2],
               steps, steps * B, 100.0 * steps * roof_step);
  }
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<CudaBenchArgs>();
  CLI::App* sub = app.add_subcommand("cuda-bench", "CUDA kernels vs cuBLAS bf16 and end-to-end GPU decode throughput");
  add_model_options(sub, a->model);
  sub->add_flag("--kernels", a->kernels, "time the kernels on the 2B4T shapes");
  sub->add_flag("--int8-kernels", a->int8_kernels, "time the int8 GEMM / projections on Qwen2-1.5B shapes vs cuBLAS bf16");
  sub->add_flag("--grouped-kernels", a->grouped_kernels,
                "time the group-scaled ternary kernel (Ternary Bonsai) on Qwen3-8B shapes vs cuBLASLt int8 and cuBLAS bf16");
  sub->add_option("--kernel-batches", a->kernel_batches, "token counts of the kernel table")->delimiter(',');
  sub->add_flag("--no-pdl", a->no_pdl, "end-to-end decode without programmatic dependent launch");
  sub->add_option("--batch", a->batches, "decode batch sizes (sequences)")->delimiter(',');
  sub->add_option("--prompt", a->prompt, "prompt tokens per sequence")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--gen", a->gen, "decode steps")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--kv-cache-dtype", a->kv_dtype, "KV cache dtype: auto (bf16), f32, bf16, fp8 (e4m3, calibrated per-tensor scale)");
  sub->add_option("-r,--repetitions", a->reps, "repetitions (median; one more as warm-up)")->check(CLI::Range(1, 100));
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
