// Deterministic matrix inputs, computed the same way on the host and the GPU.
//
// Every value is a pure function of (seed, matrix, index): a counter-based
// generator. The harness fills device buffers with it (fresh inputs for every
// timed call cost no file I/O), and the trusted verifier recomputes exactly the
// same values on the host, for a whole matrix or for the one row and column
// that a sampled output element needs.
#pragma once

#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define TILELAB_HD __host__ __device__
#else
#define TILELAB_HD
#endif

namespace tilelab {

enum class Distribution : int {
  // Uniform on [-1, 1) in steps of 2^-23: zero mean, so outputs spread around
  // 0 and an all-zero answer fails; every value is an exact float.
  kUniform = 0,
  // Integers in [-8, 8]. Every partial sum of a dot product is an integer below
  // 2^24 while k < 2^18, so every float summation order gives the exact answer:
  // a wrong index shows as an exact mismatch with no tolerance in doubt.
  kSmallInt = 1,
};

enum class MatrixId : uint32_t { kM = 1, kN = 2 };

// splitmix64's finalizer: a bijection on 64-bit words with good avalanche.
TILELAB_HD inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// The seed of timed call `call` of a case whose timing seed is `base`.
TILELAB_HD inline uint64_t derive_seed(uint64_t base, uint64_t call) {
  return mix64(base ^ mix64(call + 0x632BE59BD9B4E019ull));
}

TILELAB_HD inline float input_value(uint64_t seed, MatrixId which, uint64_t index, Distribution dist) {
  const uint64_t stream = mix64(seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(which)));
  const uint64_t h = mix64(stream + index);
  if (dist == Distribution::kSmallInt) {
    return static_cast<float>(static_cast<int>((h >> 32) % 17u) - 8);
  }
  const int32_t u24 = static_cast<int32_t>(h >> 40);        // 24 random bits
  return static_cast<float>(u24 - (1 << 23)) * 0x1.0p-23f;  // exact: fits the significand
}

// Output positions checked after every timed call. The first four are the
// corners, where boundary mistakes land; the rest are spread at random.
struct Position {
  int row;
  int col;
};

TILELAB_HD inline Position sample_position(uint64_t seed, int s, int rows, int cols) {
  switch (s) {
    case 0: return {0, 0};
    case 1: return {rows - 1, cols - 1};
    case 2: return {0, cols - 1};
    case 3: return {rows - 1, 0};
    default: {
      const uint64_t h = mix64(seed ^ mix64(0x5A5A5A5A00000000ull + static_cast<uint64_t>(s)));
      return {static_cast<int>((h >> 32) % static_cast<uint64_t>(rows)),
              static_cast<int>((h & 0xFFFFFFFFull) % static_cast<uint64_t>(cols))};
    }
  }
}

const char* distribution_name(Distribution dist);
// Returns false when `name` names no distribution.
bool parse_distribution(const std::string& name, Distribution* out);

}  // namespace tilelab
