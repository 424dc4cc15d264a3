// naive.cu: P = M * N for square matrices, one thread per element of P.
//
// Contract (the grader depends on it; keep the launcher's name and signature):
//   void launchNaive(const float* M, const float* N, float* P, int Width);
//   M, N and P are device pointers to Width x Width float matrices stored
//   row-major: element (r, c) of M is M[r * Width + c]. Width can be any
//   value >= 1. The launcher starts its kernel(s) on the default stream and
//   returns without synchronizing; the harness waits for the result.
//
// The idea: element (row, col) of P is the dot product of row `row` of M and
// column `col` of N, and each thread computes one of them. A 2-D grid of 2-D
// blocks covers P. The column comes from the x index because the 32 threads
// of a warp have consecutive threadIdx.x: in each step of the dot product
// they read 32 neighbouring floats of the same row of N, which the memory
// system serves as one wide (coalesced) access. Swapping the roles of x and y
// makes the warp read 32 floats that lie Width apart: same answer, several
// times slower.
//
// Build and run: see README.md ("Build and run one part").
#include "tilelab/part.h"

constexpr int BLOCK_WIDTH = 16;  // 16 x 16 = 256 threads per block

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  // TODO(student): Compute this thread's row of P from the y indices and its column from
  //   the x indices. The grid is rounded up to whole blocks, so threads past
  //   the edge of P must not read or write. Sum M[row][t] * N[t][col] over t.
  TILELAB_DEVICE_TODO("naiveKernel: compute one element of P per thread");
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  // TODO(student): Use BLOCK_WIDTH x BLOCK_WIDTH threads per block and enough blocks to
  //   cover every element of P. Round the block count up: with integers,
  //   (Width + BLOCK_WIDTH - 1) / BLOCK_WIDTH, not ceil(Width / BLOCK_WIDTH).
  TILELAB_TODO("launchNaive: choose the grid and launch naiveKernel");
}
