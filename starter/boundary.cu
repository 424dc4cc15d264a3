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
  // TODO(student): Start from your tiled kernel. Round the number of phases up. When the
  //   element a thread would load lies outside M (or N), store 0.0f in the
  //   tile instead. Every thread takes part in every phase and barrier;
  //   only threads inside P write their result.
  TILELAB_DEVICE_TODO("boundaryKernel: the tiled product with boundary checks");
}

void launchBoundary(const float* M, const float* N, float* P, int Width) {
  // TODO(student): As for the tiled part, but round the number of blocks up so the
  //   blocks cover P even when Width is not a multiple of TILE_WIDTH.
  TILELAB_TODO("launchBoundary: choose the grid and launch boundaryKernel");
}
