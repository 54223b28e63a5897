// tritium formats: the GGUF tensor types tritium reads, decoded exactly as upstream dequantizes them.
//
// Float types: F32, F16, BF16 (element-wise), Q8_0 (ggml: blocks of 32 weights, 34 bytes: fp16 d, then 32 int8 q;
// w = q * d). Ternary types (each weight one of {-1, 0, +1} times a scale):
//  - TQ2_0 (llama.cpp gguf-py quants.py / ggml-quants.c dequantize_row_tq2_0): blocks of 256 weights, 66 bytes:
//    64 bytes of 2-bit codes, then fp16 d. Weight 128 c + 32 g + p (c = 0..1, g = 0..3, p = 0..31) is bits 2g..2g+1
//    of byte 32 c + p; w = (code - 1) * d.
//  - TQ1_0 (dequantize_row_tq1_0): blocks of 256 weights, 54 bytes: qs[48], qh[4], fp16 d. A byte holds base-3
//    digits as ceil(v * 256 / 243); digit k (weight 3^(4-k) in v) is ((byte * 3^k) mod 256) * 3 >> 8. Weight
//    32 k + p (k = 0..4, p = 0..31) is digit k of qs[p]; weight 160 + 16 k + p (p = 0..15) digit k of qs[32 + p];
//    weight 240 + 4 k + p (k = 0..3, p = 0..3) digit k of qh[p]; w = (digit - 1) * d.
//  - I2_S (bitnet.cpp ggml-bitnet-mad.cpp quantize_i2_s, x86 ACT_PARALLEL / first-release layout): the tensor
//    flattened row-major in blocks of 128 weights, 32 bytes each; weight 128 b + 32 g + p (g = 0..3, p = 0..31) is
//    bits (7 - 2g, 6 - 2g) of byte 32 b + p; codes 0, 1, 2 = -1, 0, +1. After the numel / 4 code bytes: one
//    float32 scale for the whole tensor (then 28 bytes of padding); w = (code - 1) * scale.
//  - Q2_0 (type 42; ggml-quants.c dequantize_row_q2_0, and PrismML's group-128 variant): blocks of `block` = 64
//    (18 bytes) or 128 (34 bytes) weights: fp16 d first, then block / 4 bytes of 2-bit codes; weight j of a block is
//    bits 2 (j % 4) .. 2 (j % 4) + 1 of code byte j / 4; w = (code - 1) * d. io/gguf.h says how a tensor's layout is
//    decided (GgufTensorInfo::block).
// The upstream decoders give code 3 (TQ2_0, I2_S, Q2_0) the value +2; that is kept by the float decode and is an error
// for the ternary decode (no ternary format holds it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace tritium {

inline constexpr int64_t kQ8_0Block = 32;
inline constexpr int64_t kTQBlock = 256;
inline constexpr int64_t kI2sBlock = 128;

/// Q8_0: n weights (a multiple of 32) from n / 32 blocks at src.
void dequantize_q8_0(const uint8_t* src, int64_t n, float* dst);
/// TQ2_0 / TQ1_0: n weights (a multiple of 256) as code - 1 (in {-1, 0, 1}, and 2 for TQ2_0's code 3) and the
/// block scales d (n / 256 of them, fp16 widened to float).
void decode_tq2_0(const uint8_t* src, int64_t n, int8_t* values, float* scales);
void decode_tq1_0(const uint8_t* src, int64_t n, int8_t* values, float* scales);
/// Q2_0: n weights (a multiple of block, 64 or 128) as code - 1 (in {-1, 0, 1, 2}) and the block scales d.
void decode_q2_0(const uint8_t* src, int64_t n, int64_t block, int8_t* values, float* scales);
/// Q2_0: n weights as float32, (code - 1) * d, as dequantize_row_q2_0 computes them.
void dequantize_q2_0(const uint8_t* src, int64_t n, int64_t block, float* dst);
/// Q2_0 block bytes (fp16 d, then block / 4 bytes of 2-bit codes, weight j at bits 2 (j % 4)
/// of byte j / 4) for ternary values q in {-1, 0, 1} [n] (n a multiple of block) with one fp16 scale (bit
/// pattern) per block.
void encode_q2_0(const int8_t* q, const uint16_t* d_f16, int64_t n, int64_t block, uint8_t* dst);

/// I2_S: n weights (a multiple of 128) as code - 1 (in {-1, 0, 1, 2}); returns the tensor scale (read from byte n / 4).
float decode_i2_s(const uint8_t* src, int64_t n, int8_t* values);

/// Whether ggml type `type` is one of the ternary types above.
bool gguf_type_is_ternary(uint32_t type);
/// Whether tritium decodes ggml type `type` (the float and ternary types above).
bool gguf_type_is_supported(uint32_t type);
/// "F32, F16, BF16, Q8_0, TQ1_0, TQ2_0, I2_S, Q2_0".
std::string gguf_supported_type_names();

/// A tensor's values in float32, flattened in GGUF order (ne[0] fastest), exactly as upstream dequantizes them.
/// Throws tritium::Error naming the file and tensor for a type tritium does not decode.
std::vector<float> gguf_tensor_to_f32(const GgufTensorInfo& t, const std::string& file);

/// A ternary tensor's values in {-1, 0, 1} (flattened in GGUF order) and its scales: one per `block` weights
/// (TQ: block = 256, d per block; Q2_0: block = 64 or 128; a block with d = 0 decodes to zeros, which is what it
/// multiplies to; I2_S: block = numel, the tensor scale). W = values * scales[i / block] exactly.
struct GgufTernary {
  std::vector<int8_t> values;
  std::vector<float> scales;
  int64_t block = 0;
};
/// Decodes TQ1_0, TQ2_0, Q2_0 or I2_S. Throws tritium::Error naming the file and tensor for another type, a value
/// outside {-1, 0, 1} (code 3), a non-finite scale, or an I2_S tensor whose size is not a multiple of 128.
GgufTernary gguf_tensor_to_ternary(const GgufTensorInfo& t, const std::string& file);

}  // namespace tritium
