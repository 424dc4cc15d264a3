// 06_warp_tiling.cu: rung 6 of the challenge ladder (contract: challenge.cu).
//
// Rung 5 with the threads' tiles arranged by warp. In rungs 2 to 5 thread
// (ty, tx) owns the contiguous 8 x 8 block at (8ty, 8tx): the 16 lanes of a
// warp that differ in tx read N's row at a 32-byte stride, 512 bytes for one
// float4 per lane, which takes shared memory several passes. Here each warp
// owns a 64 x 32 tile of P (8 warps: 2 x 4), and each lane computes a 2 x 2
// grid of 4 x 4 sub-tiles spaced half the warp tile apart. Every float4 read
// of the warp then touches at most 8 distinct, consecutive float4s (128
// bytes, one pass through the 32 banks), the other lanes getting them by
// broadcast.
// H100, 2026-11-22: 36,843 GFLOP/s at 4096^3, 71.3 % of cuBLAS SGEMM (141
// registers: 1 block of 8 warps per SM). The reference (challenge.cu) goes
// on from here.
#include "ladder.h"
#include "tilelab/part.h"

constexpr int kBM6 = 128, kBN6 = 128, kBK6 = 8;
constexpr int kWM6 = 64, kWN6 = 32;              // a warp's tile of P
constexpr int kLanesN6 = 4;                      // lanes across the warp tile (8 down)
constexpr int kThreads6 = (kBM6 / kWM6) * (kBN6 / kWN6) * 32;  // 256
constexpr int kAStride6 = kBM6 + 4;

template <bool kVec>
__global__ void __launch_bounds__(kThreads6)
    warpTilingKernel(const float* M, const float* N, float* P, int j, int k, int l) {
  __shared__ __align__(16) float As[2][kBK6][kAStride6];
  __shared__ __align__(16) float Bs[2][kBK6][kBN6];
  const int tid = threadIdx.x;
  const int bm0 = blockIdx.y * kBM6, bn0 = blockIdx.x * kBN6;
  const int warp = tid / 32, lane = tid % 32;
  // The lane's first row and column in the block tile; its sub-tiles lie at
  // +0 / +kWM6 / 2 down and +0 / +kWN6 / 2 across.
  const int tm0 = (warp / (kBN6 / kWN6)) * kWM6 + (lane / kLanesN6) * 4;
  const int tn0 = (warp % (kBN6 / kWN6)) * kWN6 + (lane % kLanesN6) * 4;
  const int aRow = tid / 2, aK = (tid % 2) * 4;
  const int bRow = tid / (kBN6 / 4), bCol = (tid % (kBN6 / 4)) * 4;
  const bool aRowOk = bm0 + aRow < j;
  const float* aSrc = M + static_cast<size_t>(aRowOk ? bm0 + aRow : 0) * k + aK;
  const float* bSrc = N + static_cast<size_t>(bRow) * l + bn0 + bCol;

  float4 aNext, bNext;
  const auto fetch = [&](int k0) {
    const bool bRowOk = k0 + bRow < k;
    aNext = load4<kVec>(aSrc + k0, aRowOk ? k - (k0 + aK) : 0);
    bNext = load4<kVec>(bRowOk ? bSrc + static_cast<size_t>(k0) * l : N, bRowOk ? l - (bn0 + bCol) : 0);
  };
  const auto stash = [&](int buf) {
    As[buf][aK + 0][aRow] = aNext.x;
    As[buf][aK + 1][aRow] = aNext.y;
    As[buf][aK + 2][aRow] = aNext.z;
    As[buf][aK + 3][aRow] = aNext.w;
    *reinterpret_cast<float4*>(&Bs[buf][bRow][bCol]) = bNext;
  };

  float acc[8][8] = {};  // rows tm0 + {0..3, WM/2 + 0..3}, columns tn0 + {0..3, WN/2 + 0..3}
  fetch(0);
  stash(0);
  __syncthreads();
  int buf = 0;
  for (int k0 = 0; k0 < k; k0 += kBK6) {
    fetch(k0 + kBK6);
#pragma unroll
    for (int t = 0; t < kBK6; ++t) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][t][tm0]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][t][tm0 + kWM6 / 2]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][t][tn0]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][t][tn0 + kWN6 / 2]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          acc[i][c] += a[i] * at(b0, c);
          acc[i][c + 4] += a[i] * at(b1, c);
        }
    }
    stash(buf ^ 1);
    __syncthreads();
    buf ^= 1;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = bm0 + tm0 + (i / 4) * (kWM6 / 2) + i % 4;
    if (row >= j) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = bn0 + tn0 + h * (kWN6 / 2);
      const float4 v = make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
      store4<kVec>(P + static_cast<size_t>(row) * l + col, v, l - col);
    }
  }
}

void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l) {
  const dim3 grid(ceilDiv(l, kBN6), ceilDiv(j, kBM6));
  if (rowsAre16ByteAligned(M, N, P, k, l)) {
    warpTilingKernel<true><<<grid, kThreads6>>>(M, N, P, j, k, l);
  } else {
    warpTilingKernel<false><<<grid, kThreads6>>>(M, N, P, j, k, l);
  }
}
