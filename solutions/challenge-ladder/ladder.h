// ladder.h: the helpers the rungs of the challenge ladder share.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

// Blocks needed to cover n items, b at a time.
inline int ceilDiv(int n, int b) { return (n + b - 1) / b; }

// 128-bit loads and stores need 16-byte aligned addresses. cudaMalloc gives
// aligned bases, but row r of a matrix with c columns starts 4 * r * c bytes
// in, which is a multiple of 16 only when c is a multiple of 4. The rungs
// that use float4 take their vector path only when every row of M (k
// columns), N and P (l columns) is aligned, and a scalar path otherwise.
inline bool rowsAre16ByteAligned(const float* M, const float* N, const float* P, int k, int l) {
  const auto aligned = [](const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  return k % 4 == 0 && l % 4 == 0 && aligned(M) && aligned(N) && aligned(P);
}

// Four consecutive floats p[0..3], those at or past `valid` read as zero (the
// tile edge). kVec: one 128-bit load; the caller guarantees alignment and that
// valid is either <= 0 or >= 4.
template <bool kVec>
__device__ __forceinline__ float4 load4(const float* p, int valid) {
  if constexpr (kVec) {
    return valid > 0 ? *reinterpret_cast<const float4*>(p) : make_float4(0.f, 0.f, 0.f, 0.f);
  } else {
    return make_float4(valid > 0 ? p[0] : 0.f, valid > 1 ? p[1] : 0.f, valid > 2 ? p[2] : 0.f, valid > 3 ? p[3] : 0.f);
  }
}

// Writes the first `valid` of four values to p[0..3] (same rules as load4).
template <bool kVec>
__device__ __forceinline__ void store4(float* p, float4 v, int valid) {
  if constexpr (kVec) {
    if (valid > 0) *reinterpret_cast<float4*>(p) = v;
  } else {
    if (valid > 0) p[0] = v.x;
    if (valid > 1) p[1] = v.y;
    if (valid > 2) p[2] = v.z;
    if (valid > 3) p[3] = v.w;
  }
}

// Component c of a float4 (c a compile-time constant after unrolling).
__device__ __forceinline__ float at(const float4& v, int c) { return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w; }
