// tritium backend/cuda: int8 linear layers (quant/int8_projection.h, every Int8Method) on the GPU.
//
// CudaInt8Linear uploads one Int8Projection (codes padded to [np, kp], see kernels/cuda/int8.h; scales; row sums;
// bias; for LLM.int8() the 16-bit weights transposed to [k, n] so that an outlier column is one contiguous read)
// and runs its forward on a stream with the exact arithmetic of Int8Projection::forward:
//   activation statistics per request (absmax, zero-point) / per row (vector-wise) / per request outlier columns
//   (LLM.int8()) -> int8 x int8 -> int32 GEMM (dp4a GEMV for M <= 8, cuBLASLt int8 tensor-core GEMM above) ->
//   fp32 dequantization (+ the 16-bit outlier part, + bias, + the residual) in the CPU's operation order.
// The integer accumulators are exact, so the outputs of every method except weight-only are bit-identical to
// the CPU's; weight-only int8 (fp32 sums) differs from the CPU in the last bits (a different summation order).
//
// Only code built with TRITIUM_HAVE_CUDA includes this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "kernels/cuda/int8.h"
#include "quant/int8_projection.h"

namespace tritium::cuda {

/// How one cuBLASLt int8 GEMM runs: splits, K cut into that many slices (a strided batch of K / splits each: more
/// thread blocks for the few output tiles of a decode batch), whose partial sums land `part_stride(M, ldc)` int32
/// apart from acc; algo, the index in cuBLASLt's heuristic list for the shape (0: its first choice). The int32
/// sums are exact, so neither changes a result.
struct Int8GemmConfig {
  int splits = 1;
  int algo = 0;
};

/// Device scratch shared by all int8 projections of one backend (one stream): activation codes and statistics,
/// int32 accumulators, the cuBLASLt handle, its workspace and its chosen algorithms.
class Int8Workspace {
 public:
  Int8Workspace();
  ~Int8Workspace();
  Int8Workspace(const Int8Workspace&) = delete;
  Int8Workspace& operator=(const Int8Workspace&) = delete;

  /// Records the widths of a projection that will use this workspace (call before ensure()).
  void reserve_dims(int k, int kp, int np);
  /// Makes room for `rows` rows (reallocates when larger than before; never during graph capture).
  void ensure(int rows);
  int rows_capacity() const { return rows_; }
  const Int8ActBuffers& act() const { return act_; }
  int32_t* acc() const { return acc_; }

  /// acc int32 [M, ldc] = xq int8 [M, kp] . w int8 [np, kp]^T, exact. The cuBLASLt path computes
  /// round_up(M, 16) rows: xq and acc must have room for them (the workspace's buffers do). kind: 0 = automatic (dp4a GEMV for
  /// M <= kDp4aMaxRows, cuBLASLt int8 tensor-core GEMM otherwise), 1 = dp4a, 2 = cuBLASLt. np, kp multiples of 16,
  /// ldc a multiple of 4 and >= np. Throws tritium::Error on a cuBLASLt failure.
  /// cfg (cuBLASLt only): cfg.splits > 1 needs kp % (16 cfg.splits) == 0 and room in acc for cfg.splits parts of
  /// round_up(M, 16) x ldc; an algo index past the heuristic's list throws.
  void gemm(const int8_t* w, int np, int kp, const int8_t* xq, int M, int32_t* acc, int64_t ldc, cudaStream_t stream,
            int kind = 0, Int8GemmConfig cfg = {});
  /// The rows cuBLASLt runs for M rows: M rounded up to 16 (the rows of a plan, and of a tuned configuration).
  static int padded_rows(int M) { return (M + 15) / 16 * 16; }
  /// The distance in int32 between the partial sums of a K-split cuBLASLt GEMM of M rows (padded_rows(M) x ldc).
  static int64_t part_stride(int M, int64_t ldc) { return static_cast<int64_t>(padded_rows(M)) * ldc; }
  /// How many algorithms cuBLASLt's heuristic offers for the shape (at most kMaxAlgos; 0 when it has none).
  int algo_count(int np, int kp, int M, int64_t ldc, int splits);
  /// Largest batch the automatic choice sends to the dp4a GEMV.
  static constexpr int kDp4aMaxRows = 8;
  /// Candidates kept from cuBLASLt's heuristic per shape.
  static constexpr int kMaxAlgos = 3;

 private:
  struct LtPlan;
  /// The plan of one shape (created on first use); throws tritium::Error when cuBLASLt has no algorithm for it.
  LtPlan& plan(int np, int kp, int Mp, int64_t ldc, int splits);
  void free_buffers();
  int k_ = 0, kp_ = 0, np_ = 0, rows_ = 0;
  std::vector<void*> ptrs_;
  Int8ActBuffers act_;
  int32_t* acc_ = nullptr;
  bool lt_unavailable_ = false;  // cuBLASLt found no int8 algorithm once: automatic choice stays on dp4a
  void* lt_ = nullptr;  // cublasLtHandle_t
  void* lt_ws_ = nullptr;
  size_t lt_ws_bytes_ = size_t{32} << 20;
  std::map<std::tuple<int, int, int, int64_t, int>, std::unique_ptr<LtPlan>> plans_;
};

/// One Int8Projection on the GPU.
class CudaInt8Linear {
 public:
  /// Uploads the layer and records its widths in `ws`. Throws tritium::Error when CUDA fails or K exceeds the
  /// int32-exact range (kInt8GemmMaxK).
  CudaInt8Linear(const Int8Projection& lin, Int8Workspace& ws);
  ~CudaInt8Linear();
  CudaInt8Linear(const CudaInt8Linear&) = delete;
  CudaInt8Linear& operator=(const CudaInt8Linear&) = delete;

  /// out[r, 0..n) (add ? +=, else =) of the layer applied to x float32 [rows, k] (row stride ldx), device memory.
  /// Requests: row r belongs to request seq[row_map ? row_map[r] : r] (non-decreasing; seq null = one request),
  /// see kernels/cuda/int8.h. rows <= ws.rows_capacity(). gemm_kind as Int8Workspace::gemm.
  void forward(const float* x, int64_t ldx, int rows, const int32_t* seq, const int32_t* row_map, float* out,
               int64_t ldout, bool add, Int8Workspace& ws, cudaStream_t stream, int gemm_kind = 0) const;

  int n() const { return n_; }
  int k() const { return k_; }
  Int8Method method() const { return method_; }
  /// Bytes the GPU reads per decode step for this layer's integer weights (padded codes).
  size_t code_bytes() const { return static_cast<size_t>(np_) * kp_; }

 private:
  Int8Method method_;
  int n_ = 0, k_ = 0, np_ = 0, kp_ = 0;
  float alpha_ = 6.0f;
  int32_t zw_ = 0;
  bool per_tensor_ = false;
  std::vector<void*> ptrs_;
  int8_t* q_ = nullptr;
  float* sw_ = nullptr;
  int32_t* row_sum_ = nullptr;
  float* bias_ = nullptr;
  uint16_t* w16t_ = nullptr;
};

}  // namespace tritium::cuda
