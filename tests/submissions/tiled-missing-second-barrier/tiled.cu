// Deliberately wrong: no __syncthreads() after the inner product, so the next phase may overwrite tiles still being read.
#include "tilelab/part.h"

constexpr int TILE_WIDTH = 16;  // Width 32 already has two phases

__global__ void tiledKernel(const float* M, const float* N, float* P, int Width) {
  __shared__ float Mds[TILE_WIDTH][TILE_WIDTH];
  __shared__ float Nds[TILE_WIDTH][TILE_WIDTH];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE_WIDTH + ty;
  int col = blockIdx.x * TILE_WIDTH + tx;

  float sum = 0.0f;
  for (int ph = 0; ph < Width / TILE_WIDTH; ++ph) {
    Mds[ty][tx] = M[row * Width + ph * TILE_WIDTH + tx];
    Nds[ty][tx] = N[(ph * TILE_WIDTH + ty) * Width + col];
    __syncthreads();
    for (int t = 0; t < TILE_WIDTH; ++t) sum += Mds[ty][t] * Nds[t][tx];
  }
  P[row * Width + col] = sum;
}

void launchTiled(const float* M, const float* N, float* P, int Width) {
  dim3 block(TILE_WIDTH, TILE_WIDTH);
  dim3 grid(Width / TILE_WIDTH, Width / TILE_WIDTH);
  tiledKernel<<<grid, block>>>(M, N, P, Width);
}
