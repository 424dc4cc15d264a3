// Deliberately wrong: a global object's constructor sets up CUDA (a scratch buffer) before main(), where the
// harness's recorders cannot see what it does. The kernel itself is right.
#include "tilelab/part.h"

namespace {

struct Scratch {
  float* buffer = nullptr;
  Scratch() { cudaMalloc(&buffer, 1 << 20); }
};

Scratch g_scratch;  // constructed before main()

}  // namespace

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  dim3 block(16, 16);
  dim3 grid((Width + 15) / 16, (Width + 15) / 16);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
}
