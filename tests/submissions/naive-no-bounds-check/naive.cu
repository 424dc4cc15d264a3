// Deliberately wrong: the grid is rounded up but the kernel has no row/col < Width guard.
#include "tilelab/part.h"

constexpr int BLOCK = 16;

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  float sum = 0.0f;
  for (int t = 0; t < Width; ++t) {
    sum += M[row * Width + t] * N[t * Width + col];
  }
  P[row * Width + col] = sum;
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  dim3 block(BLOCK, BLOCK);
  dim3 grid((Width + BLOCK - 1) / BLOCK, (Width + BLOCK - 1) / BLOCK);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
}
