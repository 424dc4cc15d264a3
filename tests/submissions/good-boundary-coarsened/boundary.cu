// Known good: boundary checks with thread coarsening; a 16 x 32 block computes a 32 x 32 tile of P, two columns per thread.
#include "tilelab/part.h"

constexpr int TILE = 32;         // the block's tile of P is TILE x TILE
constexpr int HALF = TILE / 2;   // threads per row of the block; each one owns columns tx and tx + HALF

__global__ void boundaryCoarsened(const float* M, const float* N, float* P, int Width) {
  // One float of padding per row of Ms: the two rows read by a warp fall in different banks.
  __shared__ float Ms[TILE][TILE + 1];
  __shared__ float Ns[TILE][TILE];

  const int tx = threadIdx.x;                   // 0 .. HALF-1
  const int ty = threadIdx.y;                   // 0 .. TILE-1
  const int row = blockIdx.y * TILE + ty;
  const int col0 = blockIdx.x * TILE + tx;      // first output column of this thread
  const int col1 = col0 + HALF;                 // second output column

  float acc0 = 0.0f, acc1 = 0.0f;
  const int phases = (Width + TILE - 1) / TILE;
  for (int ph = 0; ph < phases; ++ph) {
    const int mc0 = ph * TILE + tx, mc1 = mc0 + HALF;  // columns of M loaded by this thread
    const int nr = ph * TILE + ty;                     // row of N loaded by this thread
    Ms[ty][tx] = (row < Width && mc0 < Width) ? M[row * Width + mc0] : 0.0f;
    Ms[ty][tx + HALF] = (row < Width && mc1 < Width) ? M[row * Width + mc1] : 0.0f;
    Ns[ty][tx] = (nr < Width && col0 < Width) ? N[nr * Width + col0] : 0.0f;
    Ns[ty][tx + HALF] = (nr < Width && col1 < Width) ? N[nr * Width + col1] : 0.0f;
    __syncthreads();
    for (int t = 0; t < TILE; ++t) {
      const float m = Ms[ty][t];  // reused for both outputs
      acc0 += m * Ns[t][tx];
      acc1 += m * Ns[t][tx + HALF];
    }
    __syncthreads();
  }
  if (row < Width) {
    if (col0 < Width) P[row * Width + col0] = acc0;
    if (col1 < Width) P[row * Width + col1] = acc1;
  }
}

void launchBoundary(const float* M, const float* N, float* P, int Width) {
  const int tiles = (Width + TILE - 1) / TILE;
  boundaryCoarsened<<<dim3(tiles, tiles), dim3(HALF, TILE)>>>(M, N, P, Width);
}
