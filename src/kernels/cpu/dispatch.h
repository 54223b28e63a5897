// tritium kernels/cpu: run-time choice of the SIMD code path (ref / AVX2 / AVX-512 / AMX).
//
// The default is the best path the CPU supports (cpuid via __builtin_cpu_supports):
//   amx is avx512 with the ternary GEMM (prefill) on AMX-INT8 tiles: it needs AMX-TILE + AMX-INT8 and Linux's
//   permission for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once); avx512 needs AVX-512 F/BW/VL +
//   VNNI + BMI2; avx2 needs AVX2 + FMA + BMI2 + F16C; ref runs anywhere.
// The environment variable TRITIUM_KERNEL=ref|avx2|avx512|amx overrides it (read once, at first use), and
// set_cpu_kernel_path() overrides both (for tests and benchmarks).
#pragma once

#include <string_view>

namespace tritium::cpu {

enum class KernelPath { kRef, kAvx2, kAvx512, kAmx };

/// Whether the path runs the AVX-512 kernels (avx512, and amx for everything but the ternary GEMM).
inline bool has_avx512(KernelPath p) { return p == KernelPath::kAvx512 || p == KernelPath::kAmx; }

std::string_view kernel_path_name(KernelPath p);
/// Parses "ref" / "avx2" / "avx512" / "amx"; throws tritium::Error otherwise.
KernelPath parse_kernel_path(std::string_view s);
/// True when this CPU can run the path.
bool kernel_path_supported(KernelPath p);
/// The best path this CPU supports.
KernelPath best_kernel_path();
/// The path kernels use now: set_cpu_kernel_path's, else TRITIUM_KERNEL's, else best_kernel_path().
/// Throws tritium::Error when TRITIUM_KERNEL names an unknown path or one the CPU lacks.
KernelPath cpu_kernel_path();
/// Forces a path process-wide (not thread-safe against running kernels). Throws tritium::Error when the
/// CPU lacks it.
void set_cpu_kernel_path(KernelPath p);
/// Drops a forced path: back to TRITIUM_KERNEL / best_kernel_path().
void reset_cpu_kernel_path();

}  // namespace tritium::cpu
