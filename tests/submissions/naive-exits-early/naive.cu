// Deliberately wrong: a left-over debugging stop calls exit(0) on the launcher's third call.
#include <cstdio>
#include <cstdlib>

#include "tilelab/part.h"

constexpr int BLOCK = 16;

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) {
      sum += M[row * Width + t] * N[t * Width + col];
    }
    P[row * Width + col] = sum;
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  static int calls = 0;
  if (++calls == 3) {
    std::printf("seen enough, stopping here\n");
    std::exit(0);
  }
  dim3 block(BLOCK, BLOCK);
  dim3 grid((Width + BLOCK - 1) / BLOCK, (Width + BLOCK - 1) / BLOCK);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
}
