// Deliberately wrong: a correct kernel, and beside it a host thread doing 30 ms of arithmetic per call. It stands
// for host computation through memory no CUDA call reveals (pageable memory on a system where kernels can reach it):
// the host CPU time the launcher spends outside CUDA calls gives it away.
#include <chrono>
#include <thread>

#include "tilelab/part.h"

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

static volatile double g_sink;

void launchNaive(const float* M, const float* N, float* P, int Width) {
  std::thread worker([] {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
    double x = 1.0;
    while (std::chrono::steady_clock::now() < end) x = x * 1.0000001 + 1e-9;
    g_sink = x;
  });
  dim3 block(16, 16);
  dim3 grid((Width + 15) / 16, (Width + 15) / 16);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
  worker.join();
}
