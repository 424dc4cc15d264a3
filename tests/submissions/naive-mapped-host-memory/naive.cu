// Deliberately wrong: kernels copy M and N into mapped pinned host memory (cudaHostAlloc), the CPU multiplies, and a
// kernel copies P back: no host-device copy is ever recorded.
#include "tilelab/part.h"

__global__ void copyKernel(const float* from, float* to, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) to[i] = from[i];
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  const int count = Width * Width;
  float* host = nullptr;
  if (cudaHostAlloc(&host, 3 * (size_t)count * sizeof(float), cudaHostAllocMapped) != cudaSuccess) return;
  float* hM = host;
  float* hN = host + count;
  float* hP = host + 2 * count;
  const int blocks = (count + 255) / 256;
  copyKernel<<<blocks, 256>>>(M, hM, count);
  copyKernel<<<blocks, 256>>>(N, hN, count);
  cudaDeviceSynchronize();
  for (int i = 0; i < count; ++i) hP[i] = 0.0f;
  for (int r = 0; r < Width; ++r)
    for (int t = 0; t < Width; ++t)
      for (int c = 0; c < Width; ++c) hP[r * Width + c] += hM[r * Width + t] * hN[t * Width + c];
  copyKernel<<<blocks, 256>>>(hP, P, count);
  cudaDeviceSynchronize();
  cudaFreeHost(host);
}
