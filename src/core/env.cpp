#include "core/env.h"

#include <cstdlib>

namespace tritium::env {
namespace {

std::string get(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

int get_int(const char* name) {
  const std::string v = get(name);
  return v.empty() ? 0 : std::atoi(v.c_str());
}

}  // namespace

std::string kernel() { return get("TRITIUM_KERNEL"); }
std::string cuda_attention() { return get("TRITIUM_CUDA_ATTENTION"); }
std::string cuda_layout() { return get("TRITIUM_CUDA_LAYOUT"); }
bool cuda_graphs() { return get("TRITIUM_CUDA_GRAPHS") != "0"; }
std::string eval_data() { return get("TRITIUM_EVAL_DATA"); }
int tp_rank() { return get_int("TRITIUM_TP_RANK"); }
int tp_world() { return get_int("TRITIUM_TP_WORLD"); }
std::string tp_nccl_id() { return get("TRITIUM_TP_NCCL_ID"); }

double tp_timeout_seconds() {
  const std::string v = get("TRITIUM_TP_TIMEOUT");
  if (v.empty()) return 300;
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  return end != v.c_str() && s > 0 ? s : 300;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (!get(v).empty()) return true;
  return false;
}

}  // namespace tritium::env
