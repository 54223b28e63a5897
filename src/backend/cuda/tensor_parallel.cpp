// tritium backend/cuda: tensor parallelism in the CUDA backend (docs/tensor_parallel.md) — the checks of the NCCL
// communicator against the model's shard, and the all-gather of column blocks (attention output and MLP activations
// of the replicated o / down projections, logits of the vocabulary-parallel lm_head). The all-reduces are single
// NcclComm calls in forward.cpp.
#if TRITIUM_HAVE_CUDA
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "parallel/nccl_comm.h"

namespace tritium::cuda_detail {

void CudaBackend::setup_tensor_parallel(const Transformer& model) {
  if (!model.tp_plan()) return;
  const CudaOptions& o = opts_;
  TRITIUM_CHECK(o.tp_comm, "CUDA backend: the model is a tensor-parallel shard but no NCCL communicator was given");
  TRITIUM_CHECK(o.tp_comm->rank() == model.tp_plan()->rank && o.tp_comm->world() == model.tp_plan()->world,
                "CUDA backend: NCCL rank {}/{} differs from the shard's {}/{}", o.tp_comm->rank(), o.tp_comm->world(),
                model.tp_plan()->rank, model.tp_plan()->world);
  tp_ = *model.tp_plan();
  name_ += " tp" + std::to_string(tp_->rank) + "/" + std::to_string(tp_->world);
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
    cuda::check(cudaMemcpy2DAsync(full + col, total * sizeof(float), gat_ + r * block, w * sizeof(float),
                                  w * sizeof(float), static_cast<size_t>(M), cudaMemcpyDeviceToDevice, stream_),
                "cudaMemcpy2DAsync (tensor-parallel gather)");
    col += w;
  }
}

}  // namespace tritium::cuda_detail
#endif
