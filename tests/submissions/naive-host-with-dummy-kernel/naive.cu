// Deliberately wrong: computes P on the CPU between copies, and launches an empty kernel so that "a kernel ran".
#include <vector>

#include "tilelab/part.h"

__global__ void naiveKernel() {}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  const size_t count = (size_t)Width * Width;
  std::vector<float> hM(count), hN(count), hP(count, 0.0f);
  TILELAB_CUDA_CHECK(cudaMemcpy(hM.data(), M, count * sizeof(float), cudaMemcpyDeviceToHost));
  TILELAB_CUDA_CHECK(cudaMemcpy(hN.data(), N, count * sizeof(float), cudaMemcpyDeviceToHost));

  // i-k-j order: the inner loop walks rows of N and P contiguously.
  for (int row = 0; row < Width; ++row) {
    float* pRow = &hP[(size_t)row * Width];
    for (int t = 0; t < Width; ++t) {
      const float m = hM[(size_t)row * Width + t];
      const float* nRow = &hN[(size_t)t * Width];
      for (int col = 0; col < Width; ++col) pRow[col] += m * nRow[col];
    }
  }
  TILELAB_CUDA_CHECK(cudaMemcpy(P, hP.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  naiveKernel<<<1, 1>>>();
}
