// The on-chip levels of the roofline: L2 read bandwidth and shared-memory
// load bandwidth. A kernel whose tiles are reused from L2 or from shared
// memory is bound by these, not by DRAM, so a hierarchical roofline needs
// them. Timed like roofline.cu's ceilings (measuring.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "device_buffer.h"
#include "measuring.h"
#include "tilelab/part.h"

using nlohmann::json;

namespace tilelab::roofline {
namespace {

// Every thread stays resident for the whole launch (one wave of as many
// blocks as the SMs hold at once): each does the same work, so no SM idles
// through a ragged end while others finish.
int resident_blocks(const cudaDeviceProp& prop, const void* kernel, int block) {
  int blocks_per_sm = 0;
  TILELAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, kernel, block, 0));
  return prop.multiProcessorCount * std::max(blocks_per_sm, 1);
}

// Uses every loaded value, so no load can be dropped as dead.
template <int N>
__device__ __forceinline__ void add_all(float4& sum, const float4 (&v)[N]) {
#pragma unroll
  for (int u = 0; u < N; ++u) {
    sum.x += v[u].x;
    sum.y += v[u].y;
    sum.z += v[u].z;
    sum.w += v[u].w;
  }
}

// --- L2 bandwidth ----------------------------------------------------------

// The buffer is this share of the L2. The H100's L2 is two partitions, and a
// line read by SMs on both sides can be held in both, so only about half of
// l2CacheSize is sure to keep a buffer resident; a quarter leaves a margin.
constexpr size_t kL2FootprintShare = 4;
// The most the buffer may take when the grid is too wide for the share above
// (one float4 per thread is the least it reads): beyond half the L2, part of
// each pass would come from DRAM.
constexpr size_t kL2FootprintMaxShare = 2;
constexpr int kL2Block = 256;
// Independent loads a thread has in flight: their addresses do not depend on
// loaded data, so all four are issued before the first result is waited for.
constexpr int kL2Unroll = 4;
// About 3 ms at the L2 rate expected of an H100 (some 6 TB/s), long enough
// that launch overhead and event resolution do not matter.
constexpr double kL2BytesPerRun = double(size_t(1) << 34);

// Thread t reads the float4s t, t + stride, t + 2 stride, ... of a buffer of
// `count` = stride x (loads per pass) float4s, wrapping round to t: each pass
// of the grid reads the buffer once, a warp at a time in 512-byte runs.
// __ldcg caches in L2 only: a thread's few float4s would otherwise be served
// from its SM's L1 after the first pass, and this would measure L1. The sum
// is stored so that the loads cannot be removed.
__global__ void tilelab_roofline_l2_read(const float4* __restrict__ data, unsigned count, int trips,
                                         float* __restrict__ sink) {
  const unsigned stride = gridDim.x * blockDim.x;
  const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned i = thread;
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int t = 0; t < trips; ++t) {
    float4 v[kL2Unroll];
#pragma unroll
    for (int u = 0; u < kL2Unroll; ++u) {
      v[u] = __ldcg(data + i);
      i += stride;
      if (i >= count) i -= count;
    }
    add_all(sum, v);
  }
  sink[thread] = sum.x + sum.y + sum.z + sum.w;
}

// --- Shared-memory bandwidth ------------------------------------------------

constexpr int kSharedBlock = 256;
// float4s of shared memory per block (8 KiB): small enough that every SM
// holds as many blocks as its threads allow, on every GPU since Volta.
constexpr int kSharedTile = 512;
// Loads per thread per trip, all issued before the first is used.
constexpr int kSharedUnroll = 8;
// A warp's loads of one trip span kSharedUnroll runs of 32 float4s; trips
// start at multiples of that span, so no load runs past the tile's end.
constexpr unsigned kSharedSpan = 32 * kSharedUnroll;
static_assert(kSharedTile % kSharedSpan == 0 && (kSharedTile & (kSharedTile - 1)) == 0,
              "the tile must be a power of two that holds whole spans");
// About 2 ms at the rate expected of an H100 (128 bytes per clock per SM,
// some 30 TB/s across its 132 SMs).
constexpr double kSharedBytesPerRun = double(size_t(1) << 36);

// Each warp reads 32 consecutive float4s at a time: a quarter-warp's eight
// 16-byte loads cover all 32 banks once, so an LDS.128 takes the four
// wavefronts it must and no more (a conflict would add some). The window
// moves by `step` (from the host, a multiple of kSharedSpan) every trip, so
// the compiler cannot see that a trip reads what an earlier one read and
// hoist the loads out of the loop; the loaded values feed the sum each
// thread stores.
__global__ void tilelab_roofline_shared_read(unsigned step, int trips, float* __restrict__ sink) {
  __shared__ float4 tile[kSharedTile];
  for (int i = threadIdx.x; i < kSharedTile; i += blockDim.x) {
    const float v = static_cast<float>(i & 0xFF) * 1e-3f;
    tile[i] = make_float4(v, v + 1e-3f, v + 2e-3f, v + 3e-3f);
  }
  __syncthreads();
  const unsigned lane = threadIdx.x % 32;
  unsigned window = (threadIdx.x / 32) * kSharedSpan;
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int t = 0; t < trips; ++t) {
    const float4* run = tile + (window & (kSharedTile - 1)) + lane;
    float4 v[kSharedUnroll];
#pragma unroll
    for (int u = 0; u < kSharedUnroll; ++u) v[u] = run[u * 32];
    add_all(sum, v);
    window += step;
  }
  sink[blockIdx.x * blockDim.x + threadIdx.x] = sum.x + sum.y + sum.z + sum.w;
}

}  // namespace

json measure_l2(const cudaDeviceProp& prop, int runs) {
  const size_t l2_bytes = prop.l2CacheSize > 0 ? size_t(prop.l2CacheSize) : 0;
  const size_t target = l2_bytes / kL2FootprintShare / sizeof(float4);
  if (target < kL2Block) {
    std::fprintf(stderr, "tilelab-roofline: the device reports %zu bytes of L2; not measuring L2 bandwidth\n",
                 l2_bytes);
    return nullptr;
  }
  int blocks = resident_blocks(prop, reinterpret_cast<const void*>(tilelab_roofline_l2_read), kL2Block);
  const size_t most = l2_bytes / kL2FootprintMaxShare / sizeof(float4);
  if (size_t(blocks) * kL2Block > most) {
    blocks = static_cast<int>(std::max<size_t>(most / kL2Block, 1));
    std::fprintf(stderr,
                 "tilelab-roofline: warning: the %d MiB L2 is small for this many SMs; reading it with %d blocks "
                 "of %d threads, fewer than the GPU holds, so the L2 figure may be low\n",
                 prop.l2CacheSize >> 20, blocks, kL2Block);
  }
  const size_t threads = size_t(blocks) * kL2Block;
  const size_t count = threads * std::max<size_t>(target / threads, 1);
  const size_t buffer_bytes = count * sizeof(float4);
  const double bytes_per_trip = double(threads) * kL2Unroll * sizeof(float4);
  const int trips = static_cast<int>(std::max(1.0, kL2BytesPerRun / bytes_per_trip + 0.5));

  const DeviceBuffer<float4> data(count);
  const DeviceBuffer<float> sink(threads);
  // Every float 0x3C3C3C3C (about 0.0115): ordinary nonzero data, whose sums
  // stay finite however long the run.
  TILELAB_CUDA_CHECK(cudaMemset(data.get(), 0x3C, buffer_bytes));
  const float4* data_ptr = data.get();
  float* sink_ptr = sink.get();
  const std::vector<double> ms = time_runs(runs, [&] {
    tilelab_roofline_l2_read<<<blocks, kL2Block>>>(data_ptr, static_cast<unsigned>(count), trips, sink_ptr);
  });
  const double bytes_per_run = double(trips) * bytes_per_trip;
  json out = rates(ms, bytes_per_run, "gbps_median", "gbps_max");
  out["bytes_per_run"] = bytes_per_run;
  out["buffer_bytes"] = buffer_bytes;
  return out;
}

json measure_shared(const cudaDeviceProp& prop, int runs) {
  // A hint only: the driver may otherwise give the L1 more of the on-chip
  // memory and fit fewer blocks per SM than the occupancy figure assumes.
  TILELAB_CUDA_CHECK(cudaFuncSetAttribute(tilelab_roofline_shared_read, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared));
  const int blocks = resident_blocks(prop, reinterpret_cast<const void*>(tilelab_roofline_shared_read), kSharedBlock);
  const size_t threads = size_t(blocks) * kSharedBlock;
  const double bytes_per_trip = double(threads) * kSharedUnroll * sizeof(float4);
  const int trips = static_cast<int>(std::max(1.0, kSharedBytesPerRun / bytes_per_trip + 0.5));

  const DeviceBuffer<float> sink(threads);
  float* sink_ptr = sink.get();
  const std::vector<double> ms =
      time_runs(runs, [&] { tilelab_roofline_shared_read<<<blocks, kSharedBlock>>>(kSharedSpan, trips, sink_ptr); });
  const double bytes_per_run = double(trips) * bytes_per_trip;
  json out = rates(ms, bytes_per_run, "gbps_median", "gbps_max");
  out["bytes_per_run"] = bytes_per_run;
  return out;
}

}  // namespace tilelab::roofline
