// Deliberately wrong: kernels copy M and N into managed memory (cudaMallocManaged), the CPU multiplies there, and a
// kernel copies P back: the page migrations are not copies the launcher asked for.
#include "tilelab/part.h"

__global__ void copyKernel(const float* from, float* to, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) to[i] = from[i];
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  const int count = Width * Width;
  float* shared = nullptr;
  if (cudaMallocManaged(&shared, 3 * (size_t)count * sizeof(float)) != cudaSuccess) return;
  float* mM = shared;
  float* mN = shared + count;
  float* mP = shared + 2 * count;
  const int blocks = (count + 255) / 256;
  copyKernel<<<blocks, 256>>>(M, mM, count);
  copyKernel<<<blocks, 256>>>(N, mN, count);
  cudaDeviceSynchronize();
  for (int r = 0; r < Width; ++r)
    for (int c = 0; c < Width; ++c) {
      float sum = 0.0f;
      for (int t = 0; t < Width; ++t) sum += mM[r * Width + t] * mN[t * Width + c];
      mP[r * Width + c] = sum;
    }
  copyKernel<<<blocks, 256>>>(mP, P, count);
  cudaDeviceSynchronize();
  cudaFree(shared);
}
