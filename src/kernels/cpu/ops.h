// tritium kernels/cpu: element-wise and row-wise transformer operations on float32 activations.
// All take row-major [M, D] buffers; they are fp32 and follow Hugging Face's arithmetic order.
#pragma once

#include <cstdint>

namespace tritium::cpu {

/// RMSNorm (Zhang & Sennrich 2019) as HF LlamaRMSNorm: y = x / sqrt(mean(x^2) + eps) * weight.
/// x, y: [M, D] (may alias); weight: [D].
void rms_norm(const float* x, const float* weight, float* y, int64_t M, int64_t D, float eps);

/// Per-head RMSNorm in place (Qwen3's q_norm / k_norm): in each of M rows of `x` (row stride `stride` floats),
/// the `heads` vectors of `D` floats that start at the row are normalized as rms_norm does, each with `weight`
/// [D]. Multithreaded over rows (the same bits as one row at a time).
void head_rms_norm(float* x, int64_t M, int64_t stride, int64_t heads, int64_t D, const float* weight, float eps);

/// Rotary position embedding as HF applies it (rotate_half): for each head h and i < d/2,
/// (x[i], x[i + d/2]) -> (x[i] cos - x[i + d/2] sin, x[i + d/2] cos + x[i] sin) with angle pos * inv_freq[i].
/// x: [n_heads, head_dim] for one token at position pos; cos/sin: [head_dim/2] precomputed for pos.
void rope_apply(float* x, int n_heads, int head_dim, const float* cos, const float* sin);

/// y = silu(gate) * up, elementwise over n values (SwiGLU).
void silu_mul(const float* gate, const float* up, float* y, int64_t n);
/// y = relu(gate)^2 * up, elementwise over n values (BitNet b1.58's squared ReLU GLU).
void relu2_mul(const float* gate, const float* up, float* y, int64_t n);

/// In-place numerically stable softmax over n values.
void softmax(float* x, int64_t n);

/// y += x over n values.
void add_inplace(float* y, const float* x, int64_t n);

/// Per-token absmax int8 quantization (BitNet b1.58 / LLM.int8() vector-wise activations):
/// for each row m: s = 127 / max(max_k |x[m,k]|, 1e-5); q[m,k] = clamp(round_half_even(x[m,k] * s), -128, 127);
/// inv_scale[m] = 1 / s (multiply an int32 dot product by it to dequantize).
/// x: [M, K] float32; q: [M, K] int8; inv_scale: [M].
void quantize_rows_absmax_i8(const float* x, int64_t M, int64_t K, int8_t* q, float* inv_scale);

}  // namespace tritium::cpu
