// rectangular.cu: the tiled product of a j x k matrix and a k x l matrix.
//
// Contract (the grader depends on it; keep the launcher's name and signature):
//   void launchRectangular(const float* M, const float* N, float* P, int j, int k, int l);
//   M is j x k, N is k x l and P = M * N is j x l, all row-major float
//   matrices in device memory: M(r, t) = M[r * k + t], N(t, c) = N[t * l + c],
//   P(r, c) = P[r * l + c]. Each of j, k and l can be any value >= 1, k = 1
//   and vectors (j = 1 or l = 1) included. The launcher starts its kernel(s)
//   on the default stream and returns without synchronizing.
//
// The idea: boundary.cu with Width split into its three roles. Every index
// and every bound now names which dimension it belongs to:
//   rows of M and P        run over j
//   the dot product        runs over k (columns of M, rows of N)
//   columns of N and P     run over l
// and the row stride of a matrix is its number of columns: k for M, l for N
// and P. Mixing these up still works when j == k == l, which is why the
// grader tries all six orders of three different sizes.
//
// Build and run: see README.md ("Build and run one part").
#include "tilelab/part.h"

constexpr int TILE_WIDTH = 32;

__global__ void rectangularKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  __shared__ float Mds[TILE_WIDTH][TILE_WIDTH];
  __shared__ float Nds[TILE_WIDTH][TILE_WIDTH];
  // BEGIN SOLUTION
  // HINT: Start from your boundary kernel and give every use of Width its real
  // HINT: dimension: rows are bounded by j, columns by l, the phases and the
  // HINT: dot product by k; the row stride is k in M and l in N and P.
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int row = blockIdx.y * TILE_WIDTH + ty;  // a row of M and of P: < j
  const int col = blockIdx.x * TILE_WIDTH + tx;  // a column of N and of P: < l

  float sum = 0.0f;
  const int phases = (k + TILE_WIDTH - 1) / TILE_WIDTH;
  for (int phase = 0; phase < phases; ++phase) {
    const int mCol = phase * TILE_WIDTH + tx;  // < k
    const int nRow = phase * TILE_WIDTH + ty;  // < k
    Mds[ty][tx] = (row < j && mCol < k) ? M[row * k + mCol] : 0.0f;
    Nds[ty][tx] = (nRow < k && col < l) ? N[nRow * l + col] : 0.0f;
    __syncthreads();  // read-after-write: the tiles are complete
    for (int t = 0; t < TILE_WIDTH; ++t) {
      sum += Mds[ty][t] * Nds[t][tx];
    }
    __syncthreads();  // write-after-read: everyone is done with the tiles
  }
  if (row < j && col < l) {
    P[row * l + col] = sum;
  }
  // END SOLUTION
  // STUB: TILELAB_DEVICE_TODO("rectangularKernel: the tiled product for j x k times k x l");
}

void launchRectangular(const float* M, const float* N, float* P, int j, int k, int l) {
  // BEGIN SOLUTION
  // HINT: P is j x l: x (columns) needs enough blocks for l, y (rows) for j.
  const dim3 block(TILE_WIDTH, TILE_WIDTH);
  const dim3 grid((l + TILE_WIDTH - 1) / TILE_WIDTH, (j + TILE_WIDTH - 1) / TILE_WIDTH);
  rectangularKernel<<<grid, block>>>(M, N, P, j, k, l);
  // END SOLUTION
  // STUB: TILELAB_TODO("launchRectangular: choose the grid and launch rectangularKernel");
}
