// tritium runtime: the CUDA backend — the whole transformer forward on an NVIDIA GPU.
//
// make_cuda_backend() copies a loaded Transformer's weights to the GPU (ternary projections repacked into the
// tc2 layout of kernels/cuda/ternary_tc2.h, float projections as f32 for cuBLAS, lm_head as bf16 or f32) and
// returns a ForwardBackend for Transformer::set_backend. forward() then takes the same BatchChunk batches as the
// CPU path; the KV cache lives in device memory in the same paged layout, addressed by the same block tables
// (attached to the host KvCache object, f32 only). Decode batches (every chunk one token, last logits) are
// captured as a CUDA graph per (rows, sequences) shape and replayed.
//
// This header needs no CUDA headers; in a build without CUDA, cuda_device_count() returns 0 and
// make_cuda_backend() throws.
#pragma once

#include <memory>
#include <string>

#include "model/transformer.h"

namespace tritium {

struct CudaOptions {
  int device = 0;
  /// lm_head in bf16 through cuBLAS (half the bytes of f32; activations rounded to bf16) or f32.
  bool lm_head_bf16 = true;
  /// Capture decode steps as CUDA graphs.
  bool graphs = true;
};

/// Number of CUDA devices usable by this build (0 when built without CUDA or when no driver/GPU is present).
int cuda_device_count();
/// "NVIDIA H200" etc.; "" when there is no such device.
std::string cuda_device_name(int device = 0);

/// Uploads the model and returns the backend. Throws tritium::Error when CUDA is unavailable, the device is
/// missing, or the model uses something the CUDA path does not support (a projection type other than ternary
/// or float, head_dim other than 64 / 128).
std::shared_ptr<ForwardBackend> make_cuda_backend(const Transformer& model, const CudaOptions& opts = {});

}  // namespace tritium
