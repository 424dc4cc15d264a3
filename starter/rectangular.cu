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
  // TODO(student): Start from your boundary kernel and give every use of Width its real
  //   dimension: rows are bounded by j, columns by l, the phases and the
  //   dot product by k; the row stride is k in M and l in N and P.
  TILELAB_DEVICE_TODO("rectangularKernel: the tiled product for j x k times k x l");
}

void launchRectangular(const float* M, const float* N, float* P, int j, int k, int l) {
  // TODO(student): P is j x l: x (columns) needs enough blocks for l, y (rows) for j.
  TILELAB_TODO("launchRectangular: choose the grid and launch rectangularKernel");
}
