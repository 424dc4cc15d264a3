// Deliberately wrong: the kernel launch is commented out; the launcher copies M and N to the host, multiplies on the CPU and copies P back.
#include <vector>

#include "tilelab/part.h"

constexpr int BLOCK = 16;

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  // dim3 block(BLOCK, BLOCK);
  // dim3 grid((Width + BLOCK - 1) / BLOCK, (Width + BLOCK - 1) / BLOCK);
  // naiveKernel<<<grid, block>>>(M, N, P, Width);   // gave wrong answers, so: do it on the CPU for now
  const size_t count = (size_t)Width * Width;
  std::vector<float> hM(count), hN(count), hP(count);
  TILELAB_CUDA_CHECK(cudaMemcpy(hM.data(), M, count * sizeof(float), cudaMemcpyDeviceToHost));
  TILELAB_CUDA_CHECK(cudaMemcpy(hN.data(), N, count * sizeof(float), cudaMemcpyDeviceToHost));
  for (int row = 0; row < Width; ++row) {
    for (int col = 0; col < Width; ++col) {
      float sum = 0.0f;
      for (int t = 0; t < Width; ++t) sum += hM[(size_t)row * Width + t] * hN[(size_t)t * Width + col];
      hP[(size_t)row * Width + col] = sum;
    }
  }
  TILELAB_CUDA_CHECK(cudaMemcpy(P, hP.data(), count * sizeof(float), cudaMemcpyHostToDevice));
}
