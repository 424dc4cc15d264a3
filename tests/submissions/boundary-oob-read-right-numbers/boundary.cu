// Deliberately wrong: M and N are read unconditionally (past their ends when Width is not a multiple of 32) and only then zeroed if out of range.
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
    int mCol = ph * TILE_WIDTH + tx;
    int nRow = ph * TILE_WIDTH + ty;
    // Load first, then throw the value away if it was outside the matrix.
    float m = M[row * Width + mCol];
    float n = N[nRow * Width + col];
    if (row >= Width || mCol >= Width) m = 0.0f;
    if (nRow >= Width || col >= Width) n = 0.0f;
    Mds[ty][tx] = m;
    Nds[ty][tx] = n;
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
