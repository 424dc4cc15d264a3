// tiled.cu: P = M * N for square matrices, with tiles staged in shared memory.
//
// Contract (the grader depends on it; keep the launcher's name and signature):
//   void launchTiled(const float* M, const float* N, float* P, int Width);
//   M, N and P are device pointers to Width x Width row-major float matrices.
//   In this part Width is always a multiple of 32, so no bounds checks are
//   needed (the next part, boundary.cu, removes that assumption). The
//   launcher starts its kernel(s) on the default stream and returns without
//   synchronizing.
//
// The idea: in the naive kernel every thread reads a whole row of M and a
// whole column of N from global memory, so each input element is fetched
// Width times. Here a block of TILE_WIDTH x TILE_WIDTH threads computes a
// TILE_WIDTH x TILE_WIDTH tile of P in phases. In each phase the block copies
// one tile of M and one tile of N into shared memory (each thread copies one
// element of each), then every thread reads what it needs from there. Each
// element fetched from global memory now serves TILE_WIDTH threads, so global
// traffic falls by a factor of TILE_WIDTH: 0.25 FLOP per byte becomes
// TILE_WIDTH / 4 = 8 FLOP per byte.
//
// Build and run: see README.md ("Build and run one part").
#include "tilelab/part.h"

constexpr int TILE_WIDTH = 32;  // a 32 x 32 block: 1024 threads, 8 KB of tiles

__global__ void tiledKernel(const float* M, const float* N, float* P, int Width) {
  __shared__ float Mds[TILE_WIDTH][TILE_WIDTH];
  __shared__ float Nds[TILE_WIDTH][TILE_WIDTH];
  // TODO(student): Loop over the Width / TILE_WIDTH phases. In each, every thread copies
  //   one element of the current tile of M into Mds and one of N into Nds,
  //   the block waits until both tiles are complete, every thread adds the
  //   tile's TILE_WIDTH products to its sum, and the block waits again
  //   before the next phase overwrites the tiles. Then write the sum to P.
  TILELAB_DEVICE_TODO("tiledKernel: compute a tile of P through shared memory");
}

void launchTiled(const float* M, const float* N, float* P, int Width) {
  // TODO(student): One TILE_WIDTH x TILE_WIDTH block per tile of P (Width is a multiple
  //   of TILE_WIDTH here), then launch tiledKernel.
  TILELAB_TODO("launchTiled: choose the grid and launch tiledKernel");
}
