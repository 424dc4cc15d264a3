#include <algorithm>
#include <vector>

#include "device_ops.h"

// Harness kernels have C linkage so CUPTI reports them by their plain
// tilelab_harness_* names.
extern "C" __global__ void tilelab_harness_fill_generated(float* dst, uint64_t count, uint64_t seed, uint32_t which,
                                                          int dist) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count; i += uint64_t(gridDim.x) * blockDim.x) {
    dst[i] =
        tilelab::input_value(seed, static_cast<tilelab::MatrixId>(which), i, static_cast<tilelab::Distribution>(dist));
  }
}

extern "C" __global__ void tilelab_harness_fill_bits(uint32_t* dst, uint64_t count, uint32_t bits) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count; i += uint64_t(gridDim.x) * blockDim.x) {
    dst[i] = bits;
  }
}

extern "C" __global__ void tilelab_harness_gather(const uint32_t* p, int rows, int cols, uint64_t seed, int samples,
                                                  uint32_t* out) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s < samples) {
    const tilelab::Position pos = tilelab::sample_position(seed, s, rows, cols);
    out[s] = p[size_t(pos.row) * cols + pos.col];
  }
}

extern "C" __global__ void tilelab_harness_count_equal(const uint32_t* data, uint64_t count, uint32_t bits,
                                                       unsigned long long* result) {
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count; i += uint64_t(gridDim.x) * blockDim.x) {
    local += data[i] == bits;
  }
  if (local != 0) atomicAdd(result, local);
}

extern "C" __global__ void tilelab_harness_count_different(const uint32_t* a, const uint32_t* b, uint64_t count,
                                                           unsigned long long* result) {
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count; i += uint64_t(gridDim.x) * blockDim.x) {
    local += a[i] != b[i];
  }
  if (local != 0) atomicAdd(result, local);
}

namespace tilelab {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(uint64_t count) {
  // Grid-stride loops below cover any count; cap the grid at what fills an H100 many times over.
  return static_cast<unsigned>(std::min<uint64_t>((count + kThreads - 1) / kThreads, 65535));
}

}  // namespace

void fill_generated(float* dst, uint64_t count, uint64_t seed, MatrixId which, Distribution dist) {
  if (count == 0) return;
  tilelab_harness_fill_generated<<<blocks_for(count), kThreads>>>(dst, count, seed, static_cast<uint32_t>(which),
                                                                  static_cast<int>(dist));
  TILELAB_CUDA_CHECK(cudaGetLastError());
}

void fill_bits(uint32_t* dst, uint64_t count, uint32_t bits) {
  if (count == 0) return;
  tilelab_harness_fill_bits<<<blocks_for(count), kThreads>>>(dst, count, bits);
  TILELAB_CUDA_CHECK(cudaGetLastError());
}

void gather_samples(const uint32_t* p, int rows, int cols, uint64_t seed, int samples, uint32_t* out) {
  tilelab_harness_gather<<<(samples + kThreads - 1) / kThreads, kThreads>>>(p, rows, cols, seed, samples, out);
  TILELAB_CUDA_CHECK(cudaGetLastError());
}

namespace {

template <typename Launch>
uint64_t run_count(Launch launch) {
  DeviceBuffer<unsigned long long> result(1);
  TILELAB_CUDA_CHECK(cudaMemset(result.get(), 0, sizeof(unsigned long long)));
  launch(result.get());
  TILELAB_CUDA_CHECK(cudaGetLastError());
  unsigned long long host = 0;
  TILELAB_CUDA_CHECK(cudaMemcpy(&host, result.get(), sizeof host, cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace

uint64_t count_equal(const uint32_t* data, uint64_t count, uint32_t bits) {
  if (count == 0) return 0;
  return run_count([&](unsigned long long* r) {
    tilelab_harness_count_equal<<<blocks_for(count), kThreads>>>(data, count, bits, r);
  });
}

uint64_t count_different(const uint32_t* a, const uint32_t* b, uint64_t count) {
  if (count == 0) return 0;
  return run_count(
      [&](unsigned long long* r) { tilelab_harness_count_different<<<blocks_for(count), kThreads>>>(a, b, count, r); });
}

GuardReport check_guards_on_device(const uint32_t* region, uint64_t guard_elements, uint64_t p_elements,
                                   uint32_t guard_bits) {
  std::vector<uint32_t> before(guard_elements), after(guard_elements);
  const size_t bytes = guard_elements * sizeof(uint32_t);
  TILELAB_CUDA_CHECK(cudaMemcpy(before.data(), region, bytes, cudaMemcpyDeviceToHost));
  TILELAB_CUDA_CHECK(cudaMemcpy(after.data(), region + guard_elements + p_elements, bytes, cudaMemcpyDeviceToHost));
  return check_guard_copies(before.data(), after.data(), guard_elements, p_elements, guard_bits);
}

}  // namespace tilelab
