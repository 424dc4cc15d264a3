// Deliberately wrong: the inner product reads Nds[tx * T + s] instead of Nds[s * T + tx] (the N tile is read transposed).
#include "tilelab/part.h"

__global__ void dynamicSmemKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  extern __shared__ float buffer[];
  const int T = blockDim.x;
  float* Mds = buffer;
  float* Nds = buffer + T * T;

  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty;
  int col = blockIdx.x * T + tx;
  float sum = 0.0f;
  for (int p = 0; p < k; p += T) {
    Mds[ty * T + tx] = (row < j && p + tx < k) ? M[row * k + p + tx] : 0.0f;
    Nds[ty * T + tx] = (p + ty < k && col < l) ? N[(p + ty) * l + col] : 0.0f;
    __syncthreads();
    for (int s = 0; s < T; ++s) sum += Mds[ty * T + s] * Nds[tx * T + s];
    __syncthreads();
  }
  if (row < j && col < l) P[row * l + col] = sum;
}

void launchDynamicSmem(const float* M, const float* N, float* P, int j, int k, int l, const cudaDeviceProp& prop) {
  int T = 32;
  while (T > 1 && (T * T > prop.maxThreadsPerBlock || T > prop.maxThreadsDim[0] || T > prop.maxThreadsDim[1] ||
                   2 * T * T * sizeof(float) > prop.sharedMemPerBlock)) {
    T /= 2;
  }
  const size_t bytes = 2 * T * T * sizeof(float);
  dim3 block(T, T);
  dim3 grid((l + T - 1) / T, (j + T - 1) / T);
  dynamicSmemKernel<<<grid, block, bytes>>>(M, N, P, j, k, l);
}
