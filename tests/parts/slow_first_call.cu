// Probe: a correct naive product whose first call spends 300 ms on the host
// before its kernel, as a first call slowed by other runs on the GPU would
// take; every later call is as fast as the naive kernel. Its counters are
// judged by that first call, then read again once the timed calls show it
// fast (grader/harness/core/timing.h).
#include <chrono>
#include <thread>

__global__ void plainKernel(const float* M, const float* N, float* P, int Width) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  static bool first = true;
  if (first) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  first = false;
  const dim3 block(16, 16);
  const dim3 grid((Width + 15) / 16, (Width + 15) / 16);
  plainKernel<<<grid, block>>>(M, N, P, Width);
}
