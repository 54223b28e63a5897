// tritium backend/cuda: the CUDA graphs of decode steps. A decode batch (every chunk one token, last logits) runs
// run_body through a cache keyed by (rows, sequences, logit rows, KV pool allocation, split-K chunks): the first
// time a key is seen eagerly (so that module loading and kernel attribute changes happen before any capture), the
// second time captured and launched, afterwards replayed. The kernels read positions and block tables from device
// metadata, so one graph serves every step of its shape. Growing the workspace or the metadata buffers clears the
// cache.
#if TRITIUM_HAVE_CUDA
#include "backend/cuda/cuda_backend_impl.h"

namespace tritium::cuda_detail {

using cuda::check;

void CudaBackend::run_graphed(int M, int S, int O, const DevKv& kv) {
  GraphEntry& g = graphs_[{M, S, O, kv.id, attn_split_}];
  if (g.exec) {
    check(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch");
  } else if (g.seen++ == 0) {
    if (int8_gemm_ && M >= kInt8GemmMinRows) tune_int8_gemms(M);
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
}

void CudaBackend::clear_graphs() {
  for (auto& [k, g] : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  graphs_.clear();
}

}  // namespace tritium::cuda_detail
#endif
