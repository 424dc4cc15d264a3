// GPU work the harness does around a launcher call: filling inputs and
// poison, reading back samples, counting untouched or changed elements.
// All kernels here are named tilelab_harness_* so the launch recorder can
// tell them from the part's kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "generator.h"
#include "tilelab/part.h"

namespace tilelab {

// Owns one cudaMalloc allocation. Freeing ignores errors on purpose: after a
// kernel fault every call fails, and the process is about to end anyway.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    TILELAB_CUDA_CHECK(cudaMalloc(&ptr_, count * sizeof(T) + (count == 0 ? 1 : 0)));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), count_(other.count_) {
    other.ptr_ = nullptr;
    other.count_ = 0;
  }

  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

// Asynchronous, on the legacy default stream like the part's launches.
void fill_generated(float* dst, uint64_t count, uint64_t seed, MatrixId which, Distribution dist);
void fill_bits(uint32_t* dst, uint64_t count, uint32_t bits);
// out[s] = P[sample_position(seed, s, rows, cols)] for s < samples.
void gather_samples(const uint32_t* p, int rows, int cols, uint64_t seed, int samples, uint32_t* out);

// Synchronous: how many of `count` words equal `bits`; how many differ between a and b.
uint64_t count_equal(const uint32_t* data, uint64_t count, uint32_t bits);
uint64_t count_different(const uint32_t* a, const uint32_t* b, uint64_t count);

}  // namespace tilelab
