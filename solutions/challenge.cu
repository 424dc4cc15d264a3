// challenge.cu: the challenge part: an FP32 matrix product near cuBLAS speed.
//
// Contract (the grader depends on it; keep the launcher's name and signature):
//   void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l);
//   M is j x k, N is k x l and P = M * N is j x l, all row-major float
//   matrices in device memory: M(r, t) = M[r * k + t], N(t, c) = N[t * l + c],
//   P(r, c) = P[r * l + c]. Each of j, k and l can be any value >= 1 (1, odd,
//   skinny). The bases come from cudaMalloc, but a row is 16-byte aligned
//   only when its length is a multiple of 4. The launcher starts its
//   kernel(s) on the default stream and returns without synchronizing. No
//   libraries, no host computation, no tensor cores or TF32: FP32 FMAs only,
//   within sqrt(k) * 16 * 2^-24 * (|M| |N|)(r, c) of the exact product.
//
// The ladder (handout, part 6): each rung adds one technique to the one
// before, up to the course's reference solution. Measured on an H100 SXM
// (2026-11-22, scripts/bench-challenge): GFLOP/s at 4096^3, median of 15
// timed calls with L2 flushed, and the share of cuBLAS SGEMM (FP32, no TF32,
// 51,661 GFLOP/s) timed in the same run; blocks per SM from the compiler's
// register count.
//   rung                                               GFLOP/s  cuBLAS  blocks x warps / SM
//   tiled.cu: 32 x 32 tile, 1 value per thread          ~9,190    ~18%  (suite runs, 2026-11-21)
//   1 block tiling: 64 x 64 tile, 8 values per thread   16,101    31.2%  2 x 16
//   2 register tiling: 128 x 128, 8 x 8 per thread      16,222    31.4%  1 x 8
//   3 128-bit global loads and stores, float4 reads     23,355    45.2%  1 x 8
//   4 M's tile transposed and padded in shared memory   32,418    62.8%  2 x 8
//   5 double buffering (next stage prefetched)          35,467    68.7%  1 x 8
//   6 warp tiling (64 x 32 per warp, 2 x 2 sub-tiles)   36,843    71.3%  1 x 8
//   reference: 8 x 16 per thread, 64 x 64 per warp,     47,670    92.3%  2 x 4
//     4 warps a block, 2 blocks per SM, clamped edges
// At 2048 x 4096 x 8192 the reference runs at 47,833 GFLOP/s, 92.1 % of cuBLAS.
//
// Why the rungs pay: for an N x N x N product with a block tile of L x L
// values of P, every block reads its two L x N strips of M and N once: N^2 /
// L^2 blocks x 2 L N = 2 N^3 / L floats of global (L2) traffic. A thread
// with a V x V tile reads 2 V values from shared memory per step of k for V^2
// FMAs: 2 N^3 / V floats of shared traffic (N^3 (1/8 + 1/16) for the reference's
// 8 x 16). Rung 2 halves the first and divides the second by 8, but gains
// almost nothing: its loop is only 57 % FMAs (SASS), the rest being the
// 32-bit loads' index arithmetic and bounds tests, which rung 3's float4s
// remove. From there on the limit is keeping the FMA pipes fed: registers
// that allow two blocks per SM (rungs 4 and the reference), latency hidden behind
// FMAs, reads that broadcast instead of conflicting, and more FMAs per shared
// load. In the reference, ncu shows 91 % of the instructions are FMAs, L2 at 19 % and DRAM
// at 4 % of their peaks.
#include "tilelab/part.h"

#include <cstdint>

constexpr int kBM = 128;                 // rows of P per block
constexpr int kBN = 128;                 // columns of P per block
constexpr int kBK = 8;                   // k-slice per shared-memory stage
constexpr int kWM = 64, kWN = 64;        // a warp's tile of P: 2 x 2 warps per block
constexpr int kTM = 8, kTN = 16;         // a thread's tile of P: 2 x 4 sub-tiles of 4 x 4
constexpr int kLanesN = kWN / kTN;       // 4 lanes across a warp tile, 8 down
constexpr int kThreads = (kBM / kWM) * (kBN / kWN) * 32;  // 128
constexpr int kAStride = kBM + 4;        // padded row of the transposed tile of M
constexpr int kALoads = kBM * kBK / 4 / kThreads;        // float4s of M's tile per thread and stage
constexpr int kBLoads = kBK * kBN / 4 / kThreads;        // float4s of N's tile per thread and stage
constexpr int kARowsPerLoad = kThreads / 2;              // rows of M's tile one load instruction covers
constexpr int kBRowsPerLoad = kThreads / (kBN / 4);      // rows of N's tile one load instruction covers
static_assert(kBK % 8 == 0 && kALoads % 2 == 0 && kBLoads >= 1, "the load assignment below");

// kVec: every row of M, N and P is 16-byte aligned, so float4 accesses are legal.
// __launch_bounds__(128, 2): two blocks (8 warps) per multiprocessor, which
// caps the compiler at 255 registers a thread: 128 accumulators, 24 operands
// and the prefetched next stage fit without spilling.
template <bool kVec>
__global__ void __launch_bounds__(kThreads, 2)
    challengeKernel(const float* __restrict__ M, const float* __restrict__ N, float* __restrict__ P, int j, int k,
                    int l) {
  // BEGIN SOLUTION
  // HINT: Make this kernel fast one rung at a time (handout, part 6), and
  // HINT: check after each (tilelab check challenge):
  // HINT:   1. block tiling: stage a kBM x kBK slice of M and a kBK x kBN slice
  // HINT:      of N in shared memory; each thread computes several values of P;
  // HINT:   2. register tiling: each thread keeps an 8 x 8 tile of P in
  // HINT:      registers, fed by 8 + 8 shared loads per step of k;
  // HINT:   3. 128-bit loads (float4) wherever rows are 16-byte aligned (kVec);
  // HINT:   4. M's slice stored transposed (and padded) in shared memory, so a
  // HINT:      thread reads its column of M with float4s too;
  // HINT:   5. double buffering: load the next slice while computing this one;
  // HINT:   6. warp tiling: each warp owns a kWM x kWN tile of P (64 x 64, as
  // HINT:      in the reference; the handout's rung 6 used 64 x 32), so the
  // HINT:      lanes' shared reads broadcast instead of conflicting.
  // HINT: What is here now is correct but slow: one thread per column of the
  // HINT: block's tile, every operand read from global memory.
  __shared__ __align__(16) float As[2][kBK][kAStride];  // M's tile, transposed: As[.][t][row]
  __shared__ __align__(16) float Bs[2][kBK][kBN];
  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  // Block tiling: every float a block brings in from L2 serves 128 FMAs of
  // its 128 x 128 tile (global traffic 2 N^3 / 128 floats).
  const int bm0 = blockIdx.y * kBM, bn0 = blockIdx.x * kBN;

  // Warp tiling: a warp owns a 64 x 64 tile of P; a lane its 2 x 4 grid of
  // 4 x 4 sub-tiles, spaced 32 rows and 16 columns apart. Each float4 read
  // of As or Bs then touches at most 8 distinct, consecutive float4s (one
  // pass through the 32 banks) and the other lanes get them by broadcast.
  const int tm0 = (warp / (kBN / kWN)) * kWM + (lane / kLanesN) * 4;
  const int tn0 = (warp % (kBN / kWN)) * kWN + (lane % kLanesN) * 4;

  // Each thread moves kALoads float4s of M's tile per stage (two threads
  // per row and 8 values of k, rows aRow + 64 h) and kBLoads of N's (32
  // threads per row, rows bRow + 4 h), all coalesced: 128-bit loads need a
  // quarter of the instructions (and index arithmetic) of 32-bit ones, and
  // issue slots, not bandwidth, are what an FMA-bound loop runs out of.
  // Rows of M past j and columns of N past l are clamped to valid ones: what
  // they feed lands only in parts of P that are never stored, so only k
  // needs a test.
  const int aRow = tid / 2, aK = (tid % 2) * 4;
  const int bRow = tid / (kBN / 4), bCol = (tid % (kBN / 4)) * 4;
  const float* aSrc = M + static_cast<size_t>(min(bm0 + aRow, j - 1)) * k + aK;
  const size_t aSecond = static_cast<size_t>(min(bm0 + kARowsPerLoad + aRow, j - 1) - min(bm0 + aRow, j - 1)) * k;
  const float* bSrc = N + static_cast<size_t>(bRow) * l + (kVec ? min(bn0 + bCol, l - 4) : bn0 + bCol);
  // Load h of M's tile: rows aRow + kARowsPerLoad (h % 2), k offset aK + 8 (h / 2).
  const auto aOffset = [&](int h) { return (h % 2) * aSecond + 8 * (h / 2); };
  const auto aKOf = [&](int h) { return aK + 8 * (h / 2); };

  // Loads the stage that aSrc and bSrc point at; kLeft = k minus its first k.
  float4 aNext[kALoads], bNext[kBLoads];  // the next stage, in flight while this one is used
  const auto fetch = [&](int kLeft) {
#pragma unroll
    for (int h = 0; h < kALoads; ++h) {
      const float* a = aSrc + aOffset(h);
      const int kA = aKOf(h);
      if constexpr (kVec) {
        aNext[h] = kA < kLeft ? __ldg(reinterpret_cast<const float4*>(a)) : make_float4(0.f, 0.f, 0.f, 0.f);
      } else {
        aNext[h] = make_float4(kA < kLeft ? a[0] : 0.f, kA + 1 < kLeft ? a[1] : 0.f, kA + 2 < kLeft ? a[2] : 0.f,
                               kA + 3 < kLeft ? a[3] : 0.f);
      }
    }
#pragma unroll
    for (int h = 0; h < kBLoads; ++h) {
      const float* b = bSrc + static_cast<size_t>(kBRowsPerLoad * h) * l;
      const bool rowOk = bRow + kBRowsPerLoad * h < kLeft;
      if constexpr (kVec) {
        bNext[h] = rowOk ? __ldg(reinterpret_cast<const float4*>(b)) : make_float4(0.f, 0.f, 0.f, 0.f);
      } else {
        const int c = bn0 + bCol;
        bNext[h] = make_float4(rowOk && c < l ? b[0] : 0.f, rowOk && c + 1 < l ? b[1] : 0.f,
                               rowOk && c + 2 < l ? b[2] : 0.f, rowOk && c + 3 < l ? b[3] : 0.f);
      }
    }
  };
  // The transposing stores: the two threads of a row of M write its k and
  // k + 4, which the 4-float padding puts 16 banks apart: no store conflicts.
  const auto stash = [&](int buf) {
#pragma unroll
    for (int h = 0; h < kALoads; ++h) {
      const int r = aRow + kARowsPerLoad * (h % 2), t = aKOf(h);
      As[buf][t + 0][r] = aNext[h].x;
      As[buf][t + 1][r] = aNext[h].y;
      As[buf][t + 2][r] = aNext[h].z;
      As[buf][t + 3][r] = aNext[h].w;
    }
#pragma unroll
    for (int h = 0; h < kBLoads; ++h) *reinterpret_cast<float4*>(&Bs[buf][bRow + kBRowsPerLoad * h][bCol]) = bNext[h];
  };

  float acc[kTM][kTN] = {};  // rows tm0 + 32 (i / 4) + i % 4, columns tn0 + 16 (c / 4) + c % 4
  fetch(k);
  stash(0);
  __syncthreads();
  int buf = 0;
  for (int kLeft = k - kBK; kLeft > -kBK; kLeft -= kBK) {
    // Double buffering: the next stage's global loads are issued first and
    // only waited for after this stage's 128 x kBK FMAs, so their latency
    // hides behind arithmetic; they go to the other buffer, so one barrier
    // per stage is enough. Past the last stage they load nothing.
    aSrc += kBK;
    bSrc += static_cast<size_t>(kBK) * l;
    fetch(kLeft);
#pragma unroll
    for (int t = 0; t < kBK; ++t) {
      // Register tiling: 6 float4 shared loads feed 128 FMAs (an outer
      // product), 0.19 floats read from shared memory per FMA instead of 2.
      float a[kTM], b[kTN];
#pragma unroll
      for (int q = 0; q < kTM / 4; ++q)
        *reinterpret_cast<float4*>(&a[4 * q]) = *reinterpret_cast<const float4*>(&As[buf][t][tm0 + q * (kWM / 2)]);
#pragma unroll
      for (int q = 0; q < kTN / 4; ++q)
        *reinterpret_cast<float4*>(&b[4 * q]) = *reinterpret_cast<const float4*>(&Bs[buf][t][tn0 + q * (kWN / 4)]);
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int c = 0; c < kTN; ++c) acc[i][c] = fmaf(a[i], b[c], acc[i][c]);
    }
    stash(buf ^ 1);  // that buffer was last read before the previous barrier
    __syncthreads();
    buf ^= 1;
  }

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int row = bm0 + tm0 + (i / 4) * (kWM / 2) + i % 4;
    if (row >= j) continue;
    float* out = P + static_cast<size_t>(row) * l;
#pragma unroll
    for (int q = 0; q < kTN / 4; ++q) {
      const int col = bn0 + tn0 + q * (kWN / 4);
      const float* v = &acc[i][4 * q];
      if constexpr (kVec) {
        if (col < l) *reinterpret_cast<float4*>(out + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (col + c < l) out[col + c] = v[c];
      }
    }
  }
  // END SOLUTION
  // STUB: const int col = blockIdx.x * kBN + threadIdx.x;  // kThreads == kBN: one thread per column
  // STUB: const int rowEnd = min(blockIdx.y * kBM + kBM, j);
  // STUB: for (int row = blockIdx.y * kBM; col < l && row < rowEnd; ++row) {
  // STUB:   float sum = 0.0f;
  // STUB:   for (int t = 0; t < k; ++t) sum += M[static_cast<size_t>(row) * k + t] * N[static_cast<size_t>(t) * l + col];
  // STUB:   P[static_cast<size_t>(row) * l + col] = sum;
  // STUB: }
}

void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l) {
  // BEGIN SOLUTION
  // HINT: One block per kBM x kBN tile of P; take the float4 path (kVec) only
  // HINT: when every row of M, N and P starts on a 16-byte boundary.
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const dim3 grid((l + kBN - 1) / kBN, (j + kBM - 1) / kBM);
  if (k % 4 == 0 && l % 4 == 0 && aligned(M) && aligned(N) && aligned(P)) {
    challengeKernel<true><<<grid, kThreads>>>(M, N, P, j, k, l);
  } else {
    challengeKernel<false><<<grid, kThreads>>>(M, N, P, j, k, l);
  }
  // END SOLUTION
  // STUB: const dim3 grid((l + kBN - 1) / kBN, (j + kBM - 1) / kBM);
  // STUB: challengeKernel<false><<<grid, kThreads>>>(M, N, P, j, k, l);
}
