// Deliberately wrong: grid.x is sized from j and grid.y from l, but the kernel takes columns (bounded by l) from x.
#include "tilelab/part.h"

constexpr int TILE_WIDTH = 32;

__global__ void rectangularKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  __shared__ float Mds[TILE_WIDTH][TILE_WIDTH];
  __shared__ float Nds[TILE_WIDTH][TILE_WIDTH];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE_WIDTH + ty;
  int col = blockIdx.x * TILE_WIDTH + tx;

  float sum = 0.0f;
  int phases = (k + TILE_WIDTH - 1) / TILE_WIDTH;
  for (int ph = 0; ph < phases; ++ph) {
    int mCol = ph * TILE_WIDTH + tx;
    int nRow = ph * TILE_WIDTH + ty;
    Mds[ty][tx] = (row < j && mCol < k) ? M[row * k + mCol] : 0.0f;
    Nds[ty][tx] = (nRow < k && col < l) ? N[nRow * l + col] : 0.0f;
    __syncthreads();
    for (int t = 0; t < TILE_WIDTH; ++t) sum += Mds[ty][t] * Nds[t][tx];
    __syncthreads();
  }
  if (row < j && col < l) P[row * l + col] = sum;
}

void launchRectangular(const float* M, const float* N, float* P, int j, int k, int l) {
  dim3 block(TILE_WIDTH, TILE_WIDTH);
  dim3 grid((j + TILE_WIDTH - 1) / TILE_WIDTH, (l + TILE_WIDTH - 1) / TILE_WIDTH);  // P is j x l
  rectangularKernel<<<grid, block>>>(M, N, P, j, k, l);
}
