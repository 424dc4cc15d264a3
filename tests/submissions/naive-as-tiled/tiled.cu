// Deliberately wrong: launchTiled runs the naive kernel of part 1 (16 x 16 blocks); nothing is staged in shared memory.
#include "tilelab/part.h"

constexpr int BLOCK_WIDTH = 16;

__global__ void tiledKernel(const float* M, const float* N, float* P, int Width) {
  int row = blockIdx.y * BLOCK_WIDTH + threadIdx.y;
  int col = blockIdx.x * BLOCK_WIDTH + threadIdx.x;
  float sum = 0.0f;
  for (int t = 0; t < Width; ++t) {
    sum += M[row * Width + t] * N[t * Width + col];
  }
  P[row * Width + col] = sum;
}

void launchTiled(const float* M, const float* N, float* P, int Width) {
  dim3 block(BLOCK_WIDTH, BLOCK_WIDTH);
  dim3 grid(Width / BLOCK_WIDTH, Width / BLOCK_WIDTH);
  tiledKernel<<<grid, block>>>(M, N, P, Width);
}
