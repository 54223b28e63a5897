#include <immintrin.h>

#include "eval/memory_bandwidth.h"

namespace tritium::detail {

unsigned long long read_lines_avx2(const void* p, size_t n_bytes) {
  const __m256i* q = static_cast<const __m256i*>(p);
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  const size_t n = n_bytes / 32;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a = _mm256_xor_si256(a, _mm256_load_si256(q + i));
    b = _mm256_xor_si256(b, _mm256_load_si256(q + i + 1));
    c = _mm256_xor_si256(c, _mm256_load_si256(q + i + 2));
    d = _mm256_xor_si256(d, _mm256_load_si256(q + i + 3));
    a = _mm256_xor_si256(a, _mm256_load_si256(q + i + 4));
    b = _mm256_xor_si256(b, _mm256_load_si256(q + i + 5));
    c = _mm256_xor_si256(c, _mm256_load_si256(q + i + 6));
    d = _mm256_xor_si256(d, _mm256_load_si256(q + i + 7));
  }
  a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  alignas(32) unsigned long long v[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(v), a);
  return v[0] ^ v[1] ^ v[2] ^ v[3];
}

}  // namespace tritium::detail
