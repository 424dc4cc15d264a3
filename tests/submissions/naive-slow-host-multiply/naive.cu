// Deliberately wrong: a right naive kernel at every size the correctness cases use, but from Width 1024 on (the
// timing size) the launcher copies M and N to the host, multiplies there and copies P back: at 4096 that is minutes
// of host arithmetic in every call.
#include <vector>

#include "tilelab/part.h"

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  if (Width < 1024) {
    const dim3 block(16, 16);
    const dim3 grid((Width + 15) / 16, (Width + 15) / 16);
    naiveKernel<<<grid, block>>>(M, N, P, Width);
    return;
  }
  const size_t count = (size_t)Width * Width;
  std::vector<float> hM(count), hN(count), hP(count, 0.0f);
  TILELAB_CUDA_CHECK(cudaMemcpy(hM.data(), M, count * sizeof(float), cudaMemcpyDeviceToHost));
  TILELAB_CUDA_CHECK(cudaMemcpy(hN.data(), N, count * sizeof(float), cudaMemcpyDeviceToHost));
  // Row by row in j-k-l order: each product walks a column of N, Width floats apart.
  for (int row = 0; row < Width; ++row) {
    for (int col = 0; col < Width; ++col) {
      float sum = 0.0f;
      for (int t = 0; t < Width; ++t) sum += hM[(size_t)row * Width + t] * hN[(size_t)t * Width + col];
      hP[(size_t)row * Width + col] = sum;
    }
  }
  TILELAB_CUDA_CHECK(cudaMemcpy(P, hP.data(), count * sizeof(float), cudaMemcpyHostToDevice));
}
