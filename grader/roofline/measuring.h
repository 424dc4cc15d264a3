// What the two sources of tilelab-roofline share: how a measurement is timed
// and turned into rates (every ceiling the same way, so their figures compare),
// and the on-chip measurements that on_chip.cu adds to roofline.cu's.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "device_buffer.h"
#include "tilelab/part.h"

namespace tilelab::roofline {

constexpr double kWarmupMs = 200.0;

// Runs `launch` (one run's work, asynchronous) until kWarmupMs have passed,
// then `runs` times between two events; returns each run's milliseconds.
template <typename Launch>
std::vector<double> time_runs(int runs, Launch launch) {
  const auto warmup_begin = std::chrono::steady_clock::now();
  do {
    launch();
    TILELAB_CUDA_CHECK(cudaGetLastError());
    TILELAB_CUDA_CHECK(cudaDeviceSynchronize());
  } while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warmup_begin).count() <
           kWarmupMs);

  cudaEvent_t start, stop;
  TILELAB_CUDA_CHECK(cudaEventCreate(&start));
  TILELAB_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    TILELAB_CUDA_CHECK(cudaEventRecord(start));
    launch();
    TILELAB_CUDA_CHECK(cudaGetLastError());
    TILELAB_CUDA_CHECK(cudaEventRecord(stop));
    TILELAB_CUDA_CHECK(cudaEventSynchronize(stop));
    float elapsed = 0.0f;
    TILELAB_CUDA_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
    ms.push_back(elapsed);
  }
  TILELAB_CUDA_CHECK(cudaEventDestroy(start));
  TILELAB_CUDA_CHECK(cudaEventDestroy(stop));
  return ms;
}

// Rates from times: the median time gives the median rate, the shortest the
// highest.
inline nlohmann::json rates(const std::vector<double>& ms, double units_per_run, const char* median_key,
                            const char* max_key) {
  const double best_ms = *std::min_element(ms.begin(), ms.end());
  return {{median_key, units_per_run / (tilelab::median(ms) * 1e-3) / 1e9},
          {max_key, units_per_run / (best_ms * 1e-3) / 1e9},
          {"runs", ms.size()}};
}

// L2 read bandwidth (on_chip.cu): gbps_median, gbps_max, runs, bytes_per_run,
// buffer_bytes; null where the device reports no L2 to measure.
nlohmann::json measure_l2(const cudaDeviceProp& prop, int runs);

// Shared-memory load bandwidth of all SMs together (on_chip.cu): gbps_median,
// gbps_max, runs, bytes_per_run.
nlohmann::json measure_shared(const cudaDeviceProp& prop, int runs);

}  // namespace tilelab::roofline
