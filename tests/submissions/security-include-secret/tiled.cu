// Known good: tiled product with 16 x 16 tiles (Width is a multiple of 32, so also of 16).
#include "tilelab/part.h"

static const int TW = 16;

__global__ void tiled16(const float* M, const float* N, float* P, int Width) {
  __shared__ float sM[TW][TW];
  __shared__ float sN[TW][TW];

  int tx = threadIdx.x, ty = threadIdx.y;
  int r = blockIdx.y * TW + ty;
  int c = blockIdx.x * TW + tx;

  float acc = 0.0f;
  for (int base = 0; base < Width; base += TW) {
    sM[ty][tx] = M[r * Width + base + tx];
    sN[ty][tx] = N[(base + ty) * Width + c];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < TW; ++i) acc += sM[ty][i] * sN[i][tx];
    __syncthreads();
  }
  P[r * Width + c] = acc;
}

void launchTiled(const float* M, const float* N, float* P, int Width) {
  dim3 block(TW, TW);
  dim3 grid(Width / TW, Width / TW);
  tiled16<<<grid, block>>>(M, N, P, Width);
}
