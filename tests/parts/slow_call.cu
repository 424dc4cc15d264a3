// Probe: a correct naive product, but every call at Width >= 256 first
// spends a minute on the host, as a product computed there would at the
// timing sizes. With a time budget the trusted harness ends its process
// instead of waiting (grader/harness/core/timing.h).
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
  if (Width >= 256) std::this_thread::sleep_for(std::chrono::minutes(1));
  const dim3 block(16, 16);
  const dim3 grid((Width + 15) / 16, (Width + 15) / 16);
  plainKernel<<<grid, block>>>(M, N, P, Width);
}
