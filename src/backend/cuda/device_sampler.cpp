// tritium backend/cuda: DeviceSampler (device_sampler.h).
#if TRITIUM_HAVE_CUDA
#include "backend/cuda/device_sampler.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>

#include "core/error.h"
#include "kernels/cuda/kernels.h"

namespace tritium::cuda_detail {

using cuda::check;

static_assert(std::endian::native == std::endian::little, "the allow masks are reinterpreted as 32-bit words");

namespace {
size_t align16(size_t n) { return (n + 15) / 16 * 16; }
}  // namespace

DeviceSampler::~DeviceSampler() {
  if (dev_) cudaFree(dev_);
  if (up_) cudaFreeHost(up_);
  if (down_) cudaFreeHost(down_);
}

void DeviceSampler::run(float* logits, int V, std::span<const RowSampling> rows, cudaStream_t stream,
                        std::vector<SampledToken>& out) {
  params_.clear();
  pen_.clear();
  ban_.clear();
  const size_t words = (static_cast<size_t>(V) + 31) / 32;  // mask words of one row
  size_t masked = 0;
  for (const RowSampling& r : rows) {
    cuda::SampleRowParams p;
    p.active = r.active ? 1 : 0;
    p.uniform = r.uniform;
    p.temperature = r.temperature;
    p.top_k = r.top_k;
    p.top_p = r.top_p;
    p.min_p = r.min_p;
    p.rep = r.repetition_penalty;
    p.presence = r.presence_penalty;
    p.frequency = r.frequency_penalty;
    TRITIUM_CHECK(r.logprobs <= kMaxDeviceTopLogprobs, "device sampling: logprobs {} above {}", r.logprobs,
                  kMaxDeviceTopLogprobs);
    p.logprobs = r.logprobs;
    p.pen_begin = static_cast<int32_t>(pen_.size());
    if (r.active) append_penalty_entries(r, V, pen_);
    p.pen_count = static_cast<int32_t>(pen_.size()) - p.pen_begin;
    p.ban_begin = static_cast<int32_t>(ban_.size());
    if (r.active) {
      for (int32_t t : r.banned) {
        TRITIUM_CHECK(t >= 0 && t < V, "device sampling: banned id {} outside the vocabulary of {}", t, V);
        ban_.push_back(t);
      }
      std::sort(ban_.begin() + p.ban_begin, ban_.end());
      ban_.erase(std::unique(ban_.begin() + p.ban_begin, ban_.end()), ban_.end());
    }
    p.ban_count = static_cast<int32_t>(ban_.size()) - p.ban_begin;
    if (r.active && !r.allowed.empty()) p.allow_begin = static_cast<int32_t>(words * masked++);
    params_.push_back(p);
  }
  const size_t S = rows.size(), P = pen_.size(), B = ban_.size(), A = words * masked;
  if (S == 0) return;
  TRITIUM_CHECK(A <= static_cast<size_t>(INT32_MAX), "device sampling: {} masked rows of {} ids are too many", masked, V);
  const size_t o_pen = align16(S * sizeof(cuda::SampleRowParams));
  const size_t o_ban = o_pen + align16(P * sizeof(cuda::SamplePenalty));
  const size_t o_allow = o_ban + align16(B * sizeof(int32_t));
  const size_t up = o_allow + align16(A * sizeof(uint32_t));
  const size_t o_spen = up;
  const size_t o_sban = o_spen + align16(P * sizeof(float));
  const size_t o_res = o_sban + align16(B * sizeof(float));
  const size_t total = o_res + align16(S * sizeof(cuda::SampleResult));
  const size_t down = S * sizeof(cuda::SampleResult);
  if (total > cap_ || down > down_cap_) {
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (dev_) cudaFree(dev_);
    if (up_) cudaFreeHost(up_);
    if (down_) cudaFreeHost(down_);
    dev_ = up_ = down_ = nullptr;
    cap_ = std::max(total, 2 * cap_);
    down_cap_ = std::max(down, 2 * down_cap_);
    check(cudaMalloc(&dev_, cap_), "cudaMalloc (sampling)");
    check(cudaMallocHost(&up_, cap_), "cudaMallocHost (sampling)");
    check(cudaMallocHost(&down_, down_cap_), "cudaMallocHost (sampling results)");
  }
  auto* hb = static_cast<char*>(up_);
  std::copy(params_.begin(), params_.end(), reinterpret_cast<cuda::SampleRowParams*>(hb));
  auto* hp = reinterpret_cast<cuda::SamplePenalty*>(hb + o_pen);
  for (size_t i = 0; i < P; ++i) hp[i] = {pen_[i].id, pen_[i].seen, pen_[i].count};
  std::copy(ban_.begin(), ban_.end(), reinterpret_cast<int32_t*>(hb + o_ban));
  // Masks: 64-bit words as given (little-endian, so word i / 32 of the 32-bit view holds bit i), zero-padded.
  for (size_t i = 0; i < S; ++i) {
    if (params_[i].allow_begin < 0) continue;
    auto* m = reinterpret_cast<uint32_t*>(hb + o_allow) + params_[i].allow_begin;
    const std::span<const uint64_t> a = rows[i].allowed;
    const size_t n = std::min(words, 2 * a.size());
    std::memcpy(m, a.data(), n * sizeof(uint32_t));
    std::fill(m + n, m + words, 0u);
    if (V % 32) m[words - 1] &= (1u << (V % 32)) - 1;
  }
  auto* db = static_cast<char*>(dev_);
  check(cudaMemcpyAsync(db, hb, up, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync (sampling parameters)");
  cuda::sample_rows(logits, V, static_cast<int>(S), reinterpret_cast<const cuda::SampleRowParams*>(db),
                    reinterpret_cast<const cuda::SamplePenalty*>(db + o_pen),
                    reinterpret_cast<const int32_t*>(db + o_ban),
                    A ? reinterpret_cast<const uint32_t*>(db + o_allow) : nullptr, reinterpret_cast<float*>(db + o_spen),
                    reinterpret_cast<float*>(db + o_sban), reinterpret_cast<cuda::SampleResult*>(db + o_res), stream);
  check(cudaMemcpyAsync(down_, db + o_res, down, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (sampled tokens)");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (sampling)");
  const auto* res = static_cast<const cuda::SampleResult*>(down_);
  out.resize(S);
  for (size_t i = 0; i < S; ++i) {
    SampledToken& t = out[i];
    t = SampledToken{};
    if (!rows[i].active) continue;
    t.id = res[i].id;
    if (rows[i].logprobs < 0) continue;
    t.logprob = res[i].logprob;
    t.rank = res[i].rank;
    const int k = std::min(rows[i].logprobs, V);
    for (int j = 0; j < k; ++j) t.top.emplace_back(res[i].top_id[j], res[i].top_lp[j]);
  }
}

}  // namespace tritium::cuda_detail
#endif
