// cuBLAS / cuBLASLt entry points resolved at their first call (kernels/cuda/cublas_runtime.h).
#if TRITIUM_HAVE_CUDA
#include "kernels/cuda/cublas_runtime.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

#include "core/error.h"

namespace tritium::cuda {
namespace {

enum class Lib { kCublas, kCublasLt };

// The library's handle, loaded once; throws when it cannot be.
void* library(Lib which) {
  static void* handles[2] = {nullptr, nullptr};
  static std::once_flag once[2];
  static std::string error[2];
  const int i = static_cast<int>(which);
  std::call_once(once[i], [&] {
    const std::string base = which == Lib::kCublas ? "libcublas.so" : "libcublasLt.so";
    const std::string versioned = base + "." + std::to_string(CUBLAS_VER_MAJOR);
    void* h = dlopen(versioned.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen(base.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      error[i] = "cannot load " + versioned + " (" + (why ? why : "not found") +
                 "); the CUDA backend needs cuBLAS: put the CUDA toolkit's lib64 folder on LD_LIBRARY_PATH";
    }
    handles[i] = h;
  });
  if (!handles[i]) fail("{}", error[i]);
  return handles[i];
}

void* symbol(Lib which, const char* name) {
  void* p = dlsym(library(which), name);
  if (!p) fail("{} has no entry point {}", which == Lib::kCublas ? "libcublas" : "libcublasLt", name);
  return p;
}

}  // namespace
}  // namespace tritium::cuda

// Each definition resolves the real entry point once and forwards its arguments. Its declaration comes from the
// header, so a definition whose parameters differ from the header's does not compile.
#define TRITIUM_CUBLAS_FORWARD_AS(lib, name, type)                                         \
  static const auto real = reinterpret_cast<type>(tritium::cuda::symbol(lib, #name)); \
  return real
#define TRITIUM_CUBLAS_FORWARD(lib, name) TRITIUM_CUBLAS_FORWARD_AS(lib, name, decltype(&name))

using tritium::cuda::Lib;

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublas, cublasCreate_v2)(handle);
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublas, cublasDestroy_v2)(handle);
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublas, cublasSetStream_v2)(handle, stream);
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t handle, void* workspace, size_t bytes) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublas, cublasSetWorkspace_v2)(handle, workspace, bytes);
}
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublas, cublasSetMathMode)(handle, mode);
}
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  // cublas_api.h also declares a C++ overload taking a cudaDataType compute type: name the C entry point's type.
  using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  [[maybe_unused]] constexpr GemmEx declared = &cublasGemmEx;  // the header's C declaration has this type
  TRITIUM_CUBLAS_FORWARD_AS(Lib::kCublas, cublasGemmEx, GemmEx)(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype,
                                                     ldb, beta, C, Ctype, ldc, computeType, algo);
}
cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                              int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                              const float* beta, float* C, int ldc) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublas, cublasSgemm_v2)(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C,
                                                       ldc);
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtCreate)(handle);
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtDestroy)(handle);
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatmul)(handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D,
                                                         Ddesc, algo, workspace, workspaceSizeInBytes, stream);
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatmulDescCreate)(desc, computeType, scaleType);
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatmulDescDestroy)(desc);
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatmulDescSetAttribute)(desc, attr, buf, sizeInBytes);
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatrixLayoutCreate)(layout, type, rows, cols, ld);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatrixLayoutDestroy)(layout);
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatrixLayoutSetAttribute)(layout, attr, buf, sizeInBytes);
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatmulPreferenceCreate)(pref);
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatmulPreferenceDestroy)(pref);
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t sizeInBytes) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatmulPreferenceSetAttribute)(pref, attr, buf, sizeInBytes);
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  TRITIUM_CUBLAS_FORWARD(Lib::kCublasLt, cublasLtMatmulAlgoGetHeuristic)(handle, operationDesc, Adesc, Bdesc, Cdesc,
                                                                         Ddesc, preference, requestedAlgoCount,
                                                                         heuristicResultsArray, returnAlgoCount);
}

}  // extern "C"

namespace tritium::cuda {

std::vector<std::string> cublas_unresolved_entry_points() {
  static const std::pair<Lib, const char*> kEntryPoints[] = {
      {Lib::kCublas, "cublasCreate_v2"},
      {Lib::kCublas, "cublasDestroy_v2"},
      {Lib::kCublas, "cublasSetStream_v2"},
      {Lib::kCublas, "cublasSetWorkspace_v2"},
      {Lib::kCublas, "cublasSetMathMode"},
      {Lib::kCublas, "cublasGemmEx"},
      {Lib::kCublas, "cublasSgemm_v2"},
      {Lib::kCublasLt, "cublasLtCreate"},
      {Lib::kCublasLt, "cublasLtDestroy"},
      {Lib::kCublasLt, "cublasLtMatmul"},
      {Lib::kCublasLt, "cublasLtMatmulDescCreate"},
      {Lib::kCublasLt, "cublasLtMatmulDescDestroy"},
      {Lib::kCublasLt, "cublasLtMatmulDescSetAttribute"},
      {Lib::kCublasLt, "cublasLtMatrixLayoutCreate"},
      {Lib::kCublasLt, "cublasLtMatrixLayoutDestroy"},
      {Lib::kCublasLt, "cublasLtMatrixLayoutSetAttribute"},
      {Lib::kCublasLt, "cublasLtMatmulPreferenceCreate"},
      {Lib::kCublasLt, "cublasLtMatmulPreferenceDestroy"},
      {Lib::kCublasLt, "cublasLtMatmulPreferenceSetAttribute"},
      {Lib::kCublasLt, "cublasLtMatmulAlgoGetHeuristic"},
  };
  std::vector<std::string> missing;
  for (const auto& [lib, name] : kEntryPoints)
    if (!dlsym(library(lib), name)) missing.emplace_back(name);
  return missing;
}

}  // namespace tritium::cuda
#endif  // TRITIUM_HAVE_CUDA
