// Deliberately wrong: rounds every operand to TF32's 10-bit mantissa before multiplying, as TF32 tensor
// cores do. The part asks for FP32: the error grows to about 2^-11 per product, hundreds of times the
// tolerance of an honest FP32 sum (16 sqrt(k) 2^-24). Exact on small integers, wrong on uniform inputs.
#include "tilelab/part.h"

constexpr int kTile = 16;

__device__ float toTf32(float x) {
  // Round to nearest on the 13 mantissa bits TF32 drops.
  return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
}

__global__ void tf32Kernel(const float* M, const float* N, float* P, int j, int k, int l) {
  const int row = blockIdx.y * kTile + threadIdx.y, col = blockIdx.x * kTile + threadIdx.x;
  if (row >= j || col >= l) return;
  float sum = 0.0f;
  for (int t = 0; t < k; ++t) {
    sum += toTf32(M[static_cast<size_t>(row) * k + t]) * toTf32(N[static_cast<size_t>(t) * l + col]);
  }
  P[static_cast<size_t>(row) * l + col] = sum;
}

void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l) {
  const dim3 block(kTile, kTile), grid((l + kTile - 1) / kTile, (j + kTile - 1) / kTile);
  tf32Kernel<<<grid, block>>>(M, N, P, j, k, l);
}
