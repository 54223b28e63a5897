// tritium backend/cuda: the choice of K split and cuBLASLt algorithm for the int8 GEMMs of decode batches, by
// timing them on the device (see tune_int8_gemms in cuda_backend_impl.h; bench/CUDA_NOTES.md, "Batched decode").
//
// Why: at 17-64 rows cuBLASLt's first choice tiles o, qkv and down (2560-3840 output rows) into 40-60 output tiles,
// a third to a half of the H200's SMs, each reading its weights at one SM's share of the bandwidth. A strided batch
// over K slices multiplies the tiles; the partial sums are added by the row kernel that reads them (exact
// integers). Which split and which of the heuristic's candidates is fastest differs per shape and row count and
// is not what the heuristic's first choice says, so it is measured: cold (every layer's weights once per replay,
// far more than the L2 holds) and in a CUDA graph, as a decode step runs them.
#if TRITIUM_HAVE_CUDA
#include <algorithm>
#include <array>
#include <memory>
#include <type_traits>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"

namespace tritium::cuda_detail {

using cuda::check;

namespace {

// The K splits tried for the residual projections (o, down), whose sums residual_norm_quant adds in one kernel
// (up to cuda::kMaxSumParts parts); qkv and gate_up, read by the fused attention and the GLU, stay in one part.
constexpr std::array<int, 4> kSplits = {1, 2, 3, 4};
static_assert(kSplits.back() <= cuda::kMaxSumParts);
// Timed replays of each candidate's graph (after one warm-up); the median counts.
constexpr int kReplays = 5;
// The row kernel reading the sums loads every part: one block per row at ~128 bytes per cycle from L2 at ~1.9 GHz.
constexpr double kPartBytesPerUs = 128.0 * 1.9e3;

}  // namespace

cuda::Int8GemmConfig CudaBackend::int8_gemm_config(const DevLinear& lin, int rows, bool residual) const {
  const auto it = gemm_cfg_.find({lin.np8, lin.kp, cuda::Int8Workspace::padded_rows(rows), residual});
  if (it == gemm_cfg_.end()) return {};
  const cuda::Int8GemmConfig cfg = it->second;
  const int64_t need = cfg.splits * cuda::Int8Workspace::part_stride(rows, lin.np8);
  return static_cast<size_t>(need) <= acc8_cap_ ? cfg : cuda::Int8GemmConfig{};
}

void CudaBackend::tune_int8_gemms(int M) {
  if (!i8ws_ || layers_.empty()) return;
  const int Mp = cuda::Int8Workspace::padded_rows(M);
  // The distinct shapes among the layers' ternary projections with int8 copies, each with every layer's weights.
  struct Shape {
    int np8, kp;
    bool residual;
    std::vector<const int8_t*> w;
  };
  std::vector<Shape> shapes;
  for (const DevLayer& L : layers_) {
    for (const DevLinear* lin : {&L.qkv, &L.o, &L.gate_up, &L.down}) {
      if (lin->kind != DevLinear::kTernary || !lin->w8) continue;
      const bool residual = lin == &L.o || lin == &L.down;
      auto it = std::find_if(shapes.begin(), shapes.end(), [&](const Shape& s) {
        return s.np8 == lin->np8 && s.kp == lin->kp && s.residual == residual;
      });
      if (it == shapes.end()) it = shapes.insert(shapes.end(), Shape{lin->np8, lin->kp, residual, {}});
      it->w.push_back(lin->w8);
    }
  }
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (int8 GEMM tuning)");
  struct EventPair {  // destroyed on every way out
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    ~EventPair() {
      if (e0) cudaEventDestroy(e0);
      if (e1) cudaEventDestroy(e1);
    }
  } ev;
  check(cudaEventCreate(&ev.e0), "cudaEventCreate");
  check(cudaEventCreate(&ev.e1), "cudaEventCreate");
  using ExecPtr = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, decltype(&cudaGraphExecDestroy)>;
  for (const Shape& sh : shapes) {
    if (gemm_cfg_.count({sh.np8, sh.kp, Mp, sh.residual})) continue;
    cuda::Int8GemmConfig best{};
    double best_us = -1.0;
    for (const int S : kSplits) {
      if (sh.kp % (16 * S) != 0 || (S > 1 && !sh.residual)) continue;
      if (static_cast<size_t>(S * cuda::Int8Workspace::part_stride(M, sh.np8)) > acc8_cap_) continue;
      const int algos = i8ws_->algo_count(sh.np8, sh.kp, M, sh.np8, S);
      for (int a = 0; a < algos; ++a) {
        const cuda::Int8GemmConfig cfg{S, a};
        // One eager call first: an algorithm the shape cannot run throws here, not inside the capture.
        try {
          i8ws_->gemm(sh.w[0], sh.np8, sh.kp, xq_, M, acc8_, sh.np8, stream_, 2, cfg);
          check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (int8 GEMM tuning)");
        } catch (const Error&) {
          cudaGetLastError();
          continue;
        }
        cudaGraph_t graph = nullptr;
        check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        try {
          for (const int8_t* w : sh.w) i8ws_->gemm(w, sh.np8, sh.kp, xq_, M, acc8_, sh.np8, stream_, 2, cfg);
        } catch (...) {
          cudaStreamEndCapture(stream_, &graph);
          if (graph) cudaGraphDestroy(graph);
          throw;
        }
        check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
        cudaGraphExec_t raw = nullptr;
        const cudaError_t inst = cudaGraphInstantiate(&raw, graph, 0);
        cudaGraphDestroy(graph);
        check(inst, "cudaGraphInstantiate (int8 GEMM tuning)");
        const ExecPtr exec(raw, &cudaGraphExecDestroy);
        std::vector<float> ms;
        for (int r = 0; r <= kReplays; ++r) {
          check(cudaEventRecord(ev.e0, stream_), "cudaEventRecord");
          check(cudaGraphLaunch(exec.get(), stream_), "cudaGraphLaunch");
          check(cudaEventRecord(ev.e1, stream_), "cudaEventRecord");
          check(cudaEventSynchronize(ev.e1), "cudaEventSynchronize");
          float t = 0.0f;
          check(cudaEventElapsedTime(&t, ev.e0, ev.e1), "cudaEventElapsedTime");
          if (r > 0) ms.push_back(t);  // replay 0 warms up
        }
        std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
        const double us = 1e3 * ms[ms.size() / 2] / static_cast<double>(sh.w.size()) +
                          (S - 1) * 4.0 * sh.np8 / kPartBytesPerUs;
        if (best_us < 0 || us < best_us) best_us = us, best = cfg;
      }
    }
    gemm_cfg_[{sh.np8, sh.kp, Mp, sh.residual}] = best;
  }
}

}  // namespace tritium::cuda_detail
#endif
