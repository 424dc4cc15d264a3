// Deliberately wrong: the tiles are static __shared__ 32 x 32 arrays; no dynamic shared memory is used and prop is ignored.
#include "tilelab/part.h"

#define TILE 32

__global__ void dynamicSmemKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  __shared__ float Mds[TILE][TILE];
  __shared__ float Nds[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty;
  int col = blockIdx.x * TILE + tx;

  float sum = 0.0f;
  for (int p = 0; p < k; p += TILE) {
    Mds[ty][tx] = (row < j && p + tx < k) ? M[row * k + p + tx] : 0.0f;
    Nds[ty][tx] = (p + ty < k && col < l) ? N[(p + ty) * l + col] : 0.0f;
    __syncthreads();
    for (int s = 0; s < TILE; ++s) sum += Mds[ty][s] * Nds[s][tx];
    __syncthreads();
  }
  if (row < j && col < l) P[row * l + col] = sum;
}

void launchDynamicSmem(const float* M, const float* N, float* P, int j, int k, int l, const cudaDeviceProp& prop) {
  (void)prop;
  dim3 block(TILE, TILE);
  dim3 grid((l + TILE - 1) / TILE, (j + TILE - 1) / TILE);
  dynamicSmemKernel<<<grid, block>>>(M, N, P, j, k, l);
}
