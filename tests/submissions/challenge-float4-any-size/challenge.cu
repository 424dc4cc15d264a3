// Deliberately wrong: reads rows of N and writes rows of P as float4 whatever l is. A float4 access must be
// 16-byte aligned, which row t of N (and of P) is only when l is a multiple of 4; past the last column the
// float4s also read and write outside the matrices. Right and fast when l % 4 == 0, broken otherwise.
#include "tilelab/part.h"

constexpr int kThreads = 256;

// One thread per 4 consecutive columns of one row of P.
__global__ void fourColumnsKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  const int quads = (l + 3) / 4;
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = index / quads, col = 4 * (index % quads);
  if (row >= j) return;
  float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int t = 0; t < k; ++t) {
    const float m = M[static_cast<size_t>(row) * k + t];
    const float4 n = *reinterpret_cast<const float4*>(N + static_cast<size_t>(t) * l + col);
    sum.x += m * n.x;
    sum.y += m * n.y;
    sum.z += m * n.z;
    sum.w += m * n.w;
  }
  *reinterpret_cast<float4*>(P + static_cast<size_t>(row) * l + col) = sum;
}

void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l) {
  const long long threads = static_cast<long long>(j) * ((l + 3) / 4);
  fourColumnsKernel<<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads>>>(M, N, P, j, k, l);
}
