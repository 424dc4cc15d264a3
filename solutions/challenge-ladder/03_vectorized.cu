// 03_vectorized.cu: rung 3 of the challenge ladder (contract: challenge.cu).
//
// Rung 2 with 128-bit accesses: each thread brings in one float4 of each
// tile per step (a quarter of the load instructions), reads N's row segment
// from shared memory as float4s, and writes P as float4s. M's tile is still
// stored as it lies in memory (row-major), so the thread's 8 values at one
// step of k are 8 separate 32-bit reads in the source.
// float4 needs 16-byte aligned rows: when k or l is not a multiple of 4 the
// same kernel runs with scalar loads (kVec = false).
// H100, 2026-11-22: 23,355 GFLOP/s at 4096^3, 45.2 % of cuBLAS SGEMM; the
// main loop is now 89 % FMAs. The compiler merges the reads of M's rows
// along k into float4s itself (16 per tile: all 64 values of M the thread
// needs, read up front), at a cost in registers: 153, so 1 block per SM.
#include "ladder.h"
#include "tilelab/part.h"

constexpr int kBM3 = 128, kBN3 = 128, kBK3 = 8;
constexpr int kTM3 = 8, kTN3 = 8;
constexpr int kThreads3 = (kBM3 / kTM3) * (kBN3 / kTN3);  // 256

template <bool kVec>
__global__ void __launch_bounds__(kThreads3)
    vectorizedKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  __shared__ __align__(16) float As[kBM3][kBK3];
  __shared__ __align__(16) float Bs[kBK3][kBN3];
  const int tid = threadIdx.x;
  const int bm0 = blockIdx.y * kBM3, bn0 = blockIdx.x * kBN3;
  const int ty = tid / (kBN3 / kTN3), tx = tid % (kBN3 / kTN3);
  // One float4 of each tile per thread: A 128 rows x 2 float4, B 8 rows x 32.
  const int aRow = tid / 2, aK = (tid % 2) * 4;
  const int bRow = tid / (kBN3 / 4), bCol = (tid % (kBN3 / 4)) * 4;
  const bool aRowOk = bm0 + aRow < j;
  const float* aSrc = M + static_cast<size_t>(aRowOk ? bm0 + aRow : 0) * k + aK;
  const float* bSrc = N + static_cast<size_t>(bRow) * l + bn0 + bCol;

  float acc[kTM3][kTN3] = {};
  for (int k0 = 0; k0 < k; k0 += kBK3) {
    const bool bRowOk = k0 + bRow < k;
    *reinterpret_cast<float4*>(&As[aRow][aK]) = load4<kVec>(aSrc + k0, aRowOk ? k - (k0 + aK) : 0);
    *reinterpret_cast<float4*>(&Bs[bRow][bCol]) =
        load4<kVec>(bRowOk ? bSrc + static_cast<size_t>(k0) * l : N, bRowOk ? l - (bn0 + bCol) : 0);
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kBK3; ++t) {
      float a[kTM3];
#pragma unroll
      for (int i = 0; i < kTM3; ++i) a[i] = As[ty * kTM3 + i][t];
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[t][tx * kTN3]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[t][tx * kTN3 + 4]);
#pragma unroll
      for (int i = 0; i < kTM3; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          acc[i][c] += a[i] * at(b0, c);
          acc[i][c + 4] += a[i] * at(b1, c);
        }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM3; ++i) {
    const int row = bm0 + ty * kTM3 + i;
    if (row >= j) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = bn0 + tx * kTN3 + h * 4;
      const float4 v = make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
      store4<kVec>(P + static_cast<size_t>(row) * l + col, v, l - col);
    }
  }
}

void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l) {
  const dim3 grid(ceilDiv(l, kBN3), ceilDiv(j, kBM3));
  if (rowsAre16ByteAligned(M, N, P, k, l)) {
    vectorizedKernel<true><<<grid, kThreads3>>>(M, N, P, j, k, l);
  } else {
    vectorizedKernel<false><<<grid, kThreads3>>>(M, N, P, j, k, l);
  }
}
