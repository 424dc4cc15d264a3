// challenge_tune.cu: the warp-tiled kernel of the challenge ladder with its
// shape as template parameters, so that one build can time several tile
// shapes side by side (how the reference's shape was chosen; the figures are
// in docs/measurements-archive.md). Each configuration is exported as a launcher with
// the part's contract and registered in kTuneVariants (challenge_variants.h).
//
// Parameters:
//   BM x BN    the block tile of P
//   BK         the slice of k staged in shared memory per step
//   WM x WN    a warp's sub-tile of the block tile
//   RM x RN    a lane's 4 x 4 sub-tiles (the lane computes 4RM x 4RN values,
//              spread WM/RM rows and WN/RN columns apart)
//   MINB       blocks per multiprocessor promised to the compiler
//   STAGES     0: register prefetch into two shared buffers;
//              >= 2: that many shared buffers filled by cp.async
//   SWZ        rasterise blocks in groups of 8 tile rows (L2 locality)
#include <cstdint>
#include <type_traits>

#include "challenge_variants.h"
#include "tilelab/part.h"

namespace {

template <int BM, int BN, int BK, int WM, int WN, int RM, int RN>
struct Shape {
  static constexpr int kWarps = (BM / WM) * (BN / WN);
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kLanesN = WN / (4 * RN);
  static constexpr int kLanesM = WM / (4 * RM);
  static constexpr int kSubM = WM / RM;
  static constexpr int kSubN = WN / RN;
  static constexpr int kAStride = BM + 4;
  static constexpr int kAHalfRows = kThreads / 2;          // rows covered by one A load instruction
  static constexpr int kALoads = (BM / kAHalfRows) * (BK / 8);
  static constexpr int kBLoads = BK * BN / 4 / kThreads;
  static constexpr int kStageFloats = BK * kAStride + BK * BN;
  static_assert(kLanesM * kLanesN == 32, "a warp has 32 lanes");
  static_assert(BK % 8 == 0 && BM % kAHalfRows == 0, "A loads");
  static_assert((BK * BN / 4) % kThreads == 0, "B loads");
};

__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool ok) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 4 : 0));
}
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool ok) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <int BM, int BN, int BK, int WM, int WN, int RM, int RN, int MINB, int STAGES, bool SWZ, bool VEC>
__global__ void __launch_bounds__(Shape<BM, BN, BK, WM, WN, RM, RN>::kThreads, MINB)
    tuneKernel(const float* __restrict__ M, const float* __restrict__ N, float* __restrict__ P, int j, int k, int l) {
  using S = Shape<BM, BN, BK, WM, WN, RM, RN>;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int wm0 = (warp / S::kWarpsN) * WM + (lane / S::kLanesN) * 4;
  const int wn0 = (warp % S::kWarpsN) * WN + (lane % S::kLanesN) * 4;

  int tileM, tileN;
  if constexpr (SWZ) {
    const int tilesM = (j + BM - 1) / BM, tilesN = (l + BN - 1) / BN;
    constexpr int G = 8;
    const int pid = blockIdx.x;
    const int inGroup = G * tilesN;
    const int first = (pid / inGroup) * G;
    const int gsize = min(tilesM - first, G);
    tileM = first + (pid % inGroup) % gsize;
    tileN = (pid % inGroup) / gsize;
  } else {
    tileM = blockIdx.y;
    tileN = blockIdx.x;
  }
  const int bm0 = tileM * BM, bn0 = tileN * BN;

  // Global load assignment: A as float4 runs along k (two threads per row of
  // the tile, transposed into shared memory), B as float4 runs along a row.
  // Rows of M past j and columns of N past l are clamped to valid ones: what
  // they feed lands only in rows and columns of P that are never stored, so
  // only the k range is tested.
  constexpr int kRB = BM / S::kAHalfRows;
  constexpr int kBRowsPerLoad = S::kThreads / (BN / 4);
  const int aRow = tid / 2, aK = (tid % 2) * 4;
  const int bRow = tid / (BN / 4), bCol = (tid % (BN / 4)) * 4;
  const float* aSrc = M + static_cast<size_t>(min(bm0 + aRow, j - 1)) * k + aK;
  size_t aRowOff[kRB];
#pragma unroll
  for (int rb = 0; rb < kRB; ++rb)
    aRowOff[rb] = (static_cast<size_t>(min(bm0 + rb * S::kAHalfRows + aRow, j - 1)) - min(bm0 + aRow, j - 1)) * k;
  const int bColC = VEC ? min(bn0 + bCol, l - 4) : bn0 + bCol;
  const float* bSrc = N + static_cast<size_t>(bRow) * l + bColC;
  const size_t bStep = static_cast<size_t>(BK) * l;
  const int aSm = aK * S::kAStride + aRow;
  const int bSm = BK * S::kAStride + bRow * BN + bCol;

  float acc[4 * RM][4 * RN];
#pragma unroll
  for (int r = 0; r < 4 * RM; ++r)
#pragma unroll
    for (int c = 0; c < 4 * RN; ++c) acc[r][c] = 0.0f;

  const int tiles = (k + BK - 1) / BK;

  auto compute = [&](const float* st) {
    const float* As = st;
    const float* Bs = st + BK * S::kAStride;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float4 a[RM], b[RN];
#pragma unroll
      for (int i = 0; i < RM; ++i) a[i] = *reinterpret_cast<const float4*>(&As[kk * S::kAStride + wm0 + i * S::kSubM]);
#pragma unroll
      for (int i = 0; i < RN; ++i) b[i] = *reinterpret_cast<const float4*>(&Bs[kk * BN + wn0 + i * S::kSubN]);
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float av[4] = {a[i].x, a[i].y, a[i].z, a[i].w};
#pragma unroll
        for (int ii = 0; ii < 4; ++ii)
#pragma unroll
          for (int q = 0; q < RN; ++q) {
            acc[i * 4 + ii][q * 4 + 0] = fmaf(av[ii], b[q].x, acc[i * 4 + ii][q * 4 + 0]);
            acc[i * 4 + ii][q * 4 + 1] = fmaf(av[ii], b[q].y, acc[i * 4 + ii][q * 4 + 1]);
            acc[i * 4 + ii][q * 4 + 2] = fmaf(av[ii], b[q].z, acc[i * 4 + ii][q * 4 + 2]);
            acc[i * 4 + ii][q * 4 + 3] = fmaf(av[ii], b[q].w, acc[i * 4 + ii][q * 4 + 3]);
          }
      }
    }
  };

  // Load i of A: rows rb * kAHalfRows + aRow, k columns kb * 8 + aK + 0..3 of
  // the tile; load i of B: row i * kBRowsPerLoad + bRow. kLeft = k minus the
  // tile's first k; aSrc and bSrc point at the tile.
  auto aAt = [&](int i) { return aSrc + aRowOff[i / (BK / 8)] + (i % (BK / 8)) * 8; };
  auto aOk = [&](int i, int kLeft, int c) { return (i % (BK / 8)) * 8 + aK + c < kLeft; };
  auto aSmAt = [&](int i) { return aSm + (i % (BK / 8)) * 8 * S::kAStride + (i / (BK / 8)) * S::kAHalfRows; };
  auto bAt = [&](int i) { return bSrc + static_cast<size_t>(i * kBRowsPerLoad) * l; };
  auto bOk = [&](int i, int kLeft) { return i * kBRowsPerLoad + bRow < kLeft; };
  auto bColOk = [&](int c) { return VEC || bn0 + bCol + c < l; };
  auto bSmAt = [&](int i) { return bSm + i * kBRowsPerLoad * BN; };

  if constexpr (STAGES == 0) {
    float4 ra[S::kALoads], rb[S::kBLoads];
    auto load = [&](int kLeft) {
#pragma unroll
      for (int i = 0; i < S::kALoads; ++i) {
        const float* p = aAt(i);
        if constexpr (VEC) {
          ra[i] = aOk(i, kLeft, 0) ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.f, 0.f, 0.f, 0.f);
        } else {
          ra[i].x = aOk(i, kLeft, 0) ? __ldg(p + 0) : 0.f;
          ra[i].y = aOk(i, kLeft, 1) ? __ldg(p + 1) : 0.f;
          ra[i].z = aOk(i, kLeft, 2) ? __ldg(p + 2) : 0.f;
          ra[i].w = aOk(i, kLeft, 3) ? __ldg(p + 3) : 0.f;
        }
      }
#pragma unroll
      for (int i = 0; i < S::kBLoads; ++i) {
        const float* p = bAt(i);
        if constexpr (VEC) {
          rb[i] = bOk(i, kLeft) ? __ldg(reinterpret_cast<const float4*>(p)) : make_float4(0.f, 0.f, 0.f, 0.f);
        } else {
          rb[i].x = bOk(i, kLeft) && bColOk(0) ? __ldg(p + 0) : 0.f;
          rb[i].y = bOk(i, kLeft) && bColOk(1) ? __ldg(p + 1) : 0.f;
          rb[i].z = bOk(i, kLeft) && bColOk(2) ? __ldg(p + 2) : 0.f;
          rb[i].w = bOk(i, kLeft) && bColOk(3) ? __ldg(p + 3) : 0.f;
        }
      }
    };
    auto store = [&](float* st) {
#pragma unroll
      for (int i = 0; i < S::kALoads; ++i) {
        float* d = st + aSmAt(i);
        d[0 * S::kAStride] = ra[i].x;
        d[1 * S::kAStride] = ra[i].y;
        d[2 * S::kAStride] = ra[i].z;
        d[3 * S::kAStride] = ra[i].w;
      }
#pragma unroll
      for (int i = 0; i < S::kBLoads; ++i) *reinterpret_cast<float4*>(st + bSmAt(i)) = rb[i];
    };
    load(k);
    store(smem);
    __syncthreads();
    int kLeft = k;
    for (int t = 0; t < tiles; ++t) {
      float* cur = smem + (t & 1) * S::kStageFloats;
      float* nxt = smem + ((t + 1) & 1) * S::kStageFloats;
      kLeft -= BK;
      aSrc += BK;
      bSrc += bStep;
      load(kLeft);
      compute(cur);
      store(nxt);
      __syncthreads();
    }
  } else {
    auto issue = [&](int kLeft, float* st) {
#pragma unroll
      for (int i = 0; i < S::kALoads; ++i) {
        const float* p = aAt(i);
        float* d = st + aSmAt(i);
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const bool ok = aOk(i, kLeft, c);
          cp_async4(d + c * S::kAStride, ok ? p + c : M, ok);
        }
      }
#pragma unroll
      for (int i = 0; i < S::kBLoads; ++i) {
        const float* p = bAt(i);
        float* d = st + bSmAt(i);
        if constexpr (VEC) {
          const bool ok = bOk(i, kLeft);
          cp_async16(d, ok ? p : N, ok);
        } else {
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const bool ok = bOk(i, kLeft) && bColOk(c);
            cp_async4(d + c, ok ? p + c : N, ok);
          }
        }
      }
    };
    int kLeft = k;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      issue(kLeft, smem + s * S::kStageFloats);
      cp_async_commit();
      kLeft -= BK;
      aSrc += BK;
      bSrc += bStep;
    }
    for (int t = 0; t < tiles; ++t) {
      cp_async_wait<STAGES - 2>();
      __syncthreads();
      issue(kLeft, smem + ((t + STAGES - 1) % STAGES) * S::kStageFloats);
      cp_async_commit();
      kLeft -= BK;
      aSrc += BK;
      bSrc += bStep;
      compute(smem + (t % STAGES) * S::kStageFloats);
    }
    cp_async_wait<0>();
  }

  // Epilogue.
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int ii = 0; ii < 4; ++ii) {
      const int row = bm0 + wm0 + i * S::kSubM + ii;
      if (row >= j) continue;
      float* prow = P + static_cast<size_t>(row) * l;
#pragma unroll
      for (int q = 0; q < RN; ++q) {
        const int col = bn0 + wn0 + q * S::kSubN;
        const float* v = &acc[i * 4 + ii][q * 4];
        if constexpr (VEC) {
          if (col < l) *reinterpret_cast<float4*>(prow + col) = make_float4(v[0], v[1], v[2], v[3]);
        } else {
#pragma unroll
          for (int c = 0; c < 4; ++c)
            if (col + c < l) prow[col + c] = v[c];
        }
      }
    }
}

template <int BM, int BN, int BK, int WM, int WN, int RM, int RN, int MINB, int STAGES, bool SWZ>
void launchTune(const float* M, const float* N, float* P, int j, int k, int l) {
  using S = Shape<BM, BN, BK, WM, WN, RM, RN>;
  const int stages = STAGES == 0 ? 2 : STAGES;
  const size_t bytes = static_cast<size_t>(stages) * S::kStageFloats * sizeof(float);
  const bool vec = k % 4 == 0 && l % 4 == 0 && reinterpret_cast<uintptr_t>(M) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(N) % 16 == 0 && reinterpret_cast<uintptr_t>(P) % 16 == 0;
  const int tilesM = (j + BM - 1) / BM, tilesN = (l + BN - 1) / BN;
  const dim3 grid = SWZ ? dim3(tilesM * tilesN) : dim3(tilesN, tilesM);
  auto kernel = vec ? tuneKernel<BM, BN, BK, WM, WN, RM, RN, MINB, STAGES, SWZ, true>
                    : tuneKernel<BM, BN, BK, WM, WN, RM, RN, MINB, STAGES, SWZ, false>;
  if (bytes > 48 * 1024) {
    TILELAB_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  }
  kernel<<<grid, S::kThreads, bytes>>>(M, N, P, j, k, l);
}

}  // namespace

// name: BMxBN xBK, warp WMxWN, lane (4RM)x(4RN), blocks/SM, stages (r = register prefetch), swizzle
const Variant kTuneVariants[] = {
    {"t128x128k8_w64x32_r2", launchTune<128, 128, 8, 64, 32, 2, 2, 2, 0, false>},
    {"t128x128k16_w64x32_r2", launchTune<128, 128, 16, 64, 32, 2, 2, 2, 0, false>},
    {"t128x128k8_w64x32_a3", launchTune<128, 128, 8, 64, 32, 2, 2, 2, 3, false>},
    {"t128x256k8_w64x64_r1", launchTune<128, 256, 8, 64, 64, 2, 4, 1, 0, false>},
    {"t128x256k16_w64x64_r1", launchTune<128, 256, 16, 64, 64, 2, 4, 1, 0, false>},
    {"t256x128k16_w64x64_r1", launchTune<256, 128, 16, 64, 64, 4, 2, 1, 0, false>},
    {"t128x256k8_w64x64_a3", launchTune<128, 256, 8, 64, 64, 2, 4, 1, 3, false>},
    {"t128x128k8_w64x64_128t_r2", launchTune<128, 128, 8, 64, 64, 2, 4, 2, 0, false>},
    {"t128x128k8_w64x64_128t_r2s", launchTune<128, 128, 8, 64, 64, 2, 4, 2, 0, true>},
    {"t128x128k16_w64x64_128t_r2", launchTune<128, 128, 16, 64, 64, 2, 4, 2, 0, false>},
    {"t128x128k8_w64x64_128t_a3", launchTune<128, 128, 8, 64, 64, 2, 4, 2, 3, false>},
};
const int kTuneVariantCount = sizeof(kTuneVariants) / sizeof(kTuneVariants[0]);
