// tritium kernels/cuda: the persistent decode kernel — all decoder layers of a ternary (BitNet-style) model for
// one decode token in a single launch.
//
// Why: at batch 1 a 2B4T layer reads only 17 MB of tc2 weights (4 us of HBM time), but the layered forward runs
// ~9 kernels per layer, and each kernel boundary and each small GEMV's ramp-up costs microseconds of latency
// (bench/CUDA_NOTES.md, versions 4-6). Here one block per SM stays resident for the whole step:
//  - Each block owns a fixed slice of rows of every projection, copied into shared memory by one bulk
//    asynchronous copy (TMA) at the start of the phase that uses it, while the block computes the phase's row
//    prologue.
//  - Per layer five phases separated by grid barriers (one counter, release/acquire at GPU scope):
//    Q  RMSNorm + absmax int8 quantization of x (every block, redundantly, into shared memory), qkv GEMV rows;
//    A  attention work items (head, chunk) with RoPE and the KV write (attention_block.cuh, split-K for long
//       contexts);
//    O  attn_sub_norm + quantization, o GEMV rows, residual add into x;
//    G  post_attention_norm + quantization, gate_up GEMV rows;
//    D  GLU (relu^2 or SiLU) + ffn_sub_norm + quantization, down GEMV rows, residual add into x.
//  - The GEMV runs on the tc2 codes (dp4a, 8 lanes per row) or, for weights in the tcb layout, on the binary
//    tensor cores (tcb_mma.cuh: warps over 16-row tiles, the activation bit planes built in the prologue).
// Status (bench/CUDA_NOTES.md, version 9): exact (bit-identical logits in the tests) but slower than the layered
// kernels on the H200 (~35 us per 2B4T layer against ~30): each phase pays ~1 us of barrier and 2-4 us of
// dependent memory latency in its prologue, and the GEMV runs on one 256-thread block per SM. It is therefore off
// by default (CudaOptions::persistent_decode, TRITIUM_CUDA_PERSISTENT=1); the phase profile
// (TRITIUM_CUDA_PERSISTENT_PROFILE=1) shows where the time goes.
// The float operations are those of norm_quant / glu_norm_quant / ternary_matmul / attention_decode_rope, and the
// integer dot products are exact, so x after the last layer equals the layered forward's (up to the order of the
// double-precision sum of squares, which is rounded to float).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tritium::cuda {

/// One ternary projection: in the tc2 layout (ternary_tc2.h: codes [np, kp / 16] uint32) when negc is null, else in
/// the tcb layout (ternary_tcb.h: bit planes, kp a multiple of 256, negc [np] the -1 weights per row); n real rows,
/// the per-row segment scales of TernaryEpilogue. All projections of a model use the same layout.
struct PersistentProj {
  const uint32_t* w = nullptr;
  const int32_t* negc = nullptr;
  int n = 0, kp = 0;
  int seg_end[3] = {0, 0, 0};
  float seg_scale[3] = {1.f, 1.f, 1.f};
};

/// One decoder layer: norm weights (attn_sub / ffn_sub may be null: no sub-norm) and the four projections
/// (qkv [q_dim + 2 kv_dim, hidden], o [hidden, q_dim], gate_up [2 inter, hidden] = gate rows then up rows,
/// down [hidden, inter]).
struct PersistentLayer {
  const float *in_norm = nullptr, *post_norm = nullptr, *attn_sub = nullptr, *ffn_sub = nullptr;
  PersistentProj qkv, o, gate_up, down;
};

/// Everything one launch needs. Device pointers; metadata as for attention_decode_rope_split with one row.
struct PersistentDecodeArgs {
  const PersistentLayer* layers = nullptr;  ///< device array [num_layers]
  int num_layers = 0, hidden = 0, inter = 0, H = 0, KVH = 0, D = 0;
  float eps = 1e-5f;
  float scale = 1.0f;  ///< attention scale 1 / sqrt(D), as the host computes it for attention_decode_rope
  bool relu2 = true;  ///< relu(g)^2 * u, else silu(g) * u
  float* x = nullptr;     ///< residual stream [hidden] f32: the embedding in, the last layer's output out
  float* qkv = nullptr;   ///< scratch [q_dim + 2 kv_dim]
  float* attn = nullptr;  ///< scratch [H * D]
  float* gu = nullptr;    ///< scratch [2 inter]
  const float *cos_t = nullptr, *sin_t = nullptr;                 ///< RoPE tables [max_pos, D / 2]
  const int32_t *pos = nullptr, *seq = nullptr, *bt = nullptr;   ///< [1], [1], block table [bt_width]
  int bt_width = 0, block_size = 0;
  float* kv_base = nullptr;  ///< KV pools: layer l's K at kv_base + 2 l pool, V at kv_base + (2 l + 1) pool
  int64_t kv_pool = 0;       ///< floats per pool [num_blocks, block_size, KVH * D]
  int nsplit = 1;            ///< attention chunks per head (1..kAttentionMaxSplit)
  float* part = nullptr;     ///< split-K scratch [H * nsplit * (D + 2)] (nsplit > 1)
  int32_t* cnt = nullptr;    ///< split-K counters [H], zero
  uint32_t* flags = nullptr; ///< grid barrier counter [1], zeroed by persistent_decode before the launch
  /// Optional profile (null: off): block 0's clock64() at three points of each phase e = 5 l + k (k = Q, A, O,
  /// G, D): timing[3 e] at its start (after the barrier), timing[3 e + 1] after the row prologue (A: after the
  /// attention items), timing[3 e + 2] after the GEMV; timing[15 num_layers] at the end. [15 num_layers + 1].
  long long* timing = nullptr;
};

/// The launch shape of the persistent kernel for a model, fixed at load time.
struct PersistentDecodePlan {
  int grid = 0;       ///< blocks (one per SM)
  size_t smem = 0;      ///< dynamic shared memory bytes per block, without the block table (added per launch)
  size_t smem_max = 0;  ///< the most dynamic shared memory a block may have
  int rows_per_block[4] = {0, 0, 0, 0};  ///< qkv, o, gate_up, down
  int slot_off[4] = {0, 0, 0, 0};        ///< 16-byte offsets of the weight slots in shared memory
  int neg_off[4] = {0, 0, 0, 0};         ///< tcb: 16-byte offsets of the slots' -1 counts
  int xs_off = 0;                        ///< 16-byte offset of the int8 activations
  int table_off = 0;                     ///< 16-byte offset of the staged block table
  bool tcb = false;                      ///< the weights are in the tcb layout
};

/// Plans the kernel for layers shaped like `l0` (host copy; every layer must have the same shapes) on the current
/// device. Returns false (and says why in `why`) when the model does not fit: head_dim not 64 / 128, a row longer
/// than 8192, the weight slices over the shared memory of one SM, no cooperative launch.
bool plan_persistent_decode(const PersistentLayer& l0, int hidden, int inter, int H, int KVH, int D,
                            PersistentDecodePlan& plan, const char*& why);

/// Zeroes args.flags and launches the kernel (cooperative launch: all blocks resident) on `stream`; capturable
/// in a CUDA graph. Throws tritium::Error on a CUDA error.
void persistent_decode(const PersistentDecodeArgs& args, const PersistentDecodePlan& plan, cudaStream_t stream);

}  // namespace tritium::cuda
