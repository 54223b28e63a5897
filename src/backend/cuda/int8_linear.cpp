// Int8 linear layers on the GPU: upload, cuBLASLt int8 GEMM plans, the forward sequence. See int8_linear.h.
#if TRITIUM_HAVE_CUDA
#include "backend/cuda/int8_linear.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "kernels/cpu/int8_gemm.h"
#include "kernels/cuda/kernels.h"

namespace tritium::cuda {
namespace {

void check_lt(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt error in {}: status {}", what, static_cast<int>(s));
}

int round_up16(int v) { return (v + 15) / 16 * 16; }

template <class T>
T* device_alloc(std::vector<void*>& owned, size_t count) {
  void* p = nullptr;
  check(cudaMalloc(&p, std::max<size_t>(count * sizeof(T), 256)), "cudaMalloc (int8 linear)");
  owned.push_back(p);
  return static_cast<T*>(p);
}

template <class T>
T* device_upload(std::vector<void*>& owned, const T* host, size_t count) {
  T* d = device_alloc<T>(owned, count);
  check(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D (int8 linear)");
  return d;
}

Int8ActMode act_mode(Int8Method m) {
  switch (m) {
    case Int8Method::kAbsmax:
    case Int8Method::kRowwise: return Int8ActMode::kAbsmaxPerRequest;
    case Int8Method::kZeropoint: return Int8ActMode::kZeropointPerRequest;
    case Int8Method::kVectorwise: return Int8ActMode::kAbsmaxPerRow;
    case Int8Method::kLlmInt8: return Int8ActMode::kLlmInt8;
    case Int8Method::kWeightOnly: break;
  }
  fail("int8 linear: weight-only int8 has no activation quantization");
}

}  // namespace

/// One cuBLASLt int8 problem (TN: A = W [np, kp] row-major = kp x np column-major, op T; B = X [M, kp] row-major =
/// kp x M column-major; C = acc [M, ldc] row-major = np x M column-major with leading dimension ldc). Split K:
/// a strided batch of `splits` problems over the K slices [s ks, (s + 1) ks) of A and B (ks = kp / splits, the
/// same leading dimensions), the partial sums of slice s at C + s Mp ldc.
struct Int8Workspace::LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  std::vector<cublasLtMatmulAlgo_t> algos;  // the heuristic's candidates, best first
  ~LtPlan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Int8Workspace::Int8Workspace() {
  cublasLtHandle_t h = nullptr;
  check_lt(cublasLtCreate(&h), "cublasLtCreate");
  lt_ = h;
  check(cudaMalloc(&lt_ws_, lt_ws_bytes_), "cudaMalloc (cuBLASLt workspace)");
}

Int8Workspace::~Int8Workspace() {
  plans_.clear();
  free_buffers();
  if (lt_ws_) cudaFree(lt_ws_);
  if (lt_) cublasLtDestroy(static_cast<cublasLtHandle_t>(lt_));
}

void Int8Workspace::free_buffers() {
  for (void* p : ptrs_) cudaFree(p);
  ptrs_.clear();
  act_ = {};
  acc_ = nullptr;
  rows_ = 0;
}

void Int8Workspace::reserve_dims(int k, int kp, int np) {
  if (k > k_ || kp > kp_ || np > np_) {
    k_ = std::max(k, k_);
    kp_ = std::max(kp, kp_);
    np_ = std::max(np, np_);
    const int rows = rows_;
    free_buffers();
    if (rows > 0) ensure(rows);
  }
}

void Int8Workspace::ensure(int rows) {
  if (rows <= rows_ || k_ == 0) return;
  free_buffers();
  rows_ = rows;
  const size_t R = static_cast<size_t>(rows), kw = static_cast<size_t>((k_ + 31) / 32);
  const size_t Rp = R + 16;  // cuBLASLt runs on M rounded up to 16 (rows past M: scratch, never read back)
  act_.xq = device_alloc<int8_t>(ptrs_, Rp * kp_);
  act_.sx = device_alloc<float>(ptrs_, R);
  act_.zx = device_alloc<int32_t>(ptrs_, R);
  act_.sumq = device_alloc<int32_t>(ptrs_, R);
  act_.gb = device_alloc<int32_t>(ptrs_, R);
  act_.ge = device_alloc<int32_t>(ptrs_, R);
  act_.stat = device_alloc<float>(ptrs_, 3 * R);
  act_.mask = device_alloc<uint32_t>(ptrs_, R * kw);
  act_.has_out = device_alloc<int32_t>(ptrs_, R);
  act_.umask = device_alloc<uint32_t>(ptrs_, kw);
  act_.ucols = device_alloc<int32_t>(ptrs_, static_cast<size_t>(k_) + 1);
  acc_ = device_alloc<int32_t>(ptrs_, Rp * np_);
}

Int8Workspace::LtPlan& Int8Workspace::plan(int np, int kp, int Mp, int64_t ldc, int splits) {
  auto& slot = plans_[{np, kp, Mp, ldc, splits}];
  if (slot) return *slot;
  try {
    auto p = std::make_unique<LtPlan>();
    const int ks = kp / splits;
    check_lt(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32I, CUDA_R_32I), "cublasLtMatmulDescCreate");
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof(opT)), "TRANSA");
    check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof(opN)), "TRANSB");
    check_lt(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8I, ks, np, kp), "layout A");
    check_lt(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8I, ks, Mp, kp), "layout B");
    check_lt(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32I, np, Mp, ldc), "layout C");
    if (splits > 1) {
      const int32_t count = splits;
      const int64_t stride_ab = ks, stride_c = static_cast<int64_t>(Mp) * ldc;
      const std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {
          {p->a, stride_ab}, {p->b, stride_ab}, {p->c, stride_c}};
      for (auto [layout, stride] : layouts) {
        check_lt(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
                 "batch count");
        check_lt(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                  sizeof(stride)),
                 "batch stride");
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt_ws_bytes_,
                                                  sizeof(lt_ws_bytes_)),
             "preference workspace");
    cublasLtMatmulHeuristicResult_t res[kMaxAlgos]{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(lt_), p->desc, p->a, p->b,
                                                             p->c, p->c, pref, kMaxAlgos, res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    check_lt(st, "cublasLtMatmulAlgoGetHeuristic");
    TRITIUM_CHECK(found > 0, "cuBLASLt: no int8 algorithm for {}x{}x{} (M x N x K) in {} K slices", Mp, np, kp, splits);
    for (int i = 0; i < found; ++i) p->algos.push_back(res[i].algo);
    slot = std::move(p);
    return *slot;
  } catch (...) {
    plans_.erase({np, kp, Mp, ldc, splits});
    throw;
  }
}

int Int8Workspace::algo_count(int np, int kp, int M, int64_t ldc, int splits) {
  try {
    return static_cast<int>(plan(np, kp, padded_rows(M), ldc, splits).algos.size());
  } catch (const Error&) {
    return 0;
  }
}

void Int8Workspace::gemm(const int8_t* w, int np, int kp, const int8_t* xq, int M, int32_t* acc, int64_t ldc,
                         cudaStream_t stream, int kind, Int8GemmConfig cfg) {
  TRITIUM_CHECK(np % 16 == 0 && kp % 16 == 0 && ldc % 4 == 0 && ldc >= np,
                "int8 GEMM: np {} and kp {} must be multiples of 16, ldc {} a multiple of 4 >= np", np, kp, ldc);
  TRITIUM_CHECK(cfg.splits >= 1 && kp % (16 * cfg.splits) == 0 && cfg.algo >= 0 && cfg.algo < kMaxAlgos,
                "int8 GEMM: K {} does not split into {} slices of a multiple of 16, or algorithm {} is out of range",
                kp, cfg.splits, cfg.algo);
  if (M <= 0) return;
  const bool automatic = kind == 0;
  if (kind == 0) kind = M <= kDp4aMaxRows || lt_unavailable_ ? 1 : 2;
  if (kind == 1) {
    TRITIUM_CHECK(cfg.splits == 1, "int8 GEMM: the dp4a kernel does not split K");
    int8_gemv_dp4a(w, np, kp, xq, M, acc, ldc, stream);
    return;
  }
  // cuBLASLt's int8 tensor-core kernels want every dimension 16-aligned: run on M rounded up to 16 (the extra
  // columns of the product come from scratch rows past M of xq and land in scratch rows of acc).
  const int Mp = padded_rows(M);
  LtPlan* p = nullptr;
  try {
    p = &plan(np, kp, Mp, ldc, cfg.splits);
  } catch (const Error& e) {
    if (!automatic || cfg.splits != 1) throw;
    // The dp4a kernel computes the same exact integers: fall back to it for good (said once on stderr).
    std::fprintf(stderr, "warning: %s; int8 GEMMs use the dp4a kernel instead\n", e.what());
    lt_unavailable_ = true;
    int8_gemv_dp4a(w, np, kp, xq, M, acc, ldc, stream);
    return;
  }
  TRITIUM_CHECK(cfg.algo < static_cast<int>(p->algos.size()), "int8 GEMM: cuBLASLt offers {} algorithms, not {}",
                p->algos.size(), cfg.algo + 1);
  const int32_t one = 1, zero = 0;
  check_lt(cublasLtMatmul(static_cast<cublasLtHandle_t>(lt_), p->desc, &one, w, p->a, xq, p->b, &zero, acc, p->c,
                          acc, p->c, &p->algos[cfg.algo], lt_ws_, lt_ws_bytes_, stream),
           "cublasLtMatmul (int8)");
}

CudaInt8Linear::CudaInt8Linear(const Int8Projection& lin, Int8Workspace& ws)
    : method_(lin.method()), alpha_(lin.options().outlier_threshold) {
  const Int8Weight& w = lin.weight();
  TRITIUM_CHECK(w.k <= kInt8GemmMaxK && w.n < (int64_t{1} << 30),
                "CUDA int8 linear: shape [{}, {}] too large (K at most {})", w.n, w.k, kInt8GemmMaxK);
  n_ = static_cast<int>(w.n);
  k_ = static_cast<int>(w.k);
  np_ = round_up16(n_);
  kp_ = round_up16(k_);
  zw_ = w.zero;
  per_tensor_ = w.scale.size() == 1;
  std::vector<int8_t> qp(static_cast<size_t>(np_) * kp_, 0);
  for (int r = 0; r < n_; ++r)
    std::copy_n(w.q.data() + static_cast<size_t>(r) * k_, k_, qp.data() + static_cast<size_t>(r) * kp_);
  q_ = device_upload(ptrs_, qp.data(), qp.size());
  sw_ = device_upload(ptrs_, w.scale.data(), w.scale.size());
  row_sum_ = device_upload(ptrs_, w.row_sum.data(), w.row_sum.size());
  if (!lin.bias().empty()) bias_ = device_upload(ptrs_, lin.bias().data(), lin.bias().size());
  if (method_ == Int8Method::kLlmInt8 && lin.options().outlier_weights == OutlierWeights::kFp16Copy) {
    std::vector<uint16_t> t(static_cast<size_t>(n_) * k_);
    for (int r = 0; r < n_; ++r)
      for (int c = 0; c < k_; ++c)
        t[static_cast<size_t>(c) * n_ + r] = w.f16[static_cast<size_t>(r) * k_ + c];
    w16t_ = device_upload(ptrs_, t.data(), t.size());
  }
  ws.reserve_dims(k_, kp_, np_);
}

CudaInt8Linear::~CudaInt8Linear() {
  for (void* p : ptrs_) cudaFree(p);
}

void CudaInt8Linear::forward(const float* x, int64_t ldx, int rows, const int32_t* seq, const int32_t* row_map,
                             float* out, int64_t ldout, bool add, Int8Workspace& ws, cudaStream_t stream,
                             int gemm_kind) const {
  if (rows <= 0) return;
  TRITIUM_CHECK(rows <= ws.rows_capacity(), "CUDA int8 linear: {} rows exceed the workspace ({})", rows,
                ws.rows_capacity());
  if (method_ == Int8Method::kWeightOnly) {
    int8_weight_only(x, ldx, rows, q_, n_, k_, kp_, sw_, bias_, out, ldout, add, stream);
    return;
  }
  const Int8ActBuffers& b = ws.act();
  int8_quantize_activations(x, ldx, rows, k_, kp_, act_mode(method_), alpha_, seq, row_map, b, stream);
  ws.gemm(q_, np_, kp_, b.xq, rows, ws.acc(), np_, stream, gemm_kind);
  Int8Epilogue e;
  e.acc = ws.acc();
  e.ldacc = np_;
  e.n = n_;
  e.k = k_;
  e.kp = kp_;
  e.sw = sw_;
  e.per_tensor = per_tensor_;
  e.bias = bias_;
  e.zeropoint = method_ == Int8Method::kZeropoint;
  e.zw = zw_;
  e.w_row_sum = row_sum_;
  e.llm = method_ == Int8Method::kLlmInt8;
  e.x = x;
  e.ldx = ldx;
  e.w16t = w16t_;
  e.wq = q_;
  e.out = out;
  e.ldout = ldout;
  e.add = add;
  int8_dequant_epilogue(e, b, rows, stream);
}

}  // namespace tritium::cuda
#endif
