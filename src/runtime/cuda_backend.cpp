// The CUDA backend: device weights, device KV pool, the forward as a sequence of kernels, CUDA graphs for decode.
#if TRITIUM_HAVE_CUDA
#include "runtime/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include "core/error.h"
#include "kernels/cuda/decode_persistent.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/ternary_tc2.h"
#include "kernels/cuda/ternary_tcb.h"
#include "parallel/nccl_comm.h"
#include "runtime/cuda_int8_linear.h"

namespace tritium {
namespace {

using cuda::check;

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error in {}: status {}", what, static_cast<int>(s));
}

/// Device allocations owned by one object, freed together.
class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { release(); }
  template <class T>
  T* alloc(size_t count) {
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<size_t>(count * sizeof(T), 256)), "cudaMalloc");
    ptrs_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  T* upload(const T* host, size_t count) {
    T* d = alloc<T>(count);
    check(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    return d;
  }
  void release() {
    for (void* p : ptrs_) cudaFree(p);
    ptrs_.clear();
  }

 private:
  std::vector<void*> ptrs_;
};

struct DevLinear {
  enum Kind { kTernary, kF32, kBF16, kInt8 } kind = kF32;
  int n = 0, k = 0, np = 0, kp = 0;
  const uint32_t* w2 = nullptr;       // tc2 codes (layout tc2)
  const uint32_t* wt = nullptr;       // tcb bit planes (layout tcb; kernels/cuda/ternary_tcb.h)
  const int32_t* negc = nullptr;      // tcb: -1 weights per row [np]
  const float* wf = nullptr;          // f32 [n, k]
  const __nv_bfloat16* wb = nullptr;  // bf16 [n, k]
  const float* bias = nullptr;
  cuda::TernaryEpilogue seg;  // segment ends and scales (ternary)
  std::shared_ptr<const cuda::CudaInt8Linear> i8;  // int8 (runtime/cuda_int8_linear.h)
};

struct DevLayer {
  const float *in_norm = nullptr, *post_norm = nullptr, *attn_sub = nullptr, *ffn_sub = nullptr;
  DevLinear qkv, o, gate_up, down;
};

/// The device copy of a KvCache: per layer K and V pools [num_blocks, block_size, kv_dim] f32.
struct DevKv {
  int64_t num_blocks = 0;
  int block_size = 0, layers = 0, kv_dim = 0;
  float* base = nullptr;
  float* k(int l) const { return base + (2 * static_cast<size_t>(l)) * pool(); }
  float* v(int l) const { return base + (2 * static_cast<size_t>(l) + 1) * pool(); }
  size_t pool() const { return static_cast<size_t>(num_blocks) * block_size * kv_dim; }
  ~DevKv() {
    if (base) cudaFree(base);
  }
};

class CudaBackend final : public ForwardBackend {
 public:
  CudaBackend(const Transformer& model, const CudaOptions& o);
  ~CudaBackend() override;
  void forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) override;
  std::string name() const override { return name_; }

 private:
  DevLinear upload_linear(const Linear& lin, bool bf16);
  void ensure_workspace(int M, int S, int O);
  DevKv& device_kv(KvCache& cache);
  void run_body(int M, int S, int O, const DevKv& kv);
  /// Tensor parallel: local [M, widths[rank]] on every rank -> full [M, sum widths] (NCCL all-gather of blocks
  /// padded to max(widths), then one 2D copy per rank). `local` must have room for M * max(widths) floats.
  void gather_cols(const float* local, int M, const std::vector<int64_t>& widths, float* full);
  /// out[rows, n] (+)= lin(norm?(in rows via row_map)); in has row stride ldin.
  void apply(const DevLinear& lin, const float* in, int64_t ldin, const int32_t* row_map, const float* norm_w,
             int rows, float* out, int64_t ldout, bool add);
  /// out[rows, n] (+)= lin(x) for a ternary lin whose input is already quantized in xq_ / sumq_ / inv_s_ (and,
  /// tcb layout, its bit planes in xb_).
  void ternary_quantized(const DevLinear& lin, int rows, float* out, int64_t ldout, bool add);
  /// Where norm_quant writes the activation bit planes for lin at `rows` rows: xb_ when the tcb kernel will read
  /// them, else nullptr (tc2 weights, or more rows than tcb_max_tokens_).
  uint32_t* tcb_planes_for(const DevLinear& lin, int rows) const { return tcb_kernel_for(lin, rows) ? xb_ : nullptr; }
  /// lin runs the tcb kernel at `rows` rows (tcb weights, at most tcb_max_tokens_ rows); else the tc2 kernels.
  bool tcb_kernel_for(const DevLinear& lin, int rows) const { return lin.wt && rows <= tcb_max_tokens_; }

  ModelConfig c_;
  CudaOptions opts_;
  std::optional<TensorParallelPlan> tp_;
  float *full_in_ = nullptr, *gat_ = nullptr, *part_ = nullptr, *lg_local_ = nullptr;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* blas_ws_ = nullptr;
  DeviceArena weights_;
  const float* embed_ = nullptr;           // [vocab_end_ - vocab_begin_, hidden] (the rank's slice under TP)
  int vocab_begin_ = 0, vocab_end_ = 0;
  const float* final_norm_ = nullptr;
  const float *cos_ = nullptr, *sin_ = nullptr;
  std::vector<DevLayer> layers_;
  DevLinear lm_head_;
  std::unique_ptr<cuda::Int8Workspace> i8ws_;  // scratch of the int8 projections (created by the first one)
  int bt_width_ = 0;
  int max_kp_ = 0, max_n_ = 0;
  // Attention kernel choice (CudaOptions::attention_basic / TRITIUM_CUDA_ATTENTION) and per-forward state.
  bool attn_basic_ = false;
  int attn_split_ = 1;       // split-K chunks of this forward's decode attention (1: unsplit kernel)
  int ntiles_ = 0;           // prefill tiles of this forward (0: per-row kernel)
  std::vector<int32_t> tiles_h_;
  static constexpr int kSplitMinContext = 256;  // decode contexts longer than this use split-K
  // Persistent decode kernel (batch 1, ternary layers): its plan and the device copy of the layer table.
  std::optional<cuda::PersistentDecodePlan> persist_;
  const cuda::PersistentLayer* persist_layers_ = nullptr;
  uint32_t* persist_flags_ = nullptr;
  // TRITIUM_CUDA_PERSISTENT_PROFILE=1: per-phase clock64 stamps of block 0, summed over steps, printed at exit.
  long long* persist_timing_ = nullptr;
  std::vector<double> persist_cycles_;  // [5 phases x 3 parts]: summed over layers and steps
  int persist_steps_ = 0;
  bool ran_persistent_ = false;  // this forward runs the persistent kernel
  void plan_persistent();
  void collect_profile();
  void run_persistent(const DevKv& kv);

  // Workspace (capacity in rows M, sequences S, logit rows O).
  DeviceArena ws_;
  int capM_ = 0, capS_ = 0, capO_ = 0;
  float *x_ = nullptr, *h_ = nullptr, *qkv_ = nullptr, *attn_ = nullptr, *gu_ = nullptr, *act_ = nullptr,
        *tmp_ = nullptr, *sel_ = nullptr, *logits_ = nullptr;
  __nv_bfloat16* selb_ = nullptr;
  int8_t* xq_ = nullptr;
  uint32_t* xb_ = nullptr;  // tcb activation bit planes [M, max_kp_ / 4]
  // tcb: chunks of more than tcb_max_tokens_ rows rewrite the projection as tc2 here and run the int8 MMA kernels
  // (TRITIUM_CUDA_TCB_MAX_TOKENS, 1..16). Default 1: at 2-16 tokens the rewrite + int8 MMA GEMV measured faster
  // than the tcb kernel (3,730 vs 2,666 tok/s at batch 16, bench/CUDA_NOTES.md version 11).
  int tcb_max_tokens_ = 1;
  uint32_t* tc2_scratch_ = nullptr;
  size_t tc2_scratch_words_ = 0;
  bool tcb_ = false;        // ternary weights in the tcb layout (else tc2)
  float* inv_s_ = nullptr;
  int32_t* sumq_ = nullptr;
  float* attn_part_ = nullptr;     // split-K partial states [capS_ * H * kAttentionMaxSplit * (D + 2)]
  int32_t* attn_cnt_ = nullptr;    // split-K counters [capS_ * H], zero between launches
  int32_t* meta_d_ = nullptr;
  int32_t* meta_h_ = nullptr;  // pinned
  size_t meta_cap_ = 0;
  // Metadata views (device) for the current shape.
  const int32_t *tok_d_ = nullptr, *pos_d_ = nullptr, *seq_d_ = nullptr, *out_d_ = nullptr, *bt_d_ = nullptr,
                *tiles_d_ = nullptr;

  struct GraphEntry {
    int seen = 0;
    cudaGraphExec_t exec = nullptr;
  };
  std::map<std::tuple<int, int, int, const void*, int>, GraphEntry> graphs_;  // (M, S, O, KV pool, split)
  void clear_graphs();
};

DevLinear CudaBackend::upload_linear(const Linear& lin, bool bf16) {
  DevLinear d;
  d.n = static_cast<int>(lin.out_features());
  d.k = static_cast<int>(lin.in_features());
  if (const auto* t = dynamic_cast<const TernaryLinear*>(&lin)) {
    TRITIUM_CHECK(t->group_scales().empty() && t->bias().empty(),
                  "CUDA backend: ternary layers with per-group scales or a bias (ternary PTQ of a float model) run "
                  "on the CPU only; use --device cpu");
    d.kind = DevLinear::kTernary;
    const PackedTernary& p = t->packed();
    std::vector<int8_t> w(static_cast<size_t>(p.rows() * p.cols()));
    p.unpack(w.data());
    if (tcb_) {
      const auto shape = cuda::TcbShape::of(p.rows(), p.cols());
      const cuda::TcbWeights tw = cuda::pack_tcb(w.data(), p.rows(), p.cols());
      d.wt = weights_.upload(tw.words.data(), tw.words.size());
      d.negc = weights_.upload(tw.neg_count.data(), tw.neg_count.size());
      d.np = static_cast<int>(shape.np);
      d.kp = static_cast<int>(shape.kp);
      tc2_scratch_words_ = std::max(tc2_scratch_words_, static_cast<size_t>((d.n + 63) / 64 * 64) * (d.kp / 16));
    } else {
      const auto shape = cuda::Tc2Shape::of(p.rows(), p.cols());
      const std::vector<uint32_t> words = cuda::pack_tc2(w.data(), p.rows(), p.cols());
      d.w2 = weights_.upload(words.data(), words.size());
      d.np = static_cast<int>(shape.np);
      d.kp = static_cast<int>(shape.kp);
    }
    const auto& segs = t->segments();
    TRITIUM_CHECK(!segs.empty() && segs.size() <= 3, "CUDA backend: {} weight segments (at most 3 supported)",
                  segs.size());
    int end = 0;
    for (size_t i = 0; i < 3; ++i) {
      const size_t si = std::min(i, segs.size() - 1);
      if (i < segs.size()) end += static_cast<int>(segs[i].rows);
      d.seg.seg_end[i] = end;
      d.seg.seg_scale[i] = segs[si].scale;
    }
    max_kp_ = std::max(max_kp_, d.kp);
  } else if (const auto* f = dynamic_cast<const FloatLinear*>(&lin)) {
    if (bf16) {
      std::vector<__nv_bfloat16> b(f->weight().size());
      for (size_t i = 0; i < b.size(); ++i) b[i] = __float2bfloat16_rn(f->weight()[i]);
      d.kind = DevLinear::kBF16;
      d.wb = weights_.upload(b.data(), b.size());
    } else {
      d.kind = DevLinear::kF32;
      d.wf = weights_.upload(f->weight().data(), f->weight().size());
    }
    if (!f->bias().empty()) d.bias = weights_.upload(f->bias().data(), f->bias().size());
  } else if (const auto* q = dynamic_cast<const Int8LinearLayer*>(&lin)) {
    if (!i8ws_) i8ws_ = std::make_unique<cuda::Int8Workspace>();
    d.kind = DevLinear::kInt8;
    d.i8 = std::make_shared<const cuda::CudaInt8Linear>(q->impl(), *i8ws_);
  } else {
    fail("CUDA backend: projection format '{}' is not supported on the GPU", lin.format_name());
  }
  max_n_ = std::max(max_n_, d.n);
  return d;
}

CudaBackend::CudaBackend(const Transformer& model, const CudaOptions& o) : c_(model.config()), opts_(o) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  TRITIUM_CHECK(o.device >= 0 && o.device < count, "CUDA backend: device {} not present ({} devices)", o.device,
                count);
  check(cudaSetDevice(o.device), "cudaSetDevice");
  TRITIUM_CHECK(c_.head_dim == 64 || c_.head_dim == 128, "CUDA backend: head_dim {} not supported (64 or 128)",
                c_.head_dim);
  name_ = "cuda:" + std::to_string(o.device) + " " + cuda_device_name(o.device);
  attn_basic_ = o.attention_basic;
  if (const char* a = std::getenv("TRITIUM_CUDA_ATTENTION"); a && *a) {
    const std::string v = a;
    TRITIUM_CHECK(v == "basic" || v == "auto", "TRITIUM_CUDA_ATTENTION={}: expected basic or auto", v);
    if (v == "basic") attn_basic_ = true;
  }
  if (model.tp_plan()) {
    TRITIUM_CHECK(o.tp_comm, "CUDA backend: the model is a tensor-parallel shard but no NCCL communicator was given");
    TRITIUM_CHECK(o.tp_comm->rank() == model.tp_plan()->rank && o.tp_comm->world() == model.tp_plan()->world,
                  "CUDA backend: NCCL rank {}/{} differs from the shard's {}/{}", o.tp_comm->rank(),
                  o.tp_comm->world(), model.tp_plan()->rank, model.tp_plan()->world);
    tp_ = *model.tp_plan();
    name_ += " tp" + std::to_string(tp_->rank) + "/" + std::to_string(tp_->world);
  }
  {
    std::string layout = o.ternary_layout;
    if (const char* e = std::getenv("TRITIUM_CUDA_LAYOUT"); e && *e) layout = e;
    TRITIUM_CHECK(layout == "auto" || layout == "tcb" || layout == "tc2",
                  "CUDA backend: ternary layout '{}' (expected auto, tcb or tc2)", layout);
    if (layout == "tcb") TRITIUM_CHECK(cuda::tcb_supported(), "CUDA backend: the tcb layout needs sm_80 or newer");
    // auto: tcb when the engine decodes one sequence at a time (its one-token step measured 6-11% faster on the H200)
    // and the device has binary MMA (sm_80+), without tensor parallelism (not measured there); tc2 otherwise (tcb runs
    // 2-16-token rows on a rewritten tc2 copy: 19-34% slower at batch 16; bench/CUDA_NOTES.md version 12).
    tcb_ = layout == "tcb" || (layout == "auto" && o.single_sequence && tp_ == std::nullopt && cuda::tcb_supported());
    if (const char* e = std::getenv("TRITIUM_CUDA_TCB_MAX_TOKENS"); e && *e) {
      tcb_max_tokens_ = std::atoi(e);
      TRITIUM_CHECK(tcb_max_tokens_ >= 1 && tcb_max_tokens_ <= 16, "TRITIUM_CUDA_TCB_MAX_TOKENS={}: expected 1..16", e);
    }
    name_ += tcb_ ? " tcb" : " tc2";
  }
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check_blas(cublasCreate(&blas_), "cublasCreate");
  check_blas(cublasSetStream(blas_, stream_), "cublasSetStream");
  check_blas(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  const size_t ws_bytes = size_t{32} << 20;  // fixed cuBLAS workspace: no allocations during graph capture
  check(cudaMalloc(&blas_ws_, ws_bytes), "cudaMalloc (cuBLAS workspace)");
  check_blas(cublasSetWorkspace(blas_, blas_ws_, ws_bytes), "cublasSetWorkspace");

  if (tp_) {  // vocabulary-parallel embedding: the rank's rows only, summed over ranks by an all-reduce
    const Range voc = split_range(c_.vocab_size, tp_->world, tp_->rank);
    vocab_begin_ = static_cast<int>(voc.begin);
    vocab_end_ = static_cast<int>(voc.end);
    embed_ = weights_.upload(model.embedding().data() + voc.begin * c_.hidden_size,
                             static_cast<size_t>(voc.size()) * c_.hidden_size);
  } else {
    embed_ = weights_.upload(model.embedding().data(), model.embedding().size());
  }
  final_norm_ = weights_.upload(model.final_norm().data(), model.final_norm().size());
  // RoPE tables exactly as the CPU forward computes them.
  const int half = c_.head_dim / 2;
  const auto& inv = model.rope_inv_freq();
  std::vector<float> ct(static_cast<size_t>(c_.max_position_embeddings) * half), st(ct.size());
  for (int p = 0; p < c_.max_position_embeddings; ++p)
    for (int i = 0; i < half; ++i) {
      const float ang = static_cast<float>(p) * inv[i];
      ct[static_cast<size_t>(p) * half + i] = static_cast<float>(std::cos(static_cast<double>(ang)));
      st[static_cast<size_t>(p) * half + i] = static_cast<float>(std::sin(static_cast<double>(ang)));
    }
  cos_ = weights_.upload(ct.data(), ct.size());
  sin_ = weights_.upload(st.data(), st.size());
  for (const LayerWeights& L : model.layers()) {
    DevLayer d;
    d.in_norm = weights_.upload(L.input_norm.data(), L.input_norm.size());
    d.post_norm = weights_.upload(L.post_attn_norm.data(), L.post_attn_norm.size());
    if (c_.sub_norms) {
      d.attn_sub = weights_.upload(L.attn_sub_norm.data(), L.attn_sub_norm.size());
      d.ffn_sub = weights_.upload(L.ffn_sub_norm.data(), L.ffn_sub_norm.size());
    }
    d.qkv = upload_linear(*L.qkv, false);
    d.o = upload_linear(*L.o, false);
    d.gate_up = upload_linear(*L.gate_up, false);
    d.down = upload_linear(*L.down, false);
    layers_.push_back(d);
  }
  const auto* lm_f = dynamic_cast<const FloatLinear*>(&model.lm_head());
  if (lm_f && !tp_ && !opts_.lm_head_bf16 && &lm_f->weight() == &model.embedding() && lm_f->bias().empty()) {
    lm_head_.kind = DevLinear::kF32;  // tied: share the embedding table
    lm_head_.n = c_.vocab_size;
    lm_head_.k = c_.hidden_size;
    lm_head_.wf = embed_;
  } else {
    lm_head_ = upload_linear(model.lm_head(), opts_.lm_head_bf16);
  }
  if (tc2_scratch_words_) tc2_scratch_ = weights_.alloc<uint32_t>(tc2_scratch_words_);
  const int kq = tcb_ ? 256 : 64;  // xq_ holds rows of any projection's kp
  max_kp_ = std::max(max_kp_, static_cast<int>((std::max(c_.hidden_size, c_.intermediate_size) + kq - 1) / kq * kq));
  bt_width_ = 0;  // set per cache (block size) in device_kv
  plan_persistent();
}

void CudaBackend::plan_persistent() {
  const char* env = std::getenv("TRITIUM_CUDA_PERSISTENT");
  const bool on = env && *env ? std::string(env) == "1" : opts_.persistent_decode;
  if (!on) return;
  // Asked for but not possible: say why once, and run the layered kernels.
  auto skip = [](const char* why) { fmt::print(stderr, "warning: persistent decode kernel not used: {}\n", why); };
  if (tp_) return skip("tensor parallelism");
  if (attn_basic_) return skip("TRITIUM_CUDA_ATTENTION=basic");
  auto proj = [this](const DevLinear& d, cuda::PersistentProj& p) {
    if (d.kind != DevLinear::kTernary) return false;
    p.w = tcb_ ? d.wt : d.w2;
    p.negc = tcb_ ? d.negc : nullptr;
    p.n = d.n;
    p.kp = d.kp;
    for (int i = 0; i < 3; ++i) p.seg_end[i] = d.seg.seg_end[i], p.seg_scale[i] = d.seg.seg_scale[i];
    return true;
  };
  std::vector<cuda::PersistentLayer> table;
  for (const DevLayer& L : layers_) {
    cuda::PersistentLayer p;
    p.in_norm = L.in_norm;
    p.post_norm = L.post_norm;
    p.attn_sub = L.attn_sub;
    p.ffn_sub = L.ffn_sub;
    if (!proj(L.qkv, p.qkv) || !proj(L.o, p.o) || !proj(L.gate_up, p.gate_up) || !proj(L.down, p.down))
      return skip("the model's projections are not all ternary");
    table.push_back(p);
  }
  if (table.empty()) return skip("no layers");
  cuda::PersistentDecodePlan plan;
  const char* why = "";
  if (!cuda::plan_persistent_decode(table[0], c_.hidden_size, c_.intermediate_size, c_.num_heads, c_.num_kv_heads,
                                    c_.head_dim, plan, why))
    return skip(why);
  persist_layers_ = weights_.upload(table.data(), table.size());
  persist_flags_ = weights_.alloc<uint32_t>(1);
  persist_ = plan;
  name_ += " (persistent decode)";
  if (const char* p = std::getenv("TRITIUM_CUDA_PERSISTENT_PROFILE"); p && std::string(p) == "1") {
    persist_timing_ = weights_.alloc<long long>(15 * layers_.size() + 1);
    persist_cycles_.assign(15, 0.0);
  }
}

void CudaBackend::collect_profile() {
  std::vector<long long> t(15 * layers_.size() + 1);
  check(cudaMemcpy(t.data(), persist_timing_, t.size() * sizeof(long long), cudaMemcpyDeviceToHost),
        "cudaMemcpy (persistent profile)");
  // Stamp i -> i + 1 is part i % 3 (prologue, GEMV, barrier) of phase (i / 3) % 5.
  for (size_t i = 0; i + 1 < t.size(); ++i)
    persist_cycles_[(i / 3) % 5 * 3 + i % 3] += static_cast<double>(t[i + 1] - t[i]);
  ++persist_steps_;
}

void CudaBackend::run_persistent(const DevKv& kv) {
  const int Hd = c_.hidden_size;
  cuda::embedding(embed_, tok_d_, 1, Hd, x_, stream_);
  cuda::PersistentDecodeArgs a;
  a.layers = persist_layers_;
  a.num_layers = c_.num_layers;
  a.hidden = Hd;
  a.inter = c_.intermediate_size;
  a.H = c_.num_heads;
  a.KVH = c_.num_kv_heads;
  a.D = c_.head_dim;
  a.eps = c_.rms_norm_eps;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
  a.relu2 = c_.hidden_act == Activation::kRelu2;
  a.x = x_;
  a.qkv = qkv_;
  a.attn = attn_;
  a.gu = gu_;
  a.cos_t = cos_;
  a.sin_t = sin_;
  a.pos = pos_d_;
  a.seq = seq_d_;
  a.bt = bt_d_;
  a.bt_width = bt_width_;
  a.block_size = kv.block_size;
  a.kv_base = kv.base;
  a.kv_pool = static_cast<int64_t>(kv.pool());
  // Split-K attention above kSplitMinContext, with at most one round of work items over the grid.
  a.nsplit = attn_split_ > 1 ? std::max(1, std::min(attn_split_, persist_->grid / c_.num_heads)) : 1;
  a.part = attn_part_;
  a.cnt = attn_cnt_;
  a.flags = persist_flags_;
  a.timing = persist_timing_;
  cuda::persistent_decode(a, *persist_, stream_);
  apply(lm_head_, x_, Hd, out_d_, final_norm_, 1, logits_, c_.vocab_size, false);
}

CudaBackend::~CudaBackend() {
  if (persist_steps_ > 0) {
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, opts_.device);
    const double per = 1e3 / std::max(1, khz) / persist_steps_ / static_cast<double>(layers_.size());  // us/cycle
    std::string line;
    double total = 0;
    const char* names[5] = {"Q", "A", "O", "G", "D"};
    for (int k = 0; k < 5; ++k) {
      const double* c = &persist_cycles_[3 * k];
      total += c[0] + c[1] + c[2];
      line += fmt::format("  {} {:.2f} = {:.2f} + {:.2f} + {:.2f}", names[k], (c[0] + c[1] + c[2]) * per, c[0] * per,
                          c[1] * per, c[2] * per);
    }
    fmt::print(stderr, "persistent decode profile ({} steps, block 0, us per layer: phase = prologue + GEMV + barrier):{}  "
               "layer {:.2f}\n", persist_steps_, line, total * per);
  }
  clear_graphs();
  if (blas_) cublasDestroy(blas_);
  if (blas_ws_) cudaFree(blas_ws_);
  if (meta_h_) cudaFreeHost(meta_h_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaBackend::clear_graphs() {
  for (auto& [k, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
}

void CudaBackend::ensure_workspace(int M, int S, int O) {
  if (M <= capM_ && S <= capS_ && O <= capO_) return;
  clear_graphs();
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  ws_.release();
  meta_d_ = nullptr;  // lived in ws_: reallocated below in forward()
  meta_cap_ = 0;
  capM_ = std::max(M, capM_);
  capS_ = std::max(S, capS_);
  capO_ = std::max(O, capO_);
  const size_t Mc = static_cast<size_t>(capM_), Hd = c_.hidden_size, I = c_.intermediate_size;
  const size_t qkvw = static_cast<size_t>(c_.q_dim() + 2 * c_.kv_dim());
  // Tensor parallel: full (gathered) widths and the padded per-rank widths of the all-gathers.
  const size_t qfull = tp_ ? static_cast<size_t>(tp_->q_dim_full) : static_cast<size_t>(c_.q_dim());
  const size_t ifull = tp_ ? static_cast<size_t>(tp_->inter_full) : I;
  const size_t qpad = tp_ ? static_cast<size_t>(TensorParallelPlan::max_of(tp_->q_cols)) : qfull;
  const size_t ipad = tp_ ? static_cast<size_t>(TensorParallelPlan::max_of(tp_->i_cols)) : I;
  x_ = ws_.alloc<float>(Mc * Hd);
  h_ = ws_.alloc<float>(Mc * std::max<size_t>({Hd, ifull, qfull}));
  qkv_ = ws_.alloc<float>(Mc * qkvw);
  attn_ = ws_.alloc<float>(Mc * std::max<size_t>(qpad, c_.q_dim()));
  gu_ = ws_.alloc<float>(Mc * 2 * I);
  act_ = ws_.alloc<float>(Mc * std::max<size_t>(ipad, I));
  if (tp_) {
    const size_t vpad = static_cast<size_t>(TensorParallelPlan::max_of(tp_->v_rows));
    const size_t Oc = static_cast<size_t>(capO_);
    full_in_ = ws_.alloc<float>(Mc * std::max(qfull, ifull));
    gat_ = ws_.alloc<float>(static_cast<size_t>(tp_->world) * std::max({Mc * qpad, Mc * ipad, Oc * vpad}));
    part_ = ws_.alloc<float>(Mc * Hd);
    lg_local_ = ws_.alloc<float>(Oc * vpad);
  }
  tmp_ = ws_.alloc<float>(Mc * std::max<size_t>({qkvw, 2 * I, Hd}));
  xq_ = ws_.alloc<int8_t>(Mc * max_kp_);
  if (tcb_) xb_ = ws_.alloc<uint32_t>(Mc * max_kp_ / 4);
  inv_s_ = ws_.alloc<float>(Mc);
  sumq_ = ws_.alloc<int32_t>(Mc);
  {
    const size_t rh = static_cast<size_t>(capS_) * c_.num_heads;
    attn_part_ = ws_.alloc<float>(rh * cuda::kAttentionMaxSplit * (c_.head_dim + 2));
    attn_cnt_ = ws_.alloc<int32_t>(rh);
    check(cudaMemsetAsync(attn_cnt_, 0, rh * sizeof(int32_t), stream_), "cudaMemsetAsync (attention counters)");
  }
  sel_ = ws_.alloc<float>(static_cast<size_t>(capO_) * Hd);
  selb_ = ws_.alloc<__nv_bfloat16>(static_cast<size_t>(capO_) * Hd);
  logits_ = ws_.alloc<float>(static_cast<size_t>(capO_) * c_.vocab_size);
  if (i8ws_) i8ws_->ensure(capM_);
}

DevKv& CudaBackend::device_kv(KvCache& cache) {
  const KvCacheSpec& s = cache.spec();
  TRITIUM_CHECK(s.dtype == KvDType::kF32, "CUDA backend: KV cache dtype {} is not supported (f32 only)",
                kv_dtype_name(s.dtype));
  TRITIUM_CHECK(s.num_layers == c_.num_layers && s.kv_dim() == c_.kv_dim(),
                "CUDA backend: KV cache shape does not match the model");
  auto* kv = static_cast<DevKv*>(cache.device_state().get());
  if (!kv || kv->num_blocks != s.num_blocks || kv->block_size != s.block_size) {
    auto p = std::make_shared<DevKv>();
    p->num_blocks = s.num_blocks;
    p->block_size = s.block_size;
    p->layers = s.num_layers;
    p->kv_dim = s.kv_dim();
    const size_t bytes = 2 * static_cast<size_t>(s.num_layers) * p->pool() * sizeof(float);
    check(cudaMalloc(reinterpret_cast<void**>(&p->base), std::max<size_t>(bytes, 256)), "cudaMalloc (KV cache)");
    check(cudaMemset(p->base, 0, std::max<size_t>(bytes, 256)), "cudaMemset (KV cache)");
    kv = p.get();
    cache.device_state() = std::static_pointer_cast<void>(p);
  }
  return *kv;
}

void CudaBackend::apply(const DevLinear& lin, const float* in, int64_t ldin, const int32_t* row_map,
                        const float* norm_w, int rows, float* out, int64_t ldout, bool add) {
  const float eps = c_.rms_norm_eps;
  if (lin.kind == DevLinear::kTernary) {
    cuda::norm_quant(in, ldin, row_map, norm_w, rows, lin.k, eps, nullptr, xq_, lin.kp, inv_s_, sumq_, stream_,
                     tcb_planes_for(lin, rows));
    ternary_quantized(lin, rows, out, ldout, add);
    return;
  }
  if (lin.kind == DevLinear::kInt8) {  // requests = sequences: row r of `in` belongs to seq_d_[row_map[r]]
    const float* src = in;
    if (norm_w || row_map || ldin != lin.k) {
      cuda::norm_quant(in, ldin, row_map, norm_w, rows, lin.k, eps, h_, nullptr, 0, nullptr, nullptr, stream_);
      src = h_;
    }
    lin.i8->forward(src, lin.k, rows, seq_d_, row_map, out, ldout, add, *i8ws_, stream_);
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  const bool direct_out = !add && !lin.bias && ldout == lin.n;
  float* dst = direct_out ? out : tmp_;
  if (lin.kind == DevLinear::kBF16) {
    cuda::norm_to_bf16(in, ldin, row_map, norm_w, rows, lin.k, eps, nullptr, selb_, stream_);
    check_blas(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, lin.n, rows, lin.k, &one, lin.wb, CUDA_R_16BF, lin.k,
                            selb_, CUDA_R_16BF, lin.k, &zero, dst, CUDA_R_32F, lin.n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (bf16)");
  } else {
    const float* src = in;
    if (norm_w || row_map || ldin != lin.k) {
      cuda::norm_quant(in, ldin, row_map, norm_w, rows, lin.k, eps, h_, nullptr, 0, nullptr, nullptr, stream_);
      src = h_;
    }
    check_blas(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, lin.n, rows, lin.k, &one, lin.wf, lin.k, src, lin.k,
                           &zero, dst, lin.n),
               "cublasSgemm");
  }
  if (!direct_out) {
    TRITIUM_CHECK(ldout == lin.n, "CUDA backend: strided float projection output");
    cuda::bias_add(tmp_, lin.bias, rows, lin.n, out, add, stream_);
  }
}

void CudaBackend::ternary_quantized(const DevLinear& lin, int rows, float* out, int64_t ldout, bool add) {
  cuda::TernaryEpilogue ep = lin.seg;
  ep.y = out;
  ep.ldy = ldout;
  ep.add = add;
  if (tcb_kernel_for(lin, rows)) {
    cuda::tcb_matmul(lin.wt, lin.negc, lin.n, lin.kp, xb_, inv_s_, rows, ep, stream_);
  } else if (lin.wt) {  // more tokens: the tc2 kernels over a rewritten copy (~2 x 2 bits per weight of traffic)
    const int np2 = (lin.n + 63) / 64 * 64;
    cuda::tcb_to_tc2(lin.wt, lin.n, lin.kp, tc2_scratch_, np2, stream_);
    cuda::ternary_matmul(tc2_scratch_, lin.n, np2, lin.kp, xq_, sumq_, inv_s_, rows, ep, stream_);
  } else {
    cuda::ternary_matmul(lin.w2, lin.n, lin.np, lin.kp, xq_, sumq_, inv_s_, rows, ep, stream_);
  }
}

void CudaBackend::run_body(int M, int S, int O, const DevKv& kv) {
  const int Hd = c_.hidden_size, I = c_.intermediate_size, qd = c_.q_dim(), kvd = c_.kv_dim();
  const int qkvw = qd + 2 * kvd;
  if (ran_persistent_) {  // set by forward(): one sequence, one new token
    run_persistent(kv);
    return;
  }
  if (!tp_) {
    cuda::embedding(embed_, tok_d_, M, Hd, x_, stream_);
  } else {
    cuda::embedding_vocab_slice(embed_, vocab_begin_, vocab_end_, tok_d_, M, Hd, x_, stream_);
    opts_.tp_comm->all_reduce_sum(x_, static_cast<size_t>(M) * Hd, stream_);
  }
  for (int l = 0; l < c_.num_layers; ++l) {
    const DevLayer& L = layers_[l];
    apply(L.qkv, x_, Hd, nullptr, L.in_norm, M, qkv_, qkvw, false);
    if (M == S) {  // decode: one new token per sequence; RoPE + KV write inside the attention kernel
      // attn_split_ > 1 (long contexts): split-K; its grid does not depend on the positions (graph-safe).
      cuda::attention_decode_rope_split(qkv_, qkvw, M, c_.num_heads, c_.num_kv_heads, c_.head_dim, cos_, sin_,
                                        pos_d_, seq_d_, bt_d_, bt_width_, kv.block_size, kv.k(l), kv.v(l), attn_,
                                        attn_split_, attn_part_, attn_cnt_, stream_);
    } else {
      cuda::rope_kv_write(qkv_, M, c_.num_heads, c_.num_kv_heads, c_.head_dim, cos_, sin_, pos_d_, seq_d_, bt_d_,
                          bt_width_, kv.block_size, kv.k(l), kv.v(l), stream_);
      if (ntiles_ > 0) {
        cuda::attention_prefill(qkv_, qkvw, c_.num_heads, c_.num_kv_heads, c_.head_dim, pos_d_, seq_d_, bt_d_,
                                bt_width_, kv.block_size, kv.k(l), kv.v(l), attn_, tiles_d_, ntiles_, stream_);
      } else {
        cuda::attention_paged(qkv_, qkvw, M, c_.num_heads, c_.num_kv_heads, c_.head_dim, pos_d_, seq_d_, bt_d_,
                              bt_width_, kv.block_size, kv.k(l), kv.v(l), attn_, stream_);
      }
    }
    if (!tp_) {
      apply(L.o, attn_, qd, nullptr, c_.sub_norms ? L.attn_sub : nullptr, M, x_, Hd, true);
    } else if (tp_->gather_mode) {  // o replicated over the all-gathered heads (BitNet: exact)
      gather_cols(attn_, M, tp_->q_cols, full_in_);
      apply(L.o, full_in_, tp_->q_dim_full, nullptr, c_.sub_norms ? L.attn_sub : nullptr, M, x_, Hd, true);
    } else {  // row-parallel: partial sums over the rank's heads, all-reduced
      apply(L.o, attn_, qd, nullptr, nullptr, M, part_, Hd, false);
      opts_.tp_comm->all_reduce_sum(part_, static_cast<size_t>(M) * Hd, stream_);
      cuda::bias_add(part_, nullptr, M, Hd, x_, true, stream_);
    }
    apply(L.gate_up, x_, Hd, nullptr, L.post_norm, M, gu_, 2 * I, false);
    const bool relu2 = c_.hidden_act == Activation::kRelu2;
    if (!tp_ && L.down.kind == DevLinear::kTernary && L.down.k == I) {
      // GLU + ffn_sub_norm + quantization of the down projection's input in one kernel.
      cuda::glu_norm_quant(gu_, M, I, relu2, c_.sub_norms ? L.ffn_sub : nullptr, c_.rms_norm_eps, act_, xq_,
                           L.down.kp, inv_s_, sumq_, stream_, tcb_planes_for(L.down, M));
      ternary_quantized(L.down, M, x_, Hd, true);
      continue;
    }
    cuda::glu(gu_, M, I, relu2, act_, stream_);
    if (!tp_) {
      apply(L.down, act_, I, nullptr, c_.sub_norms ? L.ffn_sub : nullptr, M, x_, Hd, true);
    } else if (tp_->gather_mode) {
      gather_cols(act_, M, tp_->i_cols, full_in_);
      apply(L.down, full_in_, tp_->inter_full, nullptr, c_.sub_norms ? L.ffn_sub : nullptr, M, x_, Hd, true);
    } else {
      apply(L.down, act_, I, nullptr, nullptr, M, part_, Hd, false);
      opts_.tp_comm->all_reduce_sum(part_, static_cast<size_t>(M) * Hd, stream_);
      cuda::bias_add(part_, nullptr, M, Hd, x_, true, stream_);
    }
  }
  if (!tp_) {
    apply(lm_head_, x_, Hd, out_d_, final_norm_, O, logits_, c_.vocab_size, false);
  } else {  // vocabulary-parallel lm_head
    apply(lm_head_, x_, Hd, out_d_, final_norm_, O, lg_local_, lm_head_.n, false);
    gather_cols(lg_local_, O, tp_->v_rows, logits_);
  }
}

void CudaBackend::gather_cols(const float* local, int M, const std::vector<int64_t>& widths, float* full) {
  const size_t mw = static_cast<size_t>(TensorParallelPlan::max_of(widths));
  const size_t block = static_cast<size_t>(M) * mw;  // floats per rank in gat_
  opts_.tp_comm->all_gather(local, block * sizeof(float), gat_, stream_);
  size_t total = 0;
  for (int64_t w : widths) total += static_cast<size_t>(w);
  size_t col = 0;
  for (size_t r = 0; r < widths.size(); ++r) {
    const size_t w = static_cast<size_t>(widths[r]);
    // Rank r's block holds its [M, w] rows contiguously (row stride w) at the start of its padded slot.
    check(cudaMemcpy2DAsync(full + col, total * sizeof(float), gat_ + r * block, w * sizeof(float),
                            w * sizeof(float), static_cast<size_t>(M), cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpy2DAsync (tensor-parallel gather)");
    col += w;
  }
}

void CudaBackend::forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) {
  check(cudaSetDevice(opts_.device), "cudaSetDevice");
  DevKv& kv = device_kv(cache);
  bt_width_ = static_cast<int>((c_.max_position_embeddings + kv.block_size - 1) / kv.block_size);
  int M = 0, O = 0;
  const int S = static_cast<int>(batch.size());
  bool decode_only = true;
  int64_t max_ctx = 0;
  for (const auto& ch : batch) {
    M += static_cast<int>(ch.tokens.size());
    O += ch.all_logits ? static_cast<int>(ch.tokens.size()) : 1;
    if (ch.tokens.size() != 1 || ch.all_logits) decode_only = false;
    max_ctx = std::max<int64_t>(max_ctx, ch.start_pos + static_cast<int64_t>(ch.tokens.size()));
  }
  ensure_workspace(M, S, O);
  ran_persistent_ = persist_ && M == 1 && S == 1 && O == 1;
  // Attention kernels of this forward: split-K for decode rows (M == S) at long contexts; flash-style prefill
  // when the chunks average at least 16 rows (tiles of 1-2 rows would serialize a long context per block).
  attn_split_ = 1;
  ntiles_ = 0;
  tiles_h_.clear();
  if (!attn_basic_) {
    if (M == S) {
      if (max_ctx > kSplitMinContext) attn_split_ = cuda::attention_split_count(M, c_.num_heads);
    } else if (M >= 16 * S && cuda::attention_prefill_tile_rows(c_.num_heads, c_.num_kv_heads) > 0) {
      tiles_h_.reserve(2 * static_cast<size_t>(M + S));
      const int tr = cuda::attention_prefill_tile_rows(c_.num_heads, c_.num_kv_heads);
      int r0 = 0;
      for (const auto& ch : batch) {  // rows of one chunk: one sequence, consecutive positions
        const int T = static_cast<int>(ch.tokens.size());
        for (int t = 0; t < T; t += tr) {
          tiles_h_.push_back(r0 + t);
          tiles_h_.push_back(std::min(tr, T - t));
        }
        r0 += T;
      }
      ntiles_ = static_cast<int>(tiles_h_.size() / 2);
    }
  }
  // Metadata: tokens [M], positions [M], sequence of each row [M], rows that give logits [O], tables [S, W],
  // prefill tiles [ntiles, 2].
  const size_t need = static_cast<size_t>(3 * M + O) + static_cast<size_t>(S) * bt_width_ + tiles_h_.size();
  if (need > meta_cap_) {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    clear_graphs();
    if (meta_h_) cudaFreeHost(meta_h_);
    meta_cap_ = std::max(need, meta_cap_ * 2);
    check(cudaMallocHost(reinterpret_cast<void**>(&meta_h_), meta_cap_ * sizeof(int32_t)), "cudaMallocHost");
    meta_d_ = ws_.alloc<int32_t>(meta_cap_);
  }
  int32_t* tok = meta_h_;
  int32_t* pos = tok + M;
  int32_t* seq = pos + M;
  int32_t* out = seq + M;
  int32_t* bt = out + O;
  int r = 0, o = 0;
  for (int s = 0; s < S; ++s) {
    const BatchChunk& ch = batch[s];
    const int T = static_cast<int>(ch.tokens.size());
    const int64_t end = ch.start_pos + T;
    const int64_t nb = (end + kv.block_size - 1) / kv.block_size;
    TRITIUM_CHECK(nb <= bt_width_, "CUDA backend: block table wider than the model context");
    int32_t* row = bt + static_cast<size_t>(s) * bt_width_;
    for (int64_t b = 0; b < bt_width_; ++b) {
      const int32_t id = b < nb ? ch.block_table[b] : 0;
      TRITIUM_CHECK(id >= 0 && id < kv.num_blocks, "forward: block id {} outside the KV pool of {} blocks", id,
                    kv.num_blocks);
      row[b] = id;
    }
    for (int t = 0; t < T; ++t, ++r) {
      tok[r] = ch.tokens[t];
      pos[r] = static_cast<int32_t>(ch.start_pos + t);
      seq[r] = s;
      if (ch.all_logits || t == T - 1) out[o++] = r;
    }
  }
  std::copy(tiles_h_.begin(), tiles_h_.end(), bt + static_cast<size_t>(S) * bt_width_);
  // Views in the device buffer (same layout).
  tok_d_ = meta_d_;
  pos_d_ = tok_d_ + M;
  seq_d_ = pos_d_ + M;
  out_d_ = seq_d_ + M;
  bt_d_ = out_d_ + O;
  tiles_d_ = bt_d_ + static_cast<size_t>(S) * bt_width_;
  check(cudaMemcpyAsync(meta_d_, meta_h_, need * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (metadata)");
  if (decode_only && opts_.graphs) {
    GraphEntry& g = graphs_[{M, S, O, static_cast<const void*>(kv.base), attn_split_}];
    if (g.exec) {
      check(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch");
    } else if (g.seen++ == 0) {
      run_body(M, S, O, kv);  // first time eagerly (loads modules, sets kernel attributes)
    } else {
      cudaGraph_t graph = nullptr;
      check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
      try {
        run_body(M, S, O, kv);
      } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
      }
      check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
      check(cudaGraphInstantiate(&g.exec, graph, 0), "cudaGraphInstantiate");
      cudaGraphDestroy(graph);
      check(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch");
    }
  } else {
    run_body(M, S, O, kv);
  }
  if (opts_.copy_logits) {
    logits.resize(static_cast<size_t>(O) * c_.vocab_size);
    check(cudaMemcpyAsync(logits.data(), logits_, logits.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (logits)");
  }
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (forward)");
  if (persist_timing_ && ran_persistent_) collect_profile();
}

}  // namespace

void cuda_set_dependent_launch(bool on) { cuda::set_dependent_launch(on); }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string cuda_device_name(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return p.name;
}

std::shared_ptr<ForwardBackend> make_cuda_backend(const Transformer& model, const CudaOptions& opts) {
  TRITIUM_CHECK(cuda_device_count() > 0, "--device cuda: no CUDA device found");
  return std::make_shared<CudaBackend>(model, opts);
}

}  // namespace tritium
#endif
