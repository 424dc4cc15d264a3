// 02_register_tiling.cu: rung 2 of the challenge ladder (contract: challenge.cu).
//
// Rung 1 with a 128 x 128 block tile and an 8 x 8 tile of P per thread, kept
// in registers. Per step of k a thread reads 8 values of M and 8 of N from
// shared memory and does 64 products with them (outer product), so
// shared-memory traffic falls to about 2N^3/8 floats, and global traffic to
// 2N^3/128. All loads are still 32-bit.
// H100, 2026-11-22: 16,222 GFLOP/s at 4096^3, 31.4 % of cuBLAS SGEMM: hardly
// more than rung 1, since the main loop is only 57 % FMAs (SASS); the rest
// is index arithmetic and bounds tests of the eight 32-bit loads per tile and
// thread (162 registers: 1 block of 8 warps per SM).
#include "ladder.h"
#include "tilelab/part.h"

constexpr int kBM2 = 128, kBN2 = 128, kBK2 = 8;
constexpr int kTM2 = 8, kTN2 = 8;                       // the thread's tile of P
constexpr int kThreads2 = (kBM2 / kTM2) * (kBN2 / kTN2);  // 256

__global__ void __launch_bounds__(kThreads2)
    registerTilingKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  __shared__ float As[kBM2][kBK2];
  __shared__ float Bs[kBK2][kBN2];
  const int tid = threadIdx.x;
  const int bm0 = blockIdx.y * kBM2, bn0 = blockIdx.x * kBN2;
  const int ty = tid / (kBN2 / kTN2), tx = tid % (kBN2 / kTN2);

  float acc[kTM2][kTN2] = {};
  for (int k0 = 0; k0 < k; k0 += kBK2) {
    // Each thread loads 4 elements of each tile (1024 / 256), consecutive
    // threads on consecutive addresses.
#pragma unroll
    for (int e = tid; e < kBM2 * kBK2; e += kThreads2) {
      const int r = e / kBK2, c = e % kBK2;
      As[r][c] = (bm0 + r < j && k0 + c < k) ? M[static_cast<size_t>(bm0 + r) * k + k0 + c] : 0.0f;
    }
#pragma unroll
    for (int e = tid; e < kBK2 * kBN2; e += kThreads2) {
      const int r = e / kBN2, c = e % kBN2;
      Bs[r][c] = (k0 + r < k && bn0 + c < l) ? N[static_cast<size_t>(k0 + r) * l + bn0 + c] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kBK2; ++t) {
      float a[kTM2], b[kTN2];
#pragma unroll
      for (int i = 0; i < kTM2; ++i) a[i] = As[ty * kTM2 + i][t];
#pragma unroll
      for (int c = 0; c < kTN2; ++c) b[c] = Bs[t][tx * kTN2 + c];
      // 64 products from 16 loaded values: the outer product of a and b.
#pragma unroll
      for (int i = 0; i < kTM2; ++i)
#pragma unroll
        for (int c = 0; c < kTN2; ++c) acc[i][c] += a[i] * b[c];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM2; ++i) {
    const int row = bm0 + ty * kTM2 + i;
#pragma unroll
    for (int c = 0; c < kTN2; ++c) {
      const int col = bn0 + tx * kTN2 + c;
      if (row < j && col < l) P[static_cast<size_t>(row) * l + col] = acc[i][c];
    }
  }
}

void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l) {
  const dim3 grid(ceilDiv(l, kBN2), ceilDiv(j, kBM2));
  registerTilingKernel<<<grid, kThreads2>>>(M, N, P, j, k, l);
}
