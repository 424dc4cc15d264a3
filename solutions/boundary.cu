// boundary.cu: the tiled product for any Width, with boundary checks.
//
// Contract (the grader depends on it; keep the launcher's name and signature):
//   void launchBoundary(const float* M, const float* N, float* P, int Width);
//   M, N and P are device pointers to Width x Width row-major float matrices.
//   Width can be any value >= 1: 1, 17 and 1000 all have to work. The
//   launcher starts its kernel(s) on the default stream and returns without
//   synchronizing.
//
// The idea: the tiled kernel of tiled.cu, made safe when Width is not a
// multiple of TILE_WIDTH. Three things change:
//   - the number of phases is rounded up, so the last partial tile is used;
//   - a thread whose element of a tile lies outside M or N stores 0.0 in
//     shared memory instead of loading it: a zero adds nothing to a dot
//     product, so the inner loop needs no test;
//   - only threads inside P write their result.
// Threads outside P still load tiles and reach every barrier: they hold
// elements that threads inside P need, and a __syncthreads() that some
// threads of the block skip is undefined behaviour.
//
// Build and run: see README.md ("Build and run one part").
#include "tilelab/part.h"

constexpr int TILE_WIDTH = 32;

__global__ void boundaryKernel(const float* M, const float* N, float* P, int Width) {
  __shared__ float Mds[TILE_WIDTH][TILE_WIDTH];
  __shared__ float Nds[TILE_WIDTH][TILE_WIDTH];
  // BEGIN SOLUTION
  // HINT: Start from your tiled kernel. Round the number of phases up. When the
  // HINT: element a thread would load lies outside M (or N), store 0.0f in the
  // HINT: tile instead. Every thread takes part in every phase and barrier;
  // HINT: only threads inside P write their result.
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int row = blockIdx.y * TILE_WIDTH + ty;
  const int col = blockIdx.x * TILE_WIDTH + tx;

  float sum = 0.0f;
  const int phases = (Width + TILE_WIDTH - 1) / TILE_WIDTH;
  for (int phase = 0; phase < phases; ++phase) {
    const int mCol = phase * TILE_WIDTH + tx;  // column of M this thread loads
    const int nRow = phase * TILE_WIDTH + ty;  // row of N this thread loads
    Mds[ty][tx] = (row < Width && mCol < Width) ? M[row * Width + mCol] : 0.0f;
    Nds[ty][tx] = (nRow < Width && col < Width) ? N[nRow * Width + col] : 0.0f;
    __syncthreads();  // read-after-write: the tiles are complete
    for (int t = 0; t < TILE_WIDTH; ++t) {
      sum += Mds[ty][t] * Nds[t][tx];
    }
    __syncthreads();  // write-after-read: everyone is done with the tiles
  }
  if (row < Width && col < Width) {
    P[row * Width + col] = sum;
  }
  // END SOLUTION
  // STUB: TILELAB_DEVICE_TODO("boundaryKernel: the tiled product with boundary checks");
}

void launchBoundary(const float* M, const float* N, float* P, int Width) {
  // BEGIN SOLUTION
  // HINT: As for the tiled part, but round the number of blocks up so the
  // HINT: blocks cover P even when Width is not a multiple of TILE_WIDTH.
  const dim3 block(TILE_WIDTH, TILE_WIDTH);
  const int tiles = (Width + TILE_WIDTH - 1) / TILE_WIDTH;
  const dim3 grid(tiles, tiles);
  boundaryKernel<<<grid, block>>>(M, N, P, Width);
  // END SOLUTION
  // STUB: TILELAB_TODO("launchBoundary: choose the grid and launch boundaryKernel");
}
