// tritium backend/cuda: the CudaBackend class and its device structures, shared by the backend's source files:
//   weights.cpp          construction: device and option checks, the ternary layout choice, the weights' upload
//   workspace.cpp        the device workspace of a batch shape and the device copy of a KV cache
//   forward.cpp          forward(): metadata, attention plan, the layer loop, the projections
//   graphs.cpp           the cache of CUDA graphs of decode steps
//   sampling.cpp         forward_sample(): the forward, then DeviceSampler (device_sampler.h) on its logits
//   tensor_parallel.cpp  the tensor-parallel setup checks and the all-gather of column blocks
//   cuda_backend.cpp     the entry points of cuda_backend.h
//
// Internal to the CUDA backend: only code built with TRITIUM_HAVE_CUDA includes this header (it needs the CUDA and
// cuBLAS headers).
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/device_arena.h"
#include "backend/cuda/device_sampler.h"
#include "backend/cuda/int8_linear.h"
#include "core/error.h"
#include "kernels/cuda/kernels.h"
#include "model/tp_plan.h"

namespace tritium::cuda_detail {

/// Throws tritium::Error "cuBLAS error in <what>: status <s>" when s is not CUBLAS_STATUS_SUCCESS.
inline void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error in {}: status {}", what, static_cast<int>(s));
}

/// One projection on the device, in the form its kernels take.
struct DevLinear {
  enum Kind { kTernary, kF32, kBF16, kInt8 } kind = kF32;
  int n = 0, k = 0, np = 0, kp = 0;
  const uint32_t* w2 = nullptr;       // tc2 codes (layout tc2; formats/ternary_tc2.h)
  const int8_t* w8 = nullptr;         // int8 copy [np8, kp] (CudaOptions::gemm_weights), or null
  int np8 = 0;                        // n rounded up to 16
  const uint32_t* wt = nullptr;       // tcb bit planes (layout tcb; formats/ternary_tcb.h)
  const int32_t* negc = nullptr;      // tcb: -1 weights per row [np]
  const float* wf = nullptr;          // f32 [n, k]
  const __nv_bfloat16* wb = nullptr;  // bf16 [n, k]
  const float* bias = nullptr;
  const float* gs = nullptr;          // ternary with per-group scales [n, ceil(k / 128)] (w2 only), or null
  cuda::TernaryEpilogue seg;  // segment ends and scales (ternary)
  std::shared_ptr<const cuda::CudaInt8Linear> i8;  // int8 (int8_linear.h)
};

struct DevLayer {
  const float *in_norm = nullptr, *post_norm = nullptr, *attn_sub = nullptr, *ffn_sub = nullptr;
  const float *q_norm = nullptr, *k_norm = nullptr;  ///< [head_dim] (ModelConfig::qk_norm)
  DevLinear qkv, o, gate_up, down;
};

/// The device copy of a KvCache: per layer K and V pools [num_blocks, block_size, kv_dim] of `elem` (f32, bf16, or
/// fp8 e4m3 with the cache's per-tensor scale).
struct DevKv {
  int64_t num_blocks = 0;
  int block_size = 0, layers = 0, kv_dim = 0;
  cuda::KvElem elem = cuda::KvElem::kF32;
  float scale = 1.0f;
  void* base = nullptr;
  /// Unique per allocation: the key of the decode graphs that captured this pool's pointers and sizes (a pool freed
  /// and another allocated at the same address with other sizes must not replay them).
  uint64_t id = 0;
  cuda::KvFormat format() const { return {elem, scale}; }
  size_t elem_bytes() const { return elem == cuda::KvElem::kBF16 ? 2 : (elem == cuda::KvElem::kFP8 ? 1 : 4); }
  void* k(int l) const { return static_cast<char*>(base) + (2 * static_cast<size_t>(l)) * pool() * elem_bytes(); }
  void* v(int l) const { return static_cast<char*>(base) + (2 * static_cast<size_t>(l) + 1) * pool() * elem_bytes(); }
  size_t pool() const { return static_cast<size_t>(num_blocks) * block_size * kv_dim; }
  ~DevKv() {
    if (base) cudaFree(base);
  }
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<const Transformer> model, const CudaOptions& o);
  ~CudaBackend() override;
  void forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) override;
  /// Sampling on the device (sampling.cpp); not with tensor parallelism (the group's leader samples on the host).
  bool samples_on_device() const override { return !tp_; }
  void forward_sample(std::span<const BatchChunk> batch, KvCache& cache, std::span<const RowSampling> rows,
                      std::vector<SampledToken>& out) override;
  std::string name() const override { return name_; }
  /// From the device pools (workspace.cpp).
  void read_kv(KvCache& cache, int layer, std::span<const int32_t> table, int64_t n, float* k, float* v) override;
  /// ensure_workspace of the largest step, then cudaMemGetInfo (workspace.cpp).
  std::optional<DeviceMemoryInfo> reserve_device_memory(int64_t max_tokens, int max_seqs) override;
  /// cudaMemGetInfo's total (workspace.cpp).
  size_t device_memory_total() const override;

 private:
  // ---- construction (weights.cpp, tensor_parallel.cpp)
  /// Creates the stream and the cuBLAS handle with its fixed workspace.
  void create_stream_and_blas();
  /// Uploads (and repacks) the model's weights, RoPE tables and lm_head.
  void upload_weights(const Transformer& model);
  DevLinear upload_linear(const Linear& lin, bool bf16);
  /// Whether the ternary GEMMs of more than 16 rows read int8 copies (CudaOptions::gemm_weights).
  bool use_int8_gemm(const Transformer& model) const;
  /// Tensor parallelism: checks the communicator against the model's shard and sets tp_ (nothing without a plan).
  void setup_tensor_parallel(const Transformer& model);

  // ---- workspace (workspace.cpp)
  void ensure_workspace(int M, int S, int O);
  DevKv& device_kv(KvCache& cache);

  // ---- forward (forward.cpp, graphs.cpp)
  /// Enqueues the forward of `batch` on stream_ (logits_ [O, vocab] on the device when it has run); returns O.
  int enqueue_forward(std::span<const BatchChunk> batch, KvCache& cache);
  /// Sets the attention kernels of this forward: attn_split_, ntiles_ and tiles_h_.
  void plan_attention(std::span<const BatchChunk> batch, int M, int S, int64_t max_ctx);
  /// Copies the batch's metadata (tokens, positions, row sequences, logit rows, block tables, prefill tiles) to
  /// the device and points tok_d_ ... tiles_d_ at it.
  void upload_metadata(std::span<const BatchChunk> batch, const DevKv& kv, int M, int S, int O);
  void run_body(int M, int S, int O, const DevKv& kv);
  /// run_body of a decode batch through the graph cache: replayed when captured, else run eagerly the first time
  /// a shape is seen and captured the second time.
  void run_graphed(int M, int S, int O, const DevKv& kv);
  void clear_graphs();
  /// Tensor parallel: local [M, widths[rank]] on every rank -> full [M, sum widths] (NCCL all-gather of blocks
  /// padded to max(widths), then one 2D copy per rank). `local` must have room for M * max(widths) floats.
  void gather_cols(const float* local, int M, const std::vector<int64_t>& widths, float* full);
  /// out[rows, n] (+)= lin(norm?(in rows via row_map)); in has row stride ldin.
  void apply(const DevLinear& lin, const float* in, int64_t ldin, const int32_t* row_map, const float* norm_w,
             int rows, float* out, int64_t ldout, bool add);
  /// out[rows, n] (+)= lin(x) for a ternary lin whose input is already quantized in xq_ / sumq_ / inv_s_ (and,
  /// when lin runs the tcb kernel, its bit planes in xb_). defer: when lin runs the int8 GEMM, its epilogue is left
  /// pending (pending_) for the next row kernel to apply (residual_norm_quant, glu_norm_quant_sums).
  void ternary_quantized(const DevLinear& lin, int rows, float* out, int64_t ldout, bool add, bool defer = false);
  /// Whether lin's epilogue may be left pending: its output is the residual stream (added), gate_up's, which the
  /// next row kernel reads first, or qkv's in a decode step of the fused GQA attention (not under tensor
  /// parallelism, whose collectives read them).
  bool defer_ok(const DevLinear& lin, const float* out, bool add) const {
    return !tp_ && lin.w8 && ((add && out == x_) || (!add && out == gu_) || (!add && out == qkv_ && defer_qkv_));
  }
  /// Runs the pending epilogue (ternary_epilogue), if any.
  void flush_pending();

  // ---- int8 GEMM tuning (int8_gemm_tuning.cpp)
  /// For decode batches of M rows (>= kInt8GemmMinRows): times each cuBLASLt candidate of each ternary projection
  /// shape's int8 GEMM, for the residual projections (o, down) also split K in 2-4 parts, over the layers' own
  /// weights (a CUDA graph of one GEMM per layer, so the weights come from DRAM as in a step), charges each split
  /// its extra reads in residual_norm_quant, and keeps the fastest in gemm_cfg_. Once per (shape, rows rounded up
  /// to 16): for the engine's batch sizes in reserve_device_memory, else before the first graphed decode step of
  /// that size (never inside a capture). The sums are exact whichever runs.
  void tune_int8_gemms(int M);
  /// reserve_device_memory tunes the decode batches up to this many rows (larger ones at their first step).
  static constexpr int kTuneMaxRows = 512;
  /// The tuned configuration of lin's int8 GEMM at `rows` rows (cuBLASLt's first choice, unsplit, when none);
  /// residual: lin is o or down (adds into the residual stream).
  cuda::Int8GemmConfig int8_gemm_config(const DevLinear& lin, int rows, bool residual) const;
  /// lin runs the tcb kernel at `rows` rows: tcb weights and one row. Rows of more tokens over tcb weights run the
  /// tc2 kernels on a rewritten copy (tc2_scratch_), which measured faster than the tcb kernel at 2-16 tokens
  /// (bench/CUDA_NOTES.md, "Ternary GEMV and GEMM kernels").
  bool tcb_kernel_for(const DevLinear& lin, int rows) const { return lin.wt && rows == 1; }
  /// Where norm_quant writes the activation bit planes for lin at `rows` rows: xb_ when the tcb kernel will read
  /// them, else nullptr.
  uint32_t* tcb_planes_for(const DevLinear& lin, int rows) const { return tcb_kernel_for(lin, rows) ? xb_ : nullptr; }

  ModelConfig c_;
  CudaOptions opts_;
  std::optional<TensorParallelPlan> tp_;
  float *full_in_ = nullptr, *gat_ = nullptr, *part_ = nullptr, *lg_local_ = nullptr;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  void* blas_ws_ = nullptr;
  DeviceArena weights_;
  const float* embed_ = nullptr;  // [vocab_end_ - vocab_begin_, hidden] (the rank's slice under TP), or null
  cuda::StoredEmbedding embed_stored_;  // the table as the model stores it (bf16, Q2_0) when embed_ is null
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
  bool attn_gqa_ = false;  // decode rows run the GQA kernels (attention_decode_gqa / attention_gqa)
  int attn_split_ = 1;  // split-K chunks of this forward's decode attention (1: unsplit kernel)
  int nsingle_ = 0;     // rows of single-token chunks in a step that also prefills (GQA attention after the rest)
  int ntiles_ = 0;      // prefill tiles of this forward (0: per-row kernel)
  std::vector<int32_t> tiles_h_;
  static constexpr int kSplitMinContext = 256;  // decode contexts longer than this use split-K

  // Workspace (capacity in rows M, sequences S, logit rows O).
  DeviceArena ws_;
  int capM_ = 0, capS_ = 0, capO_ = 0;
  float *x_ = nullptr, *h_ = nullptr, *qkv_ = nullptr, *attn_ = nullptr, *gu_ = nullptr, *act_ = nullptr,
        *tmp_ = nullptr, *sel_ = nullptr, *logits_ = nullptr;
  __nv_bfloat16* selb_ = nullptr;
  int8_t* xq_ = nullptr;
  uint32_t* xb_ = nullptr;  // tcb activation bit planes of one row [max_kp_ / 4] (tcb_kernel_for: one-row calls)
  // tcb weights, rows of more than one token: the projection rewritten as tc2 (tcb_to_tc2) for the int8 MMA kernels.
  uint32_t* tc2_scratch_ = nullptr;
  size_t tc2_scratch_words_ = 0;
  bool tcb_ = false;  // ternary weights in the tcb layout (else tc2)
  bool int8_gemm_ = false;     // ternary projections carry int8 copies for GEMMs above kInt8GemmMinRows rows
  static constexpr int kInt8GemmMinRows = 17;
  int max_np8_ = 0;
  size_t int8_copy_bytes_ = 0;
  int32_t* acc8_ = nullptr;    // exact sums of the int8 GEMM [capM_ + 16, max_np8_], or its K-split parts
  size_t acc8_cap_ = 0;        // int32 elements of acc8_
  // (np8, kp, rows rounded up to 16, residual projection) -> the tuned int8 GEMM
  std::map<std::tuple<int, int, int, bool>, cuda::Int8GemmConfig> gemm_cfg_;
  cuda::PendingSums pending_;  // an int8 GEMM's epilogue not yet applied (acc null: none)
  int pending_n_ = 0, pending_rows_ = 0;
  bool defer_qkv_ = false;  // this forward is a decode step of the fused GQA attention
  float* inv_s_ = nullptr;
  int32_t* sumq_ = nullptr;
  float* attn_part_ = nullptr;   // split-K partial states [capS_ * H * kAttentionMaxSplit * (D + 2)]
  int32_t* attn_cnt_ = nullptr;  // split-K counters [capS_ * H], zero between launches
  int32_t* meta_d_ = nullptr;
  int32_t* meta_h_ = nullptr;  // pinned
  size_t meta_cap_ = 0;
  // Metadata views (device) for the current shape.
  const int32_t *tok_d_ = nullptr, *pos_d_ = nullptr, *seq_d_ = nullptr, *seg_d_ = nullptr, *out_d_ = nullptr,
                *bt_d_ = nullptr,
                *tiles_d_ = nullptr, *single_d_ = nullptr;

  DeviceSampler sampler_;  // forward_sample (sampling.cpp)

  struct GraphEntry {
    int seen = 0;
    cudaGraphExec_t exec = nullptr;
  };
  std::map<std::tuple<int, int, int, uint64_t, int>, GraphEntry> graphs_;  // (M, S, O, DevKv::id, split)
};

}  // namespace tritium::cuda_detail
