// Bit-plane probe (issue #4, session 5; bench/CUDA_NOTES.md version 12): the cost of writing the tcb activation
// bit planes (ternary_tcb.h) from one quantized row held by a 256-thread block, the situation of norm_quant at one
// token. Three ways, same output (checked against the first): one ballot per (plane, byte) (session 4), the warp
// bit transpose one word after the other, and the product's warp_planes (row_ops.cuh: words in lockstep).
// Standalone: nvcc -O3 -arch=sm_90a -std=c++20 -Isrc -o planes_probe bench/probes/planes_probe.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/cuda/row_ops.cuh"

using namespace tritium::cuda;
constexpr int NT = 256;

template <int VPT>
__device__ void planes_ballot(const uint32_t (&cw)[VPT], int nblk, uint32_t* xb) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int blk = (threadIdx.x + j * NT) / 32;
    if (blk >= nblk) continue;
    uint32_t mine = 0;
#pragma unroll
    for (int p = 0; p < 8; ++p)
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const uint32_t word = __ballot_sync(0xffffffffu, (cw[j] >> (8 * b + p)) & 1u);
        if (lane == p * 4 + b) mine = word;
      }
    xb[(blk / 2) * 64 + lane * 2 + blk % 2] = mine;
  }
}

template <int VPT>
__device__ void planes_serial(const uint32_t (&cw)[VPT], int nblk, uint32_t* xb) {
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int blk = (threadIdx.x + j * NT) / 32;
    if (blk >= nblk) continue;
    uint32_t one[1] = {cw[j]};
    warp_planes<1>(one, blk, 0, nblk, xb);
  }
}

// mode 0: no planes (the row's codes only), 1 ballot, 2 serial transpose, 3 warp_planes (lockstep)
template <int VPT, int MODE>
__global__ void __launch_bounds__(NT) kern(const uint32_t* __restrict__ codes, int n4, uint32_t* xb, uint32_t* q) {
  uint32_t cw[VPT];
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int i = threadIdx.x + j * NT;
    cw[j] = i < n4 ? __ldcg(codes + i) : 0u;
  }
  const int nblk = (n4 * 4 + 255) / 256 * 2;
  if (MODE == 1) planes_ballot<VPT>(cw, nblk, xb);
  if (MODE == 2) planes_serial<VPT>(cw, nblk, xb);
  if (MODE == 3) row_planes<NT, VPT>(cw, nblk, xb);
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int i = threadIdx.x + j * NT;
    if (i < n4) q[i] = cw[j];
  }
}

template <class K>
double time_graph(cudaStream_t st, K launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal);
  for (int i = 0; i < 100; ++i) launch();
  cudaStreamEndCapture(st, &g);
  cudaGraphInstantiate(&ge, g, 0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> t;
  for (int r = 0; r < 11; ++r) {
    cudaEventRecord(e0, st);
    cudaGraphLaunch(ge, st);
    cudaEventRecord(e1, st);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    t.push_back(ms * 1e3 / 100);
  }
  std::sort(t.begin(), t.end());
  return t[5];
}

template <int VPT>
void shape(cudaStream_t st, int n) {
  const int n4 = n / 4, nw = (n + 255) / 256 * 64;
  std::vector<uint32_t> h(n4);
  for (int i = 0; i < n4; ++i) h[i] = 0x9e3779b9u * (i + 1) ^ (i << 7);
  uint32_t *codes, *xb, *q;
  cudaMalloc(&codes, n4 * 4);
  cudaMalloc(&xb, nw * 4);
  cudaMalloc(&q, n4 * 4);
  cudaMemcpy(codes, h.data(), n4 * 4, cudaMemcpyHostToDevice);
  std::vector<uint32_t> ref(nw), got(nw);
  const char* names[4] = {"no planes", "ballot per (plane, byte)", "bit transpose, word by word", "warp_planes (lockstep)"};
  double base = 0;
  auto run = [&](int mode, auto k) {
    cudaMemset(xb, 0, nw * 4);
    k<<<1, NT, 0, st>>>(codes, n4, xb, q);
    cudaStreamSynchronize(st);
    cudaMemcpy(got.data(), xb, nw * 4, cudaMemcpyDeviceToHost);
    if (mode == 1) ref = got;
    const bool ok = mode == 0 || got == ref;
    const double us = time_graph(st, [&] { k<<<1, NT, 0, st>>>(codes, n4, xb, q); });
    if (mode == 0) base = us;
    std::printf("| 1 x %d | %s | %.2f | %+.2f | %s |\n", n, names[mode], us, us - base, ok ? "same planes" : "MISMATCH");
  };
  run(0, kern<VPT, 0>);
  run(1, kern<VPT, 1>);
  run(2, kern<VPT, 2>);
  run(3, kern<VPT, 3>);
  cudaFree(codes);
  cudaFree(xb);
  cudaFree(q);
}

int main() {
  cudaStream_t st;
  cudaStreamCreate(&st);
  std::printf("| row | planes | us (hot, 100 launches in a graph) | vs no planes | check |\n| --- | --- | ---: | ---: | --- |\n");
  shape<3>(st, 2560);
  shape<7>(st, 6912);
  shape<8>(st, 6912);
  return 0;
}
