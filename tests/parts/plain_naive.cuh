// The plain naive product that the probes which are right but slow launch.
#pragma once

__global__ void plainKernel(const float* M, const float* N, float* P, int Width) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

inline void launchPlain(const float* M, const float* N, float* P, int Width) {
  const dim3 block(16, 16);
  const dim3 grid((Width + 15) / 16, (Width + 15) / 16);
  plainKernel<<<grid, block>>>(M, N, P, Width);
}
