// Deliberately wrong: the launcher reads a block size from an environment variable and dereferences getenv's null result when it is unset.
#include <cstdlib>

#include "tilelab/part.h"

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
  // Lets me try other block sizes without recompiling. Forgot: getenv returns NULL when the variable is not set.
  const char* setting = std::getenv("NAIVE_BLOCK_SIZE");
  int block = 16;
  if (setting[0] != '\0') block = std::atoi(setting);
  dim3 threads(block, block);
  dim3 grid((Width + block - 1) / block, (Width + block - 1) / block);
  naiveKernel<<<grid, threads>>>(M, N, P, Width);
}
