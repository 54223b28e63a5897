// tritium backend/cuda: the CUDA backend's device memory that depends on the batch and the cache — the workspace of
// a batch shape (activations, quantized inputs, attention scratch, logits), grown to the largest shape seen, and
// the device copy of a KvCache, attached to the host object.
#if TRITIUM_HAVE_CUDA
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/dtype.h"
#include "kv/fp8.h"

namespace tritium::cuda_detail {

using cuda::check;

void CudaBackend::ensure_workspace(int M, int S, int O) {
  if (M <= capM_ && S <= capS_ && O <= capO_) return;
  clear_graphs();
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  ws_.release();
  meta_d_ = nullptr;  // lived in ws_: reallocated in upload_metadata()
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
  // The int8 GEMM (cuBLASLt) runs on the rows rounded up to 16: room for them in xq_ and its sums (scratch, never
  // read back).
  xq_ = ws_.alloc<int8_t>((Mc + 16) * max_kp_);
  if (int8_gemm_) {  // room for the parts of K-split decode GEMMs (up to 4 parts of 256 rows, tune_int8_gemms)
    acc8_cap_ = std::max((Mc + 16) * max_np8_,
                         size_t{cuda::kMaxSumParts} * (std::min<size_t>(Mc, 256) + 16) * max_np8_);
    acc8_ = ws_.alloc<int32_t>(acc8_cap_);
  }
  if (tcb_) xb_ = ws_.alloc<uint32_t>(static_cast<size_t>(max_kp_) / 4);  // one row: see tcb_kernel_for
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
  TRITIUM_CHECK(s.dtype == KvDType::kF32 || s.dtype == KvDType::kBF16 || s.dtype == KvDType::kFP8E4M3,
                "CUDA backend: KV cache dtype {} is not supported (f32, bf16 or fp8)", kv_dtype_name(s.dtype));
  TRITIUM_CHECK(s.dtype != KvDType::kFP8E4M3 || (std::isfinite(s.quant_scale) && s.quant_scale > 0),
                "CUDA backend: fp8 KV cache scale {} must be positive", s.quant_scale);
  const cuda::KvElem elem = s.dtype == KvDType::kBF16    ? cuda::KvElem::kBF16
                            : s.dtype == KvDType::kFP8E4M3 ? cuda::KvElem::kFP8
                                                           : cuda::KvElem::kF32;
  const float scale = elem == cuda::KvElem::kFP8 ? s.quant_scale : 1.0f;
  TRITIUM_CHECK(s.num_layers == c_.num_layers && s.kv_dim() == c_.kv_dim(),
                "CUDA backend: KV cache shape does not match the model");
  auto* kv = static_cast<DevKv*>(cache.device_state().get());
  if (!kv || kv->num_blocks != s.num_blocks || kv->block_size != s.block_size || kv->elem != elem ||
      kv->scale != scale) {
    static std::atomic<uint64_t> next_id{1};
    auto p = std::make_shared<DevKv>();
    p->id = next_id.fetch_add(1, std::memory_order_relaxed);
    p->num_blocks = s.num_blocks;
    p->block_size = s.block_size;
    p->layers = s.num_layers;
    p->kv_dim = s.kv_dim();
    p->elem = elem;
    p->scale = scale;
    const size_t bytes = 2 * static_cast<size_t>(s.num_layers) * p->pool() * p->elem_bytes();
    check(cudaMalloc(reinterpret_cast<void**>(&p->base), std::max<size_t>(bytes, 256)), "cudaMalloc (KV cache)");
    check(cudaMemset(p->base, 0, std::max<size_t>(bytes, 256)), "cudaMemset (KV cache)");
    kv = p.get();
    cache.device_state() = std::static_pointer_cast<void>(p);
  }
  return *kv;
}

namespace {
/// The device's memory as it stands (cudaMemGetInfo on `device`).
DeviceMemoryInfo memory_info(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return DeviceMemoryInfo{total_b, total_b - free_b};
}
}  // namespace

std::optional<DeviceMemoryInfo> CudaBackend::reserve_device_memory(int64_t max_tokens, int max_seqs) {
  TRITIUM_CHECK(max_tokens > 0 && max_seqs > 0 && max_tokens <= INT32_MAX, "reserve_device_memory: bad sizes");
  check(cudaSetDevice(opts_.device), "cudaSetDevice");
  ensure_workspace(static_cast<int>(max_tokens), max_seqs, max_seqs);
  // The int8 GEMMs of the decode batches the engine may run (rows rounded up to 16), tuned now: tuning at the first
  // step of each size would stall serving once per size.
  if (int8_gemm_) {
    const int top = std::min(max_seqs, kTuneMaxRows);
    for (int m = kInt8GemmMinRows; m <= top; m = cuda::Int8Workspace::padded_rows(m) + 1) tune_int8_gemms(m);
  }
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  return memory_info(opts_.device);
}

size_t CudaBackend::device_memory_total() const { return memory_info(opts_.device).total; }

void CudaBackend::read_kv(KvCache& cache, int layer, std::span<const int32_t> table, int64_t n, float* k, float* v) {
  check(cudaSetDevice(opts_.device), "cudaSetDevice");
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (read_kv)");
  const DevKv& kv = device_kv(cache);
  TRITIUM_CHECK(layer >= 0 && layer < kv.layers, "read_kv: layer {} out of range", layer);
  TRITIUM_CHECK(n >= 0 && n <= static_cast<int64_t>(table.size()) * kv.block_size,
                "read_kv: {} positions exceed the block table", n);
  const size_t eb = kv.elem_bytes(), row = static_cast<size_t>(kv.kv_dim) * eb;
  std::vector<uint8_t> buf(static_cast<size_t>(n) * row);
  for (int half = 0; half < 2; ++half) {
    const auto* pool = static_cast<const uint8_t*>(half ? kv.v(layer) : kv.k(layer));
    for (int64_t p0 = 0; p0 < n; p0 += kv.block_size) {  // one copy per block: its positions are contiguous
      const int32_t b = table[static_cast<size_t>(p0 / kv.block_size)];
      TRITIUM_CHECK(b >= 0 && b < kv.num_blocks, "read_kv: block id {} outside the KV pool", b);
      const int64_t cnt = std::min<int64_t>(kv.block_size, n - p0);
      check(cudaMemcpy(buf.data() + static_cast<size_t>(p0) * row,
                       pool + static_cast<size_t>(b) * kv.block_size * row, static_cast<size_t>(cnt) * row,
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy (read_kv)");
    }
    float* dst = half ? v : k;
    const size_t count = static_cast<size_t>(n) * kv.kv_dim;
    for (size_t i = 0; i < count; ++i) {
      const uint8_t* e = buf.data() + i * eb;
      if (kv.elem == cuda::KvElem::kF32) {
        std::memcpy(dst + i, e, 4);
      } else if (kv.elem == cuda::KvElem::kBF16) {
        uint16_t h;
        std::memcpy(&h, e, 2);
        dst[i] = bf16_to_f32(h);
      } else {
        dst[i] = fp8_e4m3_to_f32(*e) * kv.scale;
      }
    }
  }
}

}  // namespace tritium::cuda_detail
#endif
