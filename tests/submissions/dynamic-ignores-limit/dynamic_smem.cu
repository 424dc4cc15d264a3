// Deliberately wrong: uses dynamic shared memory, but always asks for two 32 x 32 tiles (8 KB) whatever prop allows.
#include "tilelab/part.h"

constexpr int T = 32;

__global__ void dynamicSmemKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  extern __shared__ float buffer[];
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
    for (int s = 0; s < T; ++s) sum += Mds[ty * T + s] * Nds[s * T + tx];
    __syncthreads();
  }
  if (row < j && col < l) P[row * l + col] = sum;
}

void launchDynamicSmem(const float* M, const float* N, float* P, int j, int k, int l, const cudaDeviceProp& prop) {
  // The GPU has far more than 8 KB per block, so there is no need to look at prop.
  (void)prop;
  const size_t bytes = 2 * T * T * sizeof(float);
  dim3 block(T, T);
  dim3 grid((l + T - 1) / T, (j + T - 1) / T);
  dynamicSmemKernel<<<grid, block, bytes>>>(M, N, P, j, k, l);
}
