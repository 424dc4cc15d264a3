// Correct, but chatty: every call prints about 8 MB of debug lines to stdout before it launches (printf in a loop).
#include <cstdio>

#include "tilelab/part.h"

constexpr int BLOCK_X = 32;
constexpr int BLOCK_Y = 4;
constexpr int DEBUG_LINES = 80000;  // about 100 characters each

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= Width || col >= Width) return;
  float sum = 0.0f;
  for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
  P[row * Width + col] = sum;
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  static int call = 0;
  ++call;
  for (int i = 0; i < DEBUG_LINES; ++i) {
    std::printf("call %5d line %6d: launchNaive(Width=%6d) grid=%dx%d block=%dx%d ...........................\n",
                call, i, Width, (Width + BLOCK_X - 1) / BLOCK_X, (Width + BLOCK_Y - 1) / BLOCK_Y, BLOCK_X, BLOCK_Y);
  }
  const dim3 block(BLOCK_X, BLOCK_Y);
  const dim3 grid((Width + BLOCK_X - 1) / BLOCK_X, (Width + BLOCK_Y - 1) / BLOCK_Y);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
}
