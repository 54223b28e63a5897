// The grouped-query attention rows with AVX-512VL's 32 vector registers (more score and output chains in flight
// per loaded vector than attention_avx2.cpp's 16 allow); the same 256-bit operations, so the same bits.
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_rows.h"

namespace tritium::cpu::detail {

void attention_rows_avx512(int J, const float* const* q, float* const* out, float* scores, int64_t ld,
                           const float* k, const float* v, int64_t n, int64_t kv_stride, int D, float scale) {
  attention_rows_impl::rows_any<32>(J, q, out, scores, ld, k, v, n, kv_stride, D, scale);
}

}  // namespace tritium::cpu::detail
