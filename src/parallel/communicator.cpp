#include "parallel/communicator.h"

#include <algorithm>
#include <barrier>
#include <cstring>

#include "core/error.h"

namespace tritium {
namespace {

struct LocalState {
  explicit LocalState(int w) : world(w), sync(w), send(static_cast<size_t>(w), nullptr) {}
  int world;
  std::barrier<> sync;
  std::vector<const float*> send;
};

class LocalComm final : public Communicator {
 public:
  LocalComm(std::shared_ptr<LocalState> s, int rank) : s_(std::move(s)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return s_->world; }
  void all_reduce_sum(float* data, int64_t n) override {
    s_->send[rank_] = data;
    s_->sync.arrive_and_wait();
    tmp_.assign(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < s_->world; ++r) {
      const float* p = s_->send[r];
      if (r == 0) std::memcpy(tmp_.data(), p, sizeof(float) * n);
      else
        for (int64_t i = 0; i < n; ++i) tmp_[i] += p[i];
    }
    s_->sync.arrive_and_wait();  // everyone has read every buffer
    std::memcpy(data, tmp_.data(), sizeof(float) * n);
  }
  void all_gather(const float* send, int64_t n, float* recv) override {
    s_->send[rank_] = send;
    s_->sync.arrive_and_wait();
    for (int r = 0; r < s_->world; ++r) std::memcpy(recv + r * n, s_->send[r], sizeof(float) * n);
    s_->sync.arrive_and_wait();  // senders may reuse their buffers only after every copy
  }

 private:
  std::shared_ptr<LocalState> s_;
  int rank_;
  std::vector<float> tmp_;
};

}  // namespace

std::vector<std::shared_ptr<Communicator>> make_local_group(int world) {
  TRITIUM_CHECK(world >= 1, "make_local_group: world {} < 1", world);
  auto s = std::make_shared<LocalState>(world);
  std::vector<std::shared_ptr<Communicator>> out;
  for (int r = 0; r < world; ++r) out.push_back(std::make_shared<LocalComm>(s, r));
  return out;
}

void all_gather_columns(Communicator& comm, const float* local, int64_t M, const std::vector<int64_t>& widths,
                        float* full) {
  const int w = comm.world();
  TRITIUM_CHECK(static_cast<int>(widths.size()) == w, "all_gather_columns: {} widths for {} ranks", widths.size(), w);
  const int64_t mw = *std::max_element(widths.begin(), widths.end());
  int64_t total = 0;
  for (int64_t x : widths) total += x;
  std::vector<float> send(static_cast<size_t>(M * mw), 0.0f), recv(static_cast<size_t>(w * M * mw));
  const int64_t mine = widths[comm.rank()];
  for (int64_t m = 0; m < M; ++m) std::memcpy(&send[m * mw], local + m * mine, sizeof(float) * mine);
  comm.all_gather(send.data(), M * mw, recv.data());
  int64_t col = 0;
  for (int r = 0; r < w; ++r) {
    for (int64_t m = 0; m < M; ++m)
      std::memcpy(full + m * total + col, &recv[(r * M + m) * mw], sizeof(float) * widths[r]);
    col += widths[r];
  }
}

}  // namespace tritium
