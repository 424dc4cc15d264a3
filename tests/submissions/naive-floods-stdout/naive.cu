// Correct, but noisy: the first call prints about 100 MB of debug lines to stdout (printf in a loop); later calls are quiet.
#include <cstdio>

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
  static bool firstCall = true;
  if (firstCall) {
    firstCall = false;
    // Left-over debugging: one million lines of 100 characters.
    for (int i = 0; i < 1000000; ++i) {
      std::printf("debug %8d: launchNaive(Width=%6d) block=%dx%d ..........................................\n", i,
                  Width, BLOCK, BLOCK);
    }
  }
  dim3 block(BLOCK, BLOCK);
  dim3 grid((Width + BLOCK - 1) / BLOCK, (Width + BLOCK - 1) / BLOCK);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
}
