// 04_transposed.cu: rung 4 of the challenge ladder (contract: challenge.cu).
//
// Rung 3 with M's tile stored transposed in shared memory, As[k][row]: the 8
// values of M a thread needs at one step of k are now consecutive: two
// 128-bit shared loads, issued when they are needed. Each row of As is
// padded by 4 floats so that the transposing stores (two threads per row of
// M, at k and k + 4) fall into different banks; 4 floats keep every row
// 16-byte aligned for the float4 reads.
// H100, 2026-11-22: 32,418 GFLOP/s at 4096^3, 62.8 % of cuBLAS SGEMM. Much
// of the gain is likely occupancy: with M's 8 values read per step rather
// than the tile's 64 up front, the kernel needs 117 registers instead of
// 153, so two blocks fit on an SM (16 warps to hide latencies, not 8).
#include "ladder.h"
#include "tilelab/part.h"

constexpr int kBM4 = 128, kBN4 = 128, kBK4 = 8;
constexpr int kTM4 = 8, kTN4 = 8;
constexpr int kThreads4 = (kBM4 / kTM4) * (kBN4 / kTN4);  // 256
constexpr int kAStride4 = kBM4 + 4;                        // padded row of the transposed tile

template <bool kVec>
__global__ void __launch_bounds__(kThreads4)
    transposedKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  __shared__ __align__(16) float As[kBK4][kAStride4];  // transposed: As[k][row]
  __shared__ __align__(16) float Bs[kBK4][kBN4];
  const int tid = threadIdx.x;
  const int bm0 = blockIdx.y * kBM4, bn0 = blockIdx.x * kBN4;
  const int ty = tid / (kBN4 / kTN4), tx = tid % (kBN4 / kTN4);
  // One float4 of each tile per thread: A 128 rows x 2 float4, B 8 rows x 32.
  const int aRow = tid / 2, aK = (tid % 2) * 4;
  const int bRow = tid / (kBN4 / 4), bCol = (tid % (kBN4 / 4)) * 4;
  const bool aRowOk = bm0 + aRow < j;
  const float* aSrc = M + static_cast<size_t>(aRowOk ? bm0 + aRow : 0) * k + aK;
  const float* bSrc = N + static_cast<size_t>(bRow) * l + bn0 + bCol;

  float acc[kTM4][kTN4] = {};
  for (int k0 = 0; k0 < k; k0 += kBK4) {
    const bool bRowOk = k0 + bRow < k;
    const float4 a4 = load4<kVec>(aSrc + k0, aRowOk ? k - (k0 + aK) : 0);
    As[aK + 0][aRow] = a4.x;
    As[aK + 1][aRow] = a4.y;
    As[aK + 2][aRow] = a4.z;
    As[aK + 3][aRow] = a4.w;
    *reinterpret_cast<float4*>(&Bs[bRow][bCol]) =
        load4<kVec>(bRowOk ? bSrc + static_cast<size_t>(k0) * l : N, bRowOk ? l - (bn0 + bCol) : 0);
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kBK4; ++t) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[t][ty * kTM4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[t][ty * kTM4 + 4]);
      const float a[kTM4] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[t][tx * kTN4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[t][tx * kTN4 + 4]);
#pragma unroll
      for (int i = 0; i < kTM4; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          acc[i][c] += a[i] * at(b0, c);
          acc[i][c + 4] += a[i] * at(b1, c);
        }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kTM4; ++i) {
    const int row = bm0 + ty * kTM4 + i;
    if (row >= j) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = bn0 + tx * kTN4 + h * 4;
      const float4 v = make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
      store4<kVec>(P + static_cast<size_t>(row) * l + col, v, l - col);
    }
  }
}

void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l) {
  const dim3 grid(ceilDiv(l, kBN4), ceilDiv(j, kBM4));
  if (rowsAre16ByteAligned(M, N, P, k, l)) {
    transposedKernel<true><<<grid, kThreads4>>>(M, N, P, j, k, l);
  } else {
    transposedKernel<false><<<grid, kThreads4>>>(M, N, P, j, k, l);
  }
}
