// tritium runtime: the CUDA backend — the whole transformer forward on an NVIDIA GPU.
//
// make_cuda_backend() copies a loaded Transformer's weights to the GPU (ternary projections repacked into the tc2
// layout of kernels/cuda/ternary_tc2.h, float projections as f32 for cuBLAS, int8 projections and an int8 lm_head
// as runtime/cuda_int8_linear.h, a float lm_head as bf16 or f32) and returns a ForwardBackend for
// Transformer::set_backend. forward() then takes the same BatchChunk batches as the CPU path; the KV cache lives in
// device memory in the same paged layout, addressed by the same block tables (attached to the host KvCache object,
// f32 only). Decode batches (every chunk one token, last logits) are captured as a CUDA graph per (rows, sequences)
// shape and replayed.
//
// This header needs no CUDA headers; in a build without CUDA, cuda_device_count() returns 0 and
// make_cuda_backend() throws.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace tritium {

class NcclComm;

struct CudaOptions {
  int device = 0;
  /// lm_head in bf16 through cuBLAS (half the bytes of f32; activations rounded to bf16) or f32.
  bool lm_head_bf16 = true;
  /// Capture decode steps as CUDA graphs.
  bool graphs = true;
  /// Tensor parallelism: the NCCL communicator of this rank, required when the model is a shard
  /// (parallel/shard.h); the backend then all-reduces / all-gathers as the model's plan says.
  std::shared_ptr<NcclComm> tp_comm;
  /// Copy the logits to the host at the end of forward() (ranks other than 0 do not need them).
  bool copy_logits = true;
  /// Attention kernels: false = automatic (split-K decode attention for contexts over 256 positions, the
  /// flash-style prefill kernel for prefill chunks), true = the basic per-row kernels only. The environment
  /// variable TRITIUM_CUDA_ATTENTION=basic also forces the basic kernels (=auto or unset: automatic).
  bool attention_basic = false;
  /// Batch-1 decode steps of ternary models in one persistent kernel (kernels/cuda/decode_persistent.h) when
  /// the model fits it (sm_90); false = the layered kernels. Off by default: exact, but measured slower than the
  /// layered kernels on the H200 (bench/CUDA_NOTES.md, version 9). The environment variable
  /// TRITIUM_CUDA_PERSISTENT=1 / =0 overrides this. The backend's name() says "persistent decode" when it is used.
  bool persistent_decode = false;
  /// GPU layout of ternary weights: "tc2" (2-bit codes for the dp4a / int8 MMA kernels, ternary_tc2.h) or "tcb"
  /// (bit planes for the binary tensor-core MMA GEMV, kernels/cuda/ternary_tcb.h; sm_80+; one-token rows use it,
  /// chunks of more tokens run the tc2 kernels on a rewritten copy, TRITIUM_CUDA_TCB_MAX_TOKENS=2..16 moves that
  /// limit). Both hold 2 bits per weight and give the same results bit for bit. "auto": tcb when single_sequence
  /// is set, the device is sm_80+ and there is no tensor parallelism (its batch-1 decode step measured 6-11% faster
  /// on the H200), else tc2 (tcb is 19-34% slower at batch 16; bench/CUDA_NOTES.md version 12). The environment
  /// variable TRITIUM_CUDA_LAYOUT overrides this.
  std::string ternary_layout = "auto";
  /// The engine decodes one sequence at a time (tritium generate / chat): "auto" then picks the tcb layout.
  bool single_sequence = false;
};

/// Programmatic dependent launch of the CUDA kernels (kernels/cuda/launch.cuh; on by default): each kernel may
/// start while the previous one finishes. Process-wide; takes effect for graphs captured afterwards. No-op
/// without CUDA.
void cuda_set_dependent_launch(bool on);

/// Number of CUDA devices usable by this build (0 when built without CUDA or when no driver/GPU is present).
int cuda_device_count();
/// "NVIDIA H200" etc.; "" when there is no such device.
std::string cuda_device_name(int device = 0);

/// Uploads the model and returns the backend. Throws tritium::Error when CUDA is unavailable, the device is
/// missing, or the model uses something the CUDA path does not support (a projection type other than ternary,
/// float or int8, head_dim other than 64 / 128).
std::shared_ptr<ForwardBackend> make_cuda_backend(const Transformer& model, const CudaOptions& opts = {});

}  // namespace tritium

namespace tritium {

struct CudaKernelBenchOptions {
  int device = 0;
  int launches = 100;                  ///< launches captured in one CUDA graph; time = graph time / launches
  int reps = 5;                        ///< graph replays timed; the median is reported
  size_t rotate_bytes = size_t{512} << 20;  ///< weights are rotated over copies totalling at least this (cold L2)
  std::vector<int> batches = {1, 4, 16, 512};  ///< token counts M of the projection table
};

/// Times the CUDA kernels on the BitNet b1.58 2B4T projection shapes (2560x2560, 3840x2560, 13824x2560,
/// 2560x6912, 128256x2560) at batch 1, 4, 16 and 512 against cuBLAS bf16 on the same shapes, plus the copy
/// bandwidth measured in the same run, and returns a markdown report. Throws tritium::Error without CUDA.
std::string cuda_kernel_bench(const CudaKernelBenchOptions& o);

/// Device-to-device copy bandwidth in GB/s (bytes read + written, 2 GiB copied by a kernel, median of 5). Throws without CUDA.
double cuda_copy_bandwidth_gbs(int device = 0);

}  // namespace tritium
