#include "parallel/mpi_comm.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "core/env.h"
#include "core/error.h"

#if TRITIUM_HAVE_MPI
#include <mpi.h>
#endif

namespace tritium {

bool launched_by_mpi() { return env::launched_by_mpi(); }

#if TRITIUM_HAVE_MPI

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  fail("MPI error in {}: {}", what, std::string(msg, static_cast<size_t>(len)));
}

void finalize_at_exit() { mpi_finalize(); }

// Waits for a non-blocking collective. A rank that died or hangs would block a blocking collective forever (and
// the whole group with it): past TRITIUM_TP_TIMEOUT the group is aborted with a message naming the collective.
// Polls without sleeping for the first ~100 us (a healthy collective is done by then), then every 20 us.
void wait_collective(MPI_Request& req, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  const double limit = env::tp_timeout_seconds();
  for (int polls = 0;; ++polls) {
    int done = 0;
    check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (polls < 1000) continue;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit) {
      int rank = -1;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      std::fprintf(stderr, "%s", fmt::format("tritium: tensor parallel: rank {}: {} did not complete within {:g} s "
                                             "(TRITIUM_TP_TIMEOUT): a rank died or hangs; aborting the group\n",
                                             rank, what, limit).c_str());
      MPI_Abort(MPI_COMM_WORLD, 70);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MpiWorld w) : w_(w) {}
  int rank() const override { return w_.rank; }
  int world() const override { return w_.size; }
  void all_reduce_sum(float* data, int64_t n) override {
    if (n <= 0) return;
    buf_.resize(static_cast<size_t>(n) * w_.size);
    all_gather(data, n, buf_.data());
    for (int64_t i = 0; i < n; ++i) {
      float s = buf_[static_cast<size_t>(i)];
      for (int r = 1; r < w_.size; ++r) s += buf_[static_cast<size_t>(r) * n + i];
      data[i] = s;
    }
  }
  void all_gather(const float* send, int64_t n, float* recv) override {
    TRITIUM_CHECK(n >= 0 && n <= INT32_MAX, "MPI all_gather: {} elements per rank exceed MPI's int count", n);
    MPI_Request req;
    check_mpi(MPI_Iallgather(send, static_cast<int>(n), MPI_FLOAT, recv, static_cast<int>(n), MPI_FLOAT,
                             MPI_COMM_WORLD, &req),
              "MPI_Iallgather");
    wait_collective(req, "MPI_Allgather");
  }

 private:
  MpiWorld w_;
  std::vector<float> buf_;
};

}  // namespace

bool mpi_available() { return true; }

MpiWorld mpi_init() {
  static MpiWorld world = [] {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      std::atexit(finalize_at_exit);
    }
    MpiWorld w;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &w.rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &w.size), "MPI_Comm_size");
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    check_mpi(MPI_Comm_rank(node, &w.local_rank), "MPI_Comm_rank (node)");
    MPI_Comm_free(&node);
    return w;
  }();
  return world;
}

void mpi_finalize() {
  int inited = 0, done = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&done);
  if (inited && !done) MPI_Finalize();
}

void mpi_broadcast_string(std::string& s, int root) {
  mpi_init();
  int64_t len = static_cast<int64_t>(s.size());
  MPI_Request req;
  check_mpi(MPI_Ibcast(&len, 1, MPI_INT64_T, root, MPI_COMM_WORLD, &req), "MPI_Ibcast (length)");
  wait_collective(req, "MPI_Bcast (length)");
  TRITIUM_CHECK(len >= 0 && len <= INT32_MAX, "MPI broadcast: bad length {}", len);
  s.resize(static_cast<size_t>(len));
  if (len > 0) {
    check_mpi(MPI_Ibcast(s.data(), static_cast<int>(len), MPI_CHAR, root, MPI_COMM_WORLD, &req), "MPI_Ibcast");
    wait_collective(req, "MPI_Bcast");
  }
}

std::shared_ptr<Communicator> make_mpi_communicator() { return std::make_shared<MpiCommunicator>(mpi_init()); }

#else  // !TRITIUM_HAVE_MPI

namespace {
[[noreturn]] void no_mpi() {
  fail("this tritium build has no MPI support (install libopenmpi-dev and reconfigure; see docs/tensor_parallel.md)");
}
}  // namespace

bool mpi_available() { return false; }
MpiWorld mpi_init() { no_mpi(); }
void mpi_finalize() {}
void mpi_broadcast_string(std::string&, int) { no_mpi(); }
std::shared_ptr<Communicator> make_mpi_communicator() { no_mpi(); }

#endif

}  // namespace tritium
