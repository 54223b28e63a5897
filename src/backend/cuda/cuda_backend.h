// tritium backend/cuda: the CUDA backend — the whole transformer forward on an NVIDIA GPU.
//
// make_cuda_backend() copies a loaded Transformer's weights to the GPU and returns a Backend for
// Transformer::set_backend. Ternary projections are repacked into one of two GPU layouts (docs/formats.md, "GPU
// weight layouts (tc2, tcb)"; CudaOptions::ternary_layout): tc2, 2-bit codes for the dp4a GEMV and the int8
// tensor-core GEMV / GEMM, or tcb, two bit planes per weight for the binary tensor-core GEMV (sm_80+) of one-token
// rows, whose rows of more tokens run the tc2 kernels on a copy rewritten per call. Float projections go to the GPU
// as f32 for cuBLAS, int8 projections and an int8 lm_head as backend/cuda/int8_linear.h, a float lm_head as bf16 or
// f32. forward() takes the same BatchChunk batches as the CPU path; the KV cache lives in device memory in the same
// paged layout, addressed by the same block tables (attached to the host KvCache object; f32 or bf16). Decode batches
// (every chunk one token, last logits) are captured as a CUDA graph per (rows, sequences) shape and replayed.
// Design and measurements: bench/CUDA_NOTES.md.
//
// This header needs no CUDA headers; in a build without CUDA, cuda_device_count() returns 0 and
// make_cuda_backend() throws.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

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
  /// GPU layout of ternary weights (docs/formats.md, "GPU weight layouts (tc2, tcb)"): "tc2" (2-bit codes for the
  /// dp4a / int8 MMA kernels) or "tcb" (bit planes for the binary tensor-core MMA GEMV, sm_80+: one-token rows run
  /// it, rows of more tokens run the tc2 kernels on a rewritten copy). Both hold 2 bits per weight and give the same
  /// results bit for bit. "auto": tcb when single_sequence is set, the device is sm_80+ and there is no tensor
  /// parallelism (its batch-1 decode step measured 6-11% faster on the H200), else tc2 (tcb is 19-34% slower at
  /// batch 16; bench/CUDA_NOTES.md, "GPU weight layouts: tc2 and tcb"). The environment variable
  /// TRITIUM_CUDA_LAYOUT overrides this.
  std::string ternary_layout = "auto";
  /// The engine decodes one sequence at a time (tritium generate / chat): "auto" then picks the tcb layout.
  bool single_sequence = false;
  /// Weights of the ternary GEMMs of more than 16 rows (batched decode, prefill): "packed" = the 2-bit layout above
  /// through our tiled int8 tensor-core GEMM; "int8" = an int8 copy of every ternary projection (1 byte per weight
  /// beside the 2-bit copy, which the GEMVs of 1-16 rows keep reading) through cuBLASLt's int8 GEMM and our
  /// epilogue: the same exact integer sums, so the same bits, 2.2-2.6x faster at 256 rows on the H200
  /// (bench/CUDA_NOTES.md, "Batched decode"). "auto": int8 when the engine batches (not single_sequence), without
  /// tensor parallelism, and the copy takes at most 1/16 of the device's memory (2.09 GB of the H200's 141 GB for
  /// BitNet b1.58 2B4T); packed otherwise.
  std::string gemm_weights = "auto";
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
std::shared_ptr<Backend> make_cuda_backend(std::shared_ptr<const Transformer> model, const CudaOptions& opts = {});
/// Borrows `model` (see borrow()): the caller keeps it alive as long as the backend.
inline std::shared_ptr<Backend> make_cuda_backend(const Transformer& model, const CudaOptions& opts = {}) {
  return make_cuda_backend(borrow(model), opts);
}

}  // namespace tritium
