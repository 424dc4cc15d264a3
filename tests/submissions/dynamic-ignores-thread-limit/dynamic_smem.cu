// Deliberately wrong: square T x T dynamic tiles, T picked at run time from part of prop only.
#include "tilelab/part.h"

__global__ void dynSquare(const float* M, const float* N, float* P, int j, int k, int l) {
  extern __shared__ float smem[];
  const int T = blockDim.x;     // the block is T x T
  float* Mds = smem;            // T * T floats
  float* Nds = smem + T * T;    // the next T * T floats (an offset in floats, not bytes)

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * T + ty;
  const int col = blockIdx.x * T + tx;

  float sum = 0.0f;
  for (int p = 0; p < k; p += T) {
    Mds[ty * T + tx] = (row < j && p + tx < k) ? M[row * k + p + tx] : 0.0f;
    Nds[ty * T + tx] = (p + ty < k && col < l) ? N[(p + ty) * l + col] : 0.0f;
    __syncthreads();
    for (int s = 0; s < T; ++s) sum += Mds[ty * T + s] * Nds[s * T + tx];
    __syncthreads();
  }
  if (row < j && col < l) P[row * l + col] = sum;
}

// Deliberately wrong: the largest T <= 32 whose two T x T float tiles fit
// sharedMemPerBlock; the block's threads are never held to prop.maxThreadsPerBlock
// (nor prop.maxThreadsDim): where a case lowers it to 256, a 32 x 32 block still runs
// on this GPU, but it is 1,024 threads.
static int pickTile(const cudaDeviceProp& prop) {
  int T = 32;
  while (T > 1 && 2 * (size_t)T * T * sizeof(float) > prop.sharedMemPerBlock) {
    --T;
  }
  return T;
}

void launchDynamicSmem(const float* M, const float* N, float* P, int j, int k, int l, const cudaDeviceProp& prop) {
  const int T = pickTile(prop);
  const size_t bytes = 2 * (size_t)T * T * sizeof(float);  // at most 8 KB: no opt-in needed
  dim3 block(T, T);
  dim3 grid((l + T - 1) / T, (j + T - 1) / T);
  dynSquare<<<grid, block, bytes>>>(M, N, P, j, k, l);
}
