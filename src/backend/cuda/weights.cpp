// tritium backend/cuda: construction of the CUDA backend — device and option checks, the ternary layout choice
// (tc2 or tcb, docs/formats.md "GPU weight layouts (tc2, tcb)"), the upload of the model's weights (ternary
// projections repacked, float projections as f32 or bf16, int8 projections through int8_linear.h, RoPE tables) —
// and its teardown.
#if TRITIUM_HAVE_CUDA
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/env.h"
#include "formats/ternary_tc2.h"
#include "formats/ternary_tcb.h"

namespace tritium::cuda_detail {
namespace {

using cuda::check;

/// The basic per-row attention kernels only: CudaOptions::attention_basic, or TRITIUM_CUDA_ATTENTION=basic
/// (=auto or unset: the option).
bool basic_attention(const CudaOptions& o) {
  const std::string v = env::cuda_attention();
  if (v.empty()) return o.attention_basic;
  TRITIUM_CHECK(v == "basic" || v == "auto", "TRITIUM_CUDA_ATTENTION={}: expected basic or auto", v);
  return o.attention_basic || v == "basic";
}

/// Whether the ternary weights go to the GPU in the tcb layout (else tc2): CudaOptions::ternary_layout, or
/// TRITIUM_CUDA_LAYOUT when set.
bool use_tcb_layout(const CudaOptions& o, bool tensor_parallel) {
  std::string layout = o.ternary_layout;
  if (const std::string e = env::cuda_layout(); !e.empty()) layout = e;
  TRITIUM_CHECK(layout == "auto" || layout == "tcb" || layout == "tc2",
                "CUDA backend: ternary layout '{}' (expected auto, tcb or tc2)", layout);
  if (layout == "tcb") TRITIUM_CHECK(cuda::tcb_supported(), "CUDA backend: the tcb layout needs sm_80 or newer");
  // auto: tcb when the engine decodes one sequence at a time (its one-token step measured 6-11% faster on the H200)
  // and the device has binary MMA (sm_80+), without tensor parallelism (not measured there); tc2 otherwise (tcb runs
  // rows of more tokens on a rewritten tc2 copy: 19-34% slower at batch 16). bench/CUDA_NOTES.md, "GPU weight
  // layouts: tc2 and tcb".
  return layout == "tcb" || (layout == "auto" && o.single_sequence && !tensor_parallel && cuda::tcb_supported());
}

}  // namespace

CudaBackend::CudaBackend(std::shared_ptr<const Transformer> mp, const CudaOptions& o)
    : Backend(std::move(mp)), c_(model_->config()), opts_(o) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  TRITIUM_CHECK(o.device >= 0 && o.device < count, "CUDA backend: device {} not present ({} devices)", o.device,
                count);
  cuda::require_kernel_image(o.device);
  check(cudaSetDevice(o.device), "cudaSetDevice");
  TRITIUM_CHECK(c_.head_dim == 64 || c_.head_dim == 128, "CUDA backend: head_dim {} not supported (64 or 128)",
                c_.head_dim);
  name_ = "cuda:" + std::to_string(o.device) + " " + cuda_device_name(o.device);
  attn_basic_ = basic_attention(o);
  setup_tensor_parallel(*model_);
  tcb_ = use_tcb_layout(o, tp_.has_value());
  name_ += tcb_ ? " tcb" : " tc2";
  int8_gemm_ = use_int8_gemm(*model_);
  create_stream_and_blas();
  upload_weights(*model_);
  if (int8_gemm_) name_ += fmt::format(" +int8 GEMM weights {:.2f} GB", static_cast<double>(int8_copy_bytes_) / 1e9);
}

CudaBackend::~CudaBackend() {
  clear_graphs();
  if (blas_) cublasDestroy(blas_);
  if (blas_ws_) cudaFree(blas_ws_);
  if (meta_h_) cudaFreeHost(meta_h_);
  if (stream_) cudaStreamDestroy(stream_);
}

bool CudaBackend::use_int8_gemm(const Transformer& model) const {
  const std::string& v = opts_.gemm_weights;
  TRITIUM_CHECK(v == "auto" || v == "packed" || v == "int8",
                "CUDA backend: GEMM weights '{}' (expected auto, packed or int8)", v);
  if (v != "auto") return v == "int8";
  if (opts_.single_sequence || tp_) return false;
  size_t bytes = 0;
  for (const LayerWeights& L : model.layers())
    for (const Linear* lin : {L.qkv.get(), L.o.get(), L.gate_up.get(), L.down.get()})
      if (dynamic_cast<const TernaryLinear*>(lin))
        bytes += static_cast<size_t>((lin->out_features() + 15) / 16 * 16) * lin->in_features();
  if (bytes == 0) return false;
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return bytes <= total_b / 16;
}

void CudaBackend::create_stream_and_blas() {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check_blas(cublasCreate(&blas_), "cublasCreate");
  check_blas(cublasSetStream(blas_, stream_), "cublasSetStream");
  check_blas(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  const size_t ws_bytes = size_t{32} << 20;  // fixed cuBLAS workspace: no allocations during graph capture
  check(cudaMalloc(&blas_ws_, ws_bytes), "cudaMalloc (cuBLAS workspace)");
  check_blas(cublasSetWorkspace(blas_, blas_ws_, ws_bytes), "cublasSetWorkspace");
}

void CudaBackend::upload_weights(const Transformer& model) {
  if (tp_) {  // vocabulary-parallel embedding: the rank's rows only, summed over ranks by an all-reduce
    const Range voc = split_range(c_.vocab_size, tp_->world, tp_->rank);
    vocab_begin_ = static_cast<int>(voc.begin);
    vocab_end_ = static_cast<int>(voc.end);
    embed_ = weights_.upload(model.embedding().data() + voc.begin * c_.hidden_size,
                             static_cast<size_t>(voc.size()) * c_.hidden_size);
  } else if (const Embedding& e = model.embed(); e.is_bf16() || e.is_q2_0()) {
    // As stored (bf16: half of float32; Q2_0: 2.25 or 2.125 bits per weight), widened row by row at lookup; the
    // host's mapped pages of the table are released once copied.
    if (e.is_bf16()) {
      embed_stored_.dtype = cuda::StoredEmbedding::kBF16;
      embed_stored_.data = weights_.upload(e.bf16_data(), e.bytes() / 2);
    } else {
      embed_stored_.dtype = cuda::StoredEmbedding::kQ2_0;
      embed_stored_.data = weights_.upload(e.q2_0_data(), e.bytes());
      embed_stored_.block = static_cast<int>(e.q2_0_block());
      embed_stored_.block_bytes = static_cast<int>(e.q2_0_block_bytes());
    }
    if (!e.owner()) e.release_rows(0, e.rows());
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
    if (c_.qk_norm) {
      d.q_norm = weights_.upload(L.q_norm.data(), L.q_norm.size());
      d.k_norm = weights_.upload(L.k_norm.data(), L.k_norm.size());
    }
    d.qkv = upload_linear(*L.qkv, false);
    d.o = upload_linear(*L.o, false);
    d.gate_up = upload_linear(*L.gate_up, false);
    d.down = upload_linear(*L.down, false);
    layers_.push_back(d);
  }
  const auto* lm_f = dynamic_cast<const FloatLinear*>(&model.lm_head());
  if (lm_f && embed_ && !tp_ && !opts_.lm_head_bf16 && &lm_f->weight() == &model.embedding() && lm_f->bias().empty()) {
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
  bt_width_ = 0;  // set per cache (block size) in forward()
}

DevLinear CudaBackend::upload_linear(const Linear& lin, bool bf16) {
  DevLinear d;
  d.n = static_cast<int>(lin.out_features());
  d.k = static_cast<int>(lin.in_features());
  if (const auto* t = dynamic_cast<const TernaryLinear*>(&lin)) {
    d.kind = DevLinear::kTernary;
    const PackedTernary& p = t->packed();
    std::vector<int8_t> w(static_cast<size_t>(p.rows() * p.cols()));
    p.unpack(w.data());
    if (t->has_group_scales()) {  // Ternary Bonsai, ternary PTQ: tc2 codes for the group-scaled GEMM, any bias
      const auto shape = cuda::Tc2Shape::of(p.rows(), p.cols());
      const std::vector<uint32_t> words = cuda::pack_tc2(w.data(), p.rows(), p.cols());
      d.w2 = weights_.upload(words.data(), words.size());
      d.np = static_cast<int>(shape.np);
      d.kp = static_cast<int>(shape.kp);
      const std::vector<float> gs = t->group_scales();
      d.gs = weights_.upload(gs.data(), gs.size());
      if (!t->bias().empty()) d.bias = weights_.upload(t->bias().data(), t->bias().size());
      max_kp_ = std::max(max_kp_, d.kp);
      return d;
    }
    TRITIUM_CHECK(t->bias().empty(), "CUDA backend: a ternary layer with one scale per segment and a bias runs on "
                                     "the CPU only; use --device cpu");
    const auto upload_int8_copy = [&](int kp) {  // rows zero-padded to np8, columns to kp (xq_'s row stride)
      if (!int8_gemm_) return;
      d.np8 = (d.n + 15) / 16 * 16;
      std::vector<int8_t> w8(static_cast<size_t>(d.np8) * kp, 0);
      for (int64_t r = 0; r < p.rows(); ++r)
        std::copy_n(w.data() + r * p.cols(), p.cols(), w8.data() + r * kp);
      d.w8 = weights_.upload(w8.data(), w8.size());
      int8_copy_bytes_ += w8.size();
      max_np8_ = std::max(max_np8_, d.np8);
      if (!i8ws_) i8ws_ = std::make_unique<cuda::Int8Workspace>();
    };
    if (tcb_) {
      const auto shape = cuda::TcbShape::of(p.rows(), p.cols());
      const cuda::TcbWeights tw = cuda::pack_tcb(w.data(), p.rows(), p.cols());
      d.wt = weights_.upload(tw.words.data(), tw.words.size());
      d.negc = weights_.upload(tw.neg_count.data(), tw.neg_count.size());
      d.np = static_cast<int>(shape.np);
      d.kp = static_cast<int>(shape.kp);
      upload_int8_copy(d.kp);
      tc2_scratch_words_ = std::max(tc2_scratch_words_, static_cast<size_t>((d.n + 63) / 64 * 64) * (d.kp / 16));
    } else {
      const auto shape = cuda::Tc2Shape::of(p.rows(), p.cols());
      const std::vector<uint32_t> words = cuda::pack_tc2(w.data(), p.rows(), p.cols());
      d.w2 = weights_.upload(words.data(), words.size());
      d.np = static_cast<int>(shape.np);
      d.kp = static_cast<int>(shape.kp);
      upload_int8_copy(d.kp);
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
  } else if (const auto* q = dynamic_cast<const Int8Linear*>(&lin)) {
    if (!i8ws_) i8ws_ = std::make_unique<cuda::Int8Workspace>();
    d.kind = DevLinear::kInt8;
    d.i8 = std::make_shared<const cuda::CudaInt8Linear>(q->impl(), *i8ws_);
  } else {
    fail("CUDA backend: projection format '{}' is not supported on the GPU", lin.format_name());
  }
  max_n_ = std::max(max_n_, d.n);
  return d;
}

}  // namespace tritium::cuda_detail
#endif
