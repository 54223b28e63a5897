#include "kernels/cpu/dispatch.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/env.h"
#include "core/error.h"

namespace tritium::cpu {
namespace {
// -1: not forced; otherwise a KernelPath value.
std::atomic<int> g_forced{-1};

// AMX-TILE and AMX-INT8 (cpuid leaf 7: edx bits 24, 25), and Linux's permission for this process to use the
// tile data state (XFEATURE_XTILEDATA = 18), without which the first tile instruction raises SIGILL.
bool amx_usable() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!((d >> 24) & 1) || !((d >> 25) & 1)) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return ok;
}

// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports has no "f16c").
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

}  // namespace

std::string_view kernel_path_name(KernelPath p) {
  switch (p) {
    case KernelPath::kRef: return "ref";
    case KernelPath::kAvx2: return "avx2";
    case KernelPath::kAvx512: return "avx512";
    case KernelPath::kAmx: return "amx";
  }
  return "?";
}

KernelPath parse_kernel_path(std::string_view s) {
  if (s == "ref") return KernelPath::kRef;
  if (s == "avx2") return KernelPath::kAvx2;
  if (s == "avx512") return KernelPath::kAvx512;
  if (s == "amx") return KernelPath::kAmx;
  fail("unknown CPU kernel path '{}' (expected ref, avx2, avx512 or amx)", s);
}

bool kernel_path_supported(KernelPath p) {
  switch (p) {
    case KernelPath::kRef: return true;
    case KernelPath::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2") &&
             has_f16c();
    case KernelPath::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
             __builtin_cpu_supports("bmi2") && kernel_path_supported(KernelPath::kAvx2);
    case KernelPath::kAmx: return kernel_path_supported(KernelPath::kAvx512) && amx_usable();
  }
  return false;
}

KernelPath best_kernel_path() {
  static const KernelPath best = kernel_path_supported(KernelPath::kAmx)      ? KernelPath::kAmx
                                 : kernel_path_supported(KernelPath::kAvx512) ? KernelPath::kAvx512
                                 : kernel_path_supported(KernelPath::kAvx2) ? KernelPath::kAvx2
                                                                              : KernelPath::kRef;
  return best;
}

KernelPath cpu_kernel_path() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<KernelPath>(forced);
  static const std::string env = env::kernel();
  if (env.empty()) return best_kernel_path();
  const KernelPath p = parse_kernel_path(env);
  if (!kernel_path_supported(p)) fail("TRITIUM_KERNEL={}: this CPU does not support that path", env);
  return p;
}

void set_cpu_kernel_path(KernelPath p) {
  if (!kernel_path_supported(p)) fail("set_cpu_kernel_path: this CPU does not support '{}'", kernel_path_name(p));
  g_forced.store(static_cast<int>(p));
}

void reset_cpu_kernel_path() { g_forced.store(-1); }

}  // namespace tritium::cpu
