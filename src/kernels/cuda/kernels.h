// tritium kernels/cuda: host wrappers of the CUDA kernels (device pointers in, launches on `stream`).
//
// Only code built with TRITIUM_HAVE_CUDA includes this header. Every wrapper checks its launch and throws
// tritium::Error (through cuda_fail) on a CUDA error; none synchronizes.
//
// Ternary weights on the GPU use one of two layouts (docs/formats.md, "GPU weight layouts (tc2, tcb)"), 2 bits per
// weight each. tc2 (pack_tc2 in formats/ternary_tc2.h): codes c = w + 1 in {0, 1, 2}; ternary_matmul multiplies the
// codes with int8 activations (dp4a or int8 tensor-core MMA, int32 accumulation) and subtracts the row sum of the
// activations: sum_k w_k x_k = sum_k c_k x_k - sum_k x_k. tcb (pack_tcb in formats/ternary_tcb.h): bit planes of
// the +1 and -1 weights for the binary tensor-core MMA of tcb_matmul. Integer results are exact, so they equal the
// CPU ternary kernels bit for bit; the dequantization epilogue y = (float(acc) * inv_scale[m]) * segment_scale[n]
// uses the CPU's float operation order, so y is bit-exact too.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace tritium::cuda {

/// Throws tritium::Error "CUDA error in <what>: <cudaGetErrorString(err)>" when err != cudaSuccess.
void check(cudaError_t err, const char* what);
/// check(cudaGetLastError(), what) after a launch.
void check_launch(const char* what);

/// Programmatic dependent launch (sm_90, see launch.cuh): when on (the default), the kernels below launched on a
/// non-null stream may start while the previous kernel of the stream is finishing (prologue and weight loads
/// overlap it; results are unchanged). Process-wide; set it before capturing graphs.
void set_dependent_launch(bool on);
bool dependent_launch();
/// Makes sure this binary carries GPU code for `device`: throws tritium::Error with one line naming the device's
/// compute capability, the architectures built in (CMAKE_CUDA_ARCHITECTURES) and the configure flag that adds it,
/// when the device is older than sm_80 (the kernels need cp.async and int8 mma.sync) or no kernel image or PTX in
/// the binary loads on it.
void require_kernel_image(int device);
/// The CUDA architectures this binary was built for, as CMake was given them, space-separated ("80-real 86-real ...").
const char* built_architectures();
/// cudaFuncGetAttributes of an empty kernel on the current device: cudaErrorNoKernelImageForDevice (or an invalid
/// PTX error) when no code in the binary loads there, else cudaSuccess.
cudaError_t probe_kernel_image();

/// Multiprocessors of the current device, asked once per device (132, an H100 / H200's, when it cannot be read).
int sm_count();

/// Per-row dequantization of a ternary projection's int32 results and where they go.
/// Rows [0, seg_end[0]) use seg_scale[0], [seg_end[0], seg_end[1]) seg_scale[1], ... (up to 3 segments; unused
/// segments repeat the last end). y[m * ldy + n] = val (add = false) or y[m * ldy + n] += val (add = true,
/// the residual connection).
struct TernaryEpilogue {
  float* y = nullptr;
  int64_t ldy = 0;
  bool add = false;
  int seg_end[3] = {0, 0, 0};
  float seg_scale[3] = {1.f, 1.f, 1.f};
};

/// The kernels of ternary_matmul.
enum class TernaryKernel {
  kAuto,      ///< dp4a GEMV at M = 1, int8 MMA GEMV for 2 <= M <= 16, the tiled GEMM above (kMmaGemm before sm_90)
  kDp4aGemv,  ///< dp4a GEMV (M <= 16): lanes_or_warps lanes of a warp per weight row
  kMmaGemm,   ///< int8 tensor-core GEMM (any M), 64 x 64 tiles: the GEMM of devices without clusters (before sm_90)
  kMmaGemv,   ///< int8 tensor-core GEMV (M <= 16): 16 weight rows per block of lanes_or_warps warps, the tokens in
              ///< the MMA's N columns
  kTiledGemm,  ///< int8 tensor-core GEMM (any M; sm_90), 128 weight rows x 64 tokens per block, cp.async pipeline,
               ///< K split over a cluster of lanes_or_warps blocks (1, 2, 4, 8; 0 = automatic) (ternary_gemm.cu)
};

/// Ternary GEMV/GEMM over tc2 weights [np, kp/16] uint32 (n real rows) with int8 activations xq [M, kp]
/// (zero-padded past k), their row sums sumq [M] and dequantization multipliers inv_s [M], by `kernel`.
/// lanes_or_warps, the shape of the GEMV that runs (0 = automatic; ignored by the GEMM): for the dp4a GEMV the
/// lanes of a warp per weight row, 8, 16 or 32 (32: 256-thread blocks); for the MMA GEMV the warps per 16-row
/// block, 4 or 8. weights_from_stream: w was written by a kernel on `stream` (tcb_to_tc2); the launch then waits
/// for it without programmatic dependent launch, since the GEMVs read their weights before waiting for the
/// previous kernel (launch.cuh). Throws tritium::Error on bad arguments.
void ternary_matmul(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq,
                    const float* inv_s, int M, const TernaryEpilogue& ep, cudaStream_t stream,
                    TernaryKernel kernel = TernaryKernel::kAuto, int lanes_or_warps = 0,
                    bool weights_from_stream = false);

/// The epilogue of ternary_matmul applied to exact sums computed elsewhere (the int8 copy of a ternary projection
/// through cuBLASLt's int8 GEMM): acc int32 [rows, ldacc] (acc[m, r] = sum_k w[r, k] x[m, k]), inv_s [rows];
/// y[m, r] (+)= (float(acc[m, r]) * inv_s[m]) * scale of r's segment, the same float operations as the ternary
/// kernels, so the same bits. parts > 1: the GEMM split K, acc holds `parts` partial sums [rows, ldacc],
/// part_stride int32 apart (a multiple of 4), added in part order before the epilogue (integers: exact in any
/// order). Throws tritium::Error on bad arguments.
void ternary_epilogue(const int32_t* acc, int64_t ldacc, int rows, int n, const float* inv_s,
                      const TernaryEpilogue& ep, cudaStream_t stream, int parts = 1, int64_t part_stride = 0);

/// True when the current device can run TernaryKernel::kTiledGemm (thread-block clusters: sm_90 or newer).
bool tiled_gemm_supported();
/// Blocks of the K split (a thread-block cluster) the tiled GEMM picks for np weight rows, M tokens and kp: 1, 2, 4
/// or 8, the fewest that give every SM of the current device a block while each keeps at least 4 stages of 128 k.
int tiled_gemm_split_for(int np, int M, int kp);

/// Ternary GEMV/GEMM with per-row, per-group-of-128-along-K weight scales (Ternary Bonsai; the CPU's
/// ternary_gemm_f32 in kernels/cpu/ternary_kernels.h) over tc2 weights w [np, kp / 16] uint32 (n real rows, k real
/// columns), int8 activations xq [M, kp] (zero past k) with dequantization multipliers inv_s [M], group scales
/// float [n, ceil(k / 128)] row-major and an optional bias float [n]:
///   v = inv_s[m] * sum_g group_scales[r, g] * float(sum_{k in group g} w[r, k] * xq[m, k])  (+ bias[r]),
/// the float sum in increasing g from 0.0f with a multiplication then an addition per group (no FMA), so v equals
/// the CPU's bit for bit; stored to ep.y[m * ep.ldy + r] or added to it (ep.add; ep's segment scales unused). Any
/// M >= 1: by dp4a (up to 8 tokens; tile_a = 1 or 2 groups per lane and round, tile_b = 0) or on the int8 tensor
/// cores (mma.sync, sm_80+; a warp taking tile_a x 16 tokens (1 or 2) of tile_b x 8 rows (1, 2 or 4)); 0, 0 =
/// chosen from the shape and the SM count (the benchmark and the tests set them). Every token tile reads the weights (from L2 after the
/// first). The same floats for a token whatever M and the tiles are (batch invariance).
/// Throws tritium::Error on null buffers, a padded shape that does not fit [n, k] or other tiles.
void ternary_grouped_matmul(const uint32_t* w, const float* group_scales, const float* bias, int n, int np, int k,
                            int kp, const int8_t* xq, const float* inv_s, int M, const TernaryEpilogue& ep,
                            cudaStream_t stream, int tile_a = 0, int tile_b = 0);

/// Integer-only variant for tests: acc[m * n + r] = sum_k w[r, k] * x[m, k] (exact int32), same kernels.
void ternary_matmul_i32(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq, int M,
                        int32_t* acc, cudaStream_t stream, TernaryKernel kernel = TernaryKernel::kAuto,
                        int lanes_or_warps = 0, bool weights_from_stream = false);

/// True when the device can run tcb_matmul (binary tensor-core MMA: sm_80 or newer).
bool tcb_supported();

/// Ternary GEMV/GEMM over tcb weights (formats/ternary_tcb.h: bit planes [np / 16][kp / 256][2][32][4] uint32 and
/// neg_count [np] int32, n real rows) with the activations' bit planes xb [M, kp / 4] uint32 (tcb_planes, or
/// norm_quant's planes output) and dequantization multipliers inv_s [M]; same epilogue and the same exact int32
/// sums as ternary_matmul (so the same y bits). One warp per 16-row tile and chunk range (ksplit warps per tile:
/// 0 = automatic, else 1..4), binary MMA m16n8k256 with the 8 activation bit planes as the N columns, up to 16
/// tokens per block (more: grid.y). Throws tritium::Error on bad arguments (kp not a positive multiple of 256)
/// or on a device below sm_80.
void tcb_matmul(const uint32_t* w, const int32_t* neg_count, int n, int kp, const uint32_t* xb, const float* inv_s,
                int M, const TernaryEpilogue& ep, cudaStream_t stream, int ksplit = 0);

/// Integer-only variant for tests: acc[m * n + r] = sum_k w[r, k] * x[m, k] (exact int32), same kernel.
void tcb_matmul_i32(const uint32_t* w, const int32_t* neg_count, int n, int kp, const uint32_t* xb, int M,
                    int32_t* acc, cudaStream_t stream, int ksplit = 0);

/// Rewrites tcb weights (n rows, kp) as tc2 words [np2, kp / 16] (np2 >= n, a multiple of 64; rows past n weight
/// 0): the path of rows of more than one token over tcb weights, where the int8 tensor-core kernels over tc2 beat
/// the tcb kernel (pass weights_from_stream to the ternary_matmul that reads `out`). Throws tritium::Error on bad
/// shapes.
void tcb_to_tc2(const uint32_t* w, int n, int kp, uint32_t* out, int np2, cudaStream_t stream);

/// The tcb activation bit planes of int8 rows q [rows, kp] (kp a multiple of 256): xb [rows, kp / 4] uint32, as
/// pack_tcb_activations in formats/ternary_tcb.h.
void tcb_planes(const int8_t* q, int rows, int kp, uint32_t* xb, cudaStream_t stream);

/// Ternary GEMV over the GPU BITCOS layout (pack_bitcos_gpu in ternary_bitcos_gpu.h: masks [n, kp / 32],
/// row_offsets [n + 1], signs, all uint32 device buffers) with int8 activations xq [M, kp] (zero-padded past k,
/// the same buffer as for ternary_matmul), 1 <= M <= 8 tokens, dequantization multipliers inv_s [M] and the
/// same epilogue as ternary_matmul: the int32 sums are exact, so y equals ternary_matmul's bit for bit.
/// One warp per weight row (dp4a on weights expanded from the bitmap and the compacted signs); no row-sum
/// input is needed. Throws tritium::Error on bad arguments (kp not a positive multiple of 64, M outside 1..8).
void ternary_bitcos_gemv(const uint32_t* masks, const uint32_t* row_offsets, const uint32_t* signs, int n, int kp,
                         const int8_t* xq, const float* inv_s, int M, const TernaryEpilogue& ep,
                         cudaStream_t stream);

/// Integer-only variant for tests: acc[m * n + r] = sum_k w[r, k] * x[m, k] (exact int32), same kernel.
void ternary_bitcos_gemv_i32(const uint32_t* masks, const uint32_t* row_offsets, const uint32_t* signs, int n,
                             int kp, const int8_t* xq, int M, int32_t* acc, cudaStream_t stream);

/// Optional RMSNorm (weight != nullptr) then per-token absmax int8 quantization of rows of x [*, D] (stride ldx).
/// Row r of the output reads input row (row_map ? row_map[r] : r). RMSNorm as kernels/cpu rms_norm (sum of
/// squares in double, y = weight * (x * inv)); quantization as quantize_rows_absmax_i8 (s = 127 / max(amax,
/// 1e-5), round half to even, clamp [-128, 127]). Writes any of: y [rows, D] float (stride D), q [rows, kp]
/// (zeros past D), inv_s [rows] = 1 / s, sumq [rows] = sum of q. weight == nullptr: no normalization.
/// planes (optional, needs q and kp % 256 == 0): also the tcb bit planes of q [rows, kp / 4] uint32 (tcb_planes).
void norm_quant(const float* x, int64_t ldx, const int32_t* row_map, const float* weight, int rows, int D,
                float eps, float* y, int8_t* q, int kp, float* inv_s, int32_t* sumq, cudaStream_t stream,
                uint32_t* planes = nullptr);

/// The down projection's input in one kernel: act = glu(gu) as glu() below, then norm_quant(act, weight) (weight
/// may be null: quantization only), with the same float operations as glu() followed by norm_quant(), so the same
/// q / inv_s / sumq. act [rows, I] is scratch: written only when the shape does not fit the one-kernel path
/// (I % 4 != 0, I > 8192, misaligned pointers), which then runs the two kernels.
/// planes: as norm_quant.
void glu_norm_quant(const float* gu, int rows, int I, bool relu2, const float* weight, float eps, float* act,
                    int8_t* q, int kp, float* inv_s, int32_t* sumq, cudaStream_t stream, uint32_t* planes = nullptr);

/// Most parts of a K-split int8 GEMM that residual_norm_quant adds (row_ops.cuh SumsRowParts::kMaxParts).
constexpr int kMaxSumParts = 4;

/// The exact sums of a ternary projection computed by the int8 GEMM, whose epilogue (ternary_epilogue) the next
/// row kernel applies while it loads its row, instead of a kernel of its own: value(m, c) = (float(acc[m, c]) *
/// inv_s[m]) * scale of c's segment (ep.seg_end / ep.seg_scale). ep.y / ep.ldy / ep.add: where ternary_epilogue
/// would have written (the residual stream for o and down, add = true; gate_up's output, add = false). inv_s may
/// be the buffer the row kernel writes its own multipliers to: each row's value is read before it is replaced.
struct PendingSums {
  const int32_t* acc = nullptr;  ///< [rows, ldacc]
  int64_t ldacc = 0;
  const float* inv_s = nullptr;  ///< [rows]
  TernaryEpilogue ep;
  /// The GEMM split K into `parts` partial sums [rows, ldacc], part_stride int32 apart (a multiple of 4, so the
  /// int4 loads stay aligned); the readers add them (exact integers: the bits do not depend on the split).
  /// residual_norm_quant reads up to kMaxSumParts in one kernel; glu_norm_quant_sums runs its two kernels for more
  /// than one; attention_decode_gqa takes one.
  int parts = 1;
  int64_t part_stride = 0;
};

/// A residual projection's pending sums (in 1 .. kMaxSumParts parts) added to the residual stream, then norm_quant
/// of the new rows: x = p.ep.y [rows, D] (stride p.ep.ldy, p.ep.add must be true) += value(m, 0..D), then
/// norm_quant(x, weight) into q / inv_s / sumq (/ planes). The same float operations as ternary_epilogue followed by
/// norm_quant, so the same bits.
void residual_norm_quant(const PendingSums& p, int rows, int D, const float* weight, float eps, int8_t* q, int kp,
                         float* inv_s, int32_t* sumq, cudaStream_t stream, uint32_t* planes = nullptr);

/// glu_norm_quant of gate_up's pending sums (gate = value(m, 0..I), up = value(m, I..2I)) without writing them:
/// the same bits as ternary_epilogue into p.ep.y (which must be the [rows, 2 I] gate_up output) followed by
/// glu_norm_quant. act: scratch as in glu_norm_quant.
void glu_norm_quant_sums(const PendingSums& p, int rows, int I, bool relu2, const float* weight, float eps,
                         float* act, int8_t* q, int kp, float* inv_s, int32_t* sumq, cudaStream_t stream,
                         uint32_t* planes = nullptr);

/// Same as norm_quant but also writes y as bf16 (for the bf16 lm_head); y_bf16 [rows, D].
void norm_to_bf16(const float* x, int64_t ldx, const int32_t* row_map, const float* weight, int rows, int D,
                  float eps, float* y, void* y_bf16, cudaStream_t stream);

/// x[r, :] = table[tokens[r], :] for r < rows; table float [vocab, D].
void embedding(const float* table, const int32_t* tokens, int rows, int D, float* x, cudaStream_t stream);

/// A token embedding table on the device in the dtype the model stores it (model/embedding.h): bf16 bit patterns
/// [vocab, D], widened exactly, or GGUF Q2_0 rows of D / block blocks of block_bytes (fp16 d, then 2-bit codes c,
/// weight j of a block at bits 2 (j % 4) of byte j / 4; value float(c - 1) * d: formats/gguf_quants.h,
/// dequantize_q2_0), block 64 (18 bytes) or 128 (34 bytes).
struct StoredEmbedding {
  enum Dtype { kBF16, kQ2_0 } dtype = kBF16;
  const void* data = nullptr;
  int block = 0, block_bytes = 0;  ///< Q2_0 only
};
/// x[r, :] = the row tokens[r] of t, as float32 (the CPU's Embedding::row bit for bit), for r < rows.
void embedding(const StoredEmbedding& t, const int32_t* tokens, int rows, int D, float* x, cudaStream_t stream);

/// Vocabulary-parallel lookup: table holds rows [vbegin, vend) of the embedding ([vend - vbegin, D] float);
/// x[r, :] = table[tokens[r] - vbegin, :] when the token falls in the slice, else zeros (the ranks' results are
/// then summed by an all-reduce: exactly one rank contributes a nonzero row).
void embedding_vocab_slice(const float* table, int vbegin, int vend, const int32_t* tokens, int rows, int D, float* x,
                           cudaStream_t stream);

/// Element type of the paged KV pools below: float32; bf16 (rounded to nearest even when written, read back as
/// float); fp8 e4m3 with a per-tensor scale (KvFormat::scale: stored = e4m3(x / scale), read as float(stored) *
/// scale, as vLLM's fp8 KV cache and the CPU cache of kv/kv_cache.h). Every kernel, the fused decode ones too,
/// attends the rounded values, so results do not depend on which kernel wrote a position.
enum class KvElem { kF32, kBF16, kFP8 };

/// The pools' element type and the fp8 scale (ignored by f32 and bf16).
struct KvFormat {
  KvElem elem = KvElem::kF32;
  float scale = 1.0f;
  KvFormat() = default;
  KvFormat(KvElem e, float s = 1.0f) : elem(e), scale(s) {}  // NOLINT(google-explicit-constructor): KvElem converts
};

/// Per-head RMSNorm in place (Qwen3's q_norm / k_norm, before RoPE): in each of `rows` rows of x (row stride
/// `stride` floats), the `heads` vectors of D floats that start at the row are normalized with weight [D] as
/// kernels/cpu head_rms_norm does (sum of squares in double, y = weight * (x * inv)); the `heads2` vectors that
/// follow them (the k heads after the q heads) with weight2 [D], in the same launch. Throws tritium::Error on
/// negative head counts or heads2 > 0 without weight2.
void head_rms_norm(float* x, int rows, int64_t stride, int heads, int D, const float* weight, float eps,
                   cudaStream_t stream, int heads2 = 0, const float* weight2 = nullptr);

/// Metadata arrays (row_map, pos, seq, block_tables) and the cos/sin tables may be read before the
/// programmatic-dependent-launch wait (launch.cuh): they must not be written by a kernel on the same stream (the
/// backend copies them from the host before the forward).
/// Applies RoPE (HF rotate_half, cos/sin from tables [max_pos, head_dim/2] at pos[r]) in place to the q and k
/// heads of qkv rows [rows, q_dim + 2 kv_dim] and writes each row's k and v into the paged KV pools (elements
/// `kv`) of one layer ([num_blocks, block_size, kv_dim]) at the slot of pos[r] in block table
/// block_tables[seq[r] * bt_width ...].
void rope_kv_write(float* qkv, int rows, int H, int KVH, int D, const float* cos_t, const float* sin_t,
                   const int32_t* pos, const int32_t* seq, const int32_t* block_tables, int bt_width,
                   int block_size, void* k_pool, void* v_pool, cudaStream_t stream, KvFormat kv = {});

/// Causal GQA attention of each row over its sequence's paged KV cache, positions 0..pos[r]:
/// q rows with stride ldq (head h at h * D), out [rows, H * D]. Online softmax (flash-decoding style),
/// float32. D must be a multiple of 32 and at most 256.
void attention_paged(const float* q, int64_t ldq, int rows, int H, int KVH, int D, const int32_t* pos,
                     const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                     const void* k_pool, const void* v_pool, float* out, cudaStream_t stream,
                     KvFormat kv = {});

/// Decode rows only (each row the single new token of its own sequence, at position pos[r]): rope_kv_write
/// followed by attention_paged in one kernel. qkv rows [rows, q_dim + 2 kv_dim] with stride ldq are read and
/// left unrotated; the rotated k and the v of position pos[r] go into the pools as rope_kv_write writes them;
/// out as attention_paged (the new position is added to the softmax last, so sums may differ in rounding).
void attention_decode_rope(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                           const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                           int bt_width, int block_size, void* k_pool, void* v_pool, float* out,
                           cudaStream_t stream, KvFormat kv = {});

/// Most chunks per (row, head) of the split-K (flash-decoding) attention below.
inline constexpr int kAttentionMaxSplit = 16;

/// Chunks per (row, head) for the split-K attention of `rows` rows x H heads on the current device: enough
/// blocks for about two per SM, in [1, kAttentionMaxSplit] (1 = no split: use the plain kernels).
int attention_split_count(int rows, int H);

/// Split-K (flash-decoding) variants of attention_paged / attention_decode_rope for long contexts: the
/// positions 0..pos[r] of each (row, head) are cut into at most nsplit chunks of a multiple of 64 positions
/// (chunk = ceil((pos[r] + 1) / nsplit) rounded up to 64), each chunk run by its own block; the last block to
/// finish merges the partial softmax states. Same results as the unsplit kernels up to float rounding of the
/// merge (a few ulp). The grid is (rows, H, nsplit) whatever the positions, so a launch can be captured in a
/// CUDA graph and replayed at any position. Scratch (device, preallocated by the caller):
/// partial [rows * H * nsplit * (D + 2)] floats; counters [rows * H] int32, zero before the first call and
/// left zero by every completed call. nsplit in [1, kAttentionMaxSplit]; nsplit == 1 runs the unsplit kernel
/// (scratch may then be null). Throws tritium::Error on bad arguments.
void attention_paged_split(const float* q, int64_t ldq, int rows, int H, int KVH, int D, const int32_t* pos,
                           const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                           const void* k_pool, const void* v_pool, float* out, int nsplit, float* partial,
                           int32_t* counters, cudaStream_t stream, KvFormat kv = {});
void attention_decode_rope_split(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                                 const float* sin_t, const int32_t* pos, const int32_t* seq,
                                 const int32_t* block_tables, int bt_width, int block_size, void* k_pool,
                                 void* v_pool, float* out, int nsplit, float* partial, int32_t* counters,
                                 cudaStream_t stream, KvFormat kv = {});

/// Decode attention with the G = H / KVH query heads of a KV head in one block, split over positions by the context
/// alone: row r's positions 0..pos[r] are cut into attention_gqa_chunks(pos[r] + 1) chunks whatever the batch, so a
/// row's result does not depend on its batch mates. bf16 pools (attention_decode_tc.cu): each warp holds every query
/// head of its KV head on the tensor cores, scores and weighted sums on mma.sync bf16 with q and the softmax weights
/// carried as two bf16 parts each (within ~1e-5 of float arithmetic on the pool's values), chunks and warps per block
/// chosen by its own rule (a block folds its chunks itself; a few rows get a warp per chunk so that they attend their
/// chunks at once). warps_per_block (bf16 only): 1, one warp attends the block's chunks one after another; W in 2..4,
/// the block's W chunks at once, one per warp (chunks_per_block must then be W or 0); 0, automatic (1 when
/// chunks_per_block is given). f32 / fp8 pools (attention_decode.cu): one warp per query head on the CUDA cores, the
/// chunk's K / V rows copied to shared memory once per block, not once per head. heads_per_block (f32 / fp8): G, or 1
/// (a block per query head: more blocks for a few rows, the same bits), or 0 (automatic: 1 while rows x KVH is below
/// the SM count). chunks_per_block: consecutive chunks of a row one block attends (1..kAttentionMaxSplit; 0: the
/// kernel's rule, attention_gqa_chunks_per_block for f32 / fp8); a block that holds all of a row's chunks merges them
/// itself, so many rows run as fewer, longer blocks. None of these choices changes a bit: each chunk's arithmetic and
/// the merge in chunk order are the same whichever block runs them. Grid (rows, H / heads_per_block, ceil(nsplit /
/// chunks_per_block)): nsplit must be at least the largest attention_gqa_chunks of the rows (blocks past a row's chunks
/// return at once); with nsplit > 1 the scratch of attention_paged_split (partial [rows * H * kAttentionMaxSplit * (D +
/// 2)], counters [rows * H], zero before and left zero) holds the chunks' states. Needs attention_gqa_supported; throws
/// tritium::Error otherwise.
bool attention_gqa_supported(int H, int KVH, int D);  ///< H / KVH an integer in 1..8, D 64 or 128
int attention_gqa_chunks(int64_t n);                  ///< chunks of a context of n positions (1..kAttentionMaxSplit)
/// The automatic chunks per block of the f32 / fp8 kernel: the largest power of two <= nsplit that keeps rows x
/// warps_per_chunk (the query heads H) x ceil(nsplit / chunks) at least 4 warps per SM and a block at most ~256
/// positions.
int attention_gqa_chunks_per_block(int rows, int warps_per_chunk, int nsplit);
/// The fused decode step (as attention_decode_rope: RoPE of q and k at pos[r], the new k / v written to the pools,
/// rows [rows, q_dim + 2 kv_dim] left as they are). qkv_sums (optional): q, k and v come from the qkv
/// projection's pending int8-GEMM sums through its epilogue (PendingSums; acc 16-byte aligned, ldacc a multiple of
/// 4) instead of from qkv, which is then not read: the bits of ternary_epilogue into qkv followed by this kernel.
void attention_decode_gqa(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                          const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                          int bt_width, int block_size, void* k_pool, void* v_pool, float* out, int nsplit,
                          float* partial, int32_t* counters, cudaStream_t stream, KvFormat kv = {},
                          int heads_per_block = 0, int chunks_per_block = 0, const PendingSums* qkv_sums = nullptr,
                          int warps_per_block = 0);
/// The same attention after rope_kv_write (q rotated, the new position in the pools) for the rows listed in row_list
/// [rows] (nullptr: rows 0..rows-1): the bits of attention_decode_gqa. out row r is written for each listed r.
void attention_gqa(const float* q, int64_t ldq, const int32_t* row_list, int rows, int H, int KVH, int D,
                   const int32_t* pos, const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                   const void* k_pool, const void* v_pool, float* out, int nsplit, float* partial, int32_t* counters,
                   cudaStream_t stream, KvFormat kv = {}, int heads_per_block = 0, int chunks_per_block = 0,
                   int warps_per_block = 0);

/// Query rows per tile of attention_prefill: 64 / (H / KVH) (the tile's rows x the KV head's query heads are
/// the block's 64 query vectors); 0 when H / KVH is not an integer in 1..64.
int attention_prefill_tile_rows(int H, int KVH);

/// Host helper: cuts rows [0, rows) into tiles for attention_prefill, runs of consecutive rows of one sequence
/// (seq equal) with consecutive positions (pos[r + 1] == pos[r] + 1), at most tile_rows each; tiles gets
/// (first row, row count) pairs. pos / seq are host arrays. Throws tritium::Error when tile_rows <= 0.
void attention_prefill_tiles(const int32_t* pos, const int32_t* seq, int rows, int tile_rows,
                             std::vector<int32_t>& tiles);

/// Flash-attention-style causal GQA attention for prefill chunks, float32: same semantics as attention_paged
/// (scale 1/sqrt(D), row r attends positions 0..pos[r] of sequence seq[r] through the paged pools, which must
/// already hold them) for the rows covered by tiles (device [ntiles, 2] int32 from attention_prefill_tiles,
/// with tile_rows = attention_prefill_tile_rows(H, KVH)); K/V tiles of 32 positions are shared in shared memory
/// by all query rows and query heads of a tile. D 64 or 128. Throws tritium::Error on bad arguments.
void attention_prefill(const float* q, int64_t ldq, int H, int KVH, int D, const int32_t* pos, const int32_t* seq,
                       const int32_t* block_tables, int bt_width, int block_size, const void* k_pool,
                       const void* v_pool, float* out, const int32_t* tiles, int ntiles, cudaStream_t stream,
                       KvFormat kv = {});

/// act[m, i] = relu(g)^2 * u (relu2 = true) or silu(g) * u, g = gu[m, i], u = gu[m, I + i]; gu [rows, 2 I].
void glu(const float* gu, int rows, int I, bool relu2, float* act, cudaStream_t stream);

/// y[m, n] (+)= t[m, n] + bias[n] (bias may be null): the epilogue of a float projection computed by cuBLAS.
void bias_add(const float* t, const float* bias, int rows, int n, float* y, bool add, cudaStream_t stream);

/// Copies bytes (a multiple of 16) with a grid-stride kernel of 16-byte loads and stores (the bandwidth probe:
/// a graph memcpy node runs on the copy engines, which measured 2.77 TB/s on the H200, below what kernels reach).
void copy_bytes(const void* src, void* dst, size_t bytes, cudaStream_t stream);

/// The int8 tensor-core probe: `blocks` blocks of `warps` warps (1-32), each warp issuing iters x 8 mma.sync
/// m16n8k32 s8 (4,096 multiply-adds each) on register operands, 8 independent accumulators; sink [blocks] int32
/// receives one sum per block. Timed by `cuda-bench --kernels` as the MMA ceiling of the GEMM rows.
void mma_s8_probe(int blocks, int warps, int iters, int32_t* sink, cudaStream_t stream);

/// Converts n floats to bf16 (round to nearest even).
void to_bf16(const float* x, int64_t n, void* out, cudaStream_t stream);

}  // namespace tritium::cuda
