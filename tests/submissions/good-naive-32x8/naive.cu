// Known good: naive product with 32 x 8 thread blocks (threadIdx.x still picks the column).
#include "tilelab/part.h"

#define BLOCK_COLS 32
#define BLOCK_ROWS 8

__global__ void matmulNaive(const float* M, const float* N, float* P, int Width) {
  int c = blockIdx.x * BLOCK_COLS + threadIdx.x;  // a warp covers 32 neighbouring columns
  int r = blockIdx.y * BLOCK_ROWS + threadIdx.y;
  if (r >= Width || c >= Width) return;

  const float* mRow = M + (size_t)r * Width;
  float acc = 0.0f;
  for (int i = 0; i < Width; i++) {
    acc += mRow[i] * N[(size_t)i * Width + c];
  }
  P[(size_t)r * Width + c] = acc;
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  dim3 threads(BLOCK_COLS, BLOCK_ROWS);
  dim3 blocks((Width + BLOCK_COLS - 1) / BLOCK_COLS, (Width + BLOCK_ROWS - 1) / BLOCK_ROWS);
  matmulNaive<<<blocks, threads>>>(M, N, P, Width);
}
