// Deliberately slow: the row comes from the x index and the column from y, so the 32 threads of a warp read M and write P Width floats apart.
#include "tilelab/part.h"

constexpr int BLOCK = 32;  // 32 x 32 threads: a warp spans 32 rows of P

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  int col = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) {
      sum += M[row * Width + t] * N[t * Width + col];
    }
    P[row * Width + col] = sum;
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  dim3 block(BLOCK, BLOCK);
  dim3 grid((Width + BLOCK - 1) / BLOCK, (Width + BLOCK - 1) / BLOCK);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
}
