// tritium backend/cuda: forward_sample() — the forward, then the rows' sampling on the device (device_sampler.h);
// the logits never leave the device.
#if TRITIUM_HAVE_CUDA
#include "backend/cuda/cuda_backend_impl.h"

namespace tritium::cuda_detail {

void CudaBackend::forward_sample(std::span<const BatchChunk> batch, KvCache& cache, std::span<const RowSampling> rows,
                                 std::vector<SampledToken>& out) {
  TRITIUM_CHECK(!tp_, "CUDA backend: sampling on the device is not available with tensor parallelism");
  TRITIUM_CHECK(rows.size() == batch.size(), "forward_sample: {} sampling rows for a batch of {} chunks", rows.size(),
                batch.size());
  for (const auto& ch : batch)
    TRITIUM_CHECK(!ch.all_logits, "forward_sample: a chunk wants the logits of every token (use forward)");
  enqueue_forward(batch, cache);
  sampler_.run(logits_, c_.vocab_size, rows, stream_, out);
}

}  // namespace tritium::cuda_detail
#endif
