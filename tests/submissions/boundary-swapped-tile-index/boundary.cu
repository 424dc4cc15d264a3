// Deliberately wrong: the M tile is loaded from column phase * TILE_WIDTH + ty instead of + tx.
#include "tilelab/part.h"

constexpr int TILE_WIDTH = 32;

__global__ void boundaryKernel(const float* M, const float* N, float* P, int Width) {
  __shared__ float Mds[TILE_WIDTH][TILE_WIDTH];
  __shared__ float Nds[TILE_WIDTH][TILE_WIDTH];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE_WIDTH + ty;
  int col = blockIdx.x * TILE_WIDTH + tx;

  float sum = 0.0f;
  int phases = (Width + TILE_WIDTH - 1) / TILE_WIDTH;
  for (int ph = 0; ph < phases; ++ph) {
    int mCol = ph * TILE_WIDTH + ty;
    int nRow = ph * TILE_WIDTH + ty;
    Mds[ty][tx] = (row < Width && mCol < Width) ? M[row * Width + mCol] : 0.0f;
    Nds[ty][tx] = (nRow < Width && col < Width) ? N[nRow * Width + col] : 0.0f;
    __syncthreads();
    for (int t = 0; t < TILE_WIDTH; ++t) sum += Mds[ty][t] * Nds[t][tx];
    __syncthreads();
  }
  if (row < Width && col < Width) P[row * Width + col] = sum;
}

void launchBoundary(const float* M, const float* N, float* P, int Width) {
  int tiles = (Width + TILE_WIDTH - 1) / TILE_WIDTH;
  dim3 block(TILE_WIDTH, TILE_WIDTH);
  dim3 grid(tiles, tiles);
  boundaryKernel<<<grid, block>>>(M, N, P, Width);
}
