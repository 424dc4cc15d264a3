// tilelab-roofline: measures the ceilings of the roofline model on the GPU it
// runs on, so that speed targets come from the grading machine and not from a
// datasheet (on an H100 the paper figures are 66.9 TFLOP/s FP32 and 3.35 TB/s;
// this tool measures about 65 TFLOP/s and 3.0 TB/s there). The FP32 FMA rate
// and DRAM bandwidth are measured here; the on-chip levels of a hierarchical
// roofline, L2 and shared-memory bandwidth, in on_chip.cu.
//
// Usage:  tilelab-roofline [--runs N]   measure; print the JSON report
//         tilelab-roofline --device     print only the device object (no measuring)
//         tilelab-roofline --help
// Exit status: 0 ok, 2 usage, 5 no CUDA device, 6 (or another code of
// tilelab/exit_codes.h) when a CUDA call fails.
//
// Each ceiling is the median of N timed runs, each timed with CUDA events,
// after about 200 ms of warm-up so that the clocks have left their idle state
// (measuring.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device_buffer.h"
#include "measuring.h"
#include "tilelab/exit_codes.h"
#include "tilelab/part.h"

using nlohmann::json;
using tilelab::ExitCode;
using tilelab::to_int;
using tilelab::roofline::kWarmupMs;
using tilelab::roofline::rates;
using tilelab::roofline::time_runs;

namespace {

constexpr int kDefaultRuns = 20;
constexpr int kMaxRuns = 100000;

// --- FP32 FMA rate ---------------------------------------------------------

// Independent chains per thread: an FFMA's result is ready only about four
// cycles after issue, so one chain would leave the FMA pipes idle most of the
// time; eight chains, with the many warps of a full SM, keep them busy.
constexpr int kFmaChains = 8;
// Each loop trip is kFmaUnroll * kFmaChains FMAs with one branch, so the
// loop's own instructions cost under 1 % of the issue slots.
constexpr int kFmaUnroll = 16;
// Trips of the unrolled body per thread: with the grid below, one launch does
// about 1.4e11 FMAs, some 4.4 ms on an H100, long enough that the launch
// overhead and the event resolution (about 0.5 us) do not matter.
constexpr int kFmaTrips = 1024;
constexpr int kFmaBlock = 256;
// Grid = this many times the blocks the GPU holds at once: the SMs stay full
// through the launch, and its ragged end (SMs that have run out of blocks
// while others finish) is a small share of it.
constexpr int kFmaWaves = 4;

// x <- x * scale + offset converges to offset / (1 - scale) for 0 < scale < 1,
// so no chain overflows or goes subnormal (either could slow the FMA path).
// scale, offset and never_equal come from the host: the compiler cannot fold
// the chains, and since the sum is stored only when it equals a value it never
// reaches, the work cannot be deleted and costs no memory traffic.
__global__ void tilelab_roofline_fma(float scale, float offset, float never_equal, int trips, float* sink) {
  const unsigned thread = blockIdx.x * blockDim.x + threadIdx.x;
  float chain[kFmaChains];
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) chain[c] = static_cast<float>(thread % 1024u) * 1e-3f + static_cast<float>(c);
  for (int t = 0; t < trips; ++t) {
#pragma unroll
    for (int u = 0; u < kFmaUnroll; ++u) {
#pragma unroll
      for (int c = 0; c < kFmaChains; ++c) chain[c] = fmaf(chain[c], scale, offset);
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < kFmaChains; ++c) sum += chain[c];
  if (sum == never_equal) sink[thread] = sum;
}

// --- DRAM bandwidth --------------------------------------------------------

// Each buffer is at least this many times the L2: a copy then streams from
// and to DRAM, and the few lines the L2 still holds from the previous pass
// add almost nothing. A buffer that fit in the L2 would measure L2 bandwidth.
constexpr size_t kL2Multiple = 8;
// Measured on an H100: 1 GiB buffers read about 1 % faster than 512 MiB ones
// (the gaps between launches weigh less), and no larger size gains more.
constexpr size_t kMinBufferBytes = size_t(1) << 30;
// The two buffers together take at most this share of free memory, leaving
// room for the context and for other processes on a shared GPU.
constexpr double kFreeMemoryShare = 0.6;
// Copies per timed run, alternating direction: one 1 GiB copy takes about
// 0.7 ms on an H100; four make a run of a few milliseconds.
constexpr int kCopyPasses = 4;
constexpr int kCopyBlock = 1024;
constexpr size_t kMaxGridBlocks = 0x7FFFFFFF;  // gridDim.x limit since compute capability 3.0

__global__ void tilelab_roofline_fill(float4* data, size_t count) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float v = static_cast<float>(i & 0xFFFFF);
    data[i] = make_float4(v, v + 1.0f, v + 2.0f, v + 3.0f);
  }
}

// 16-byte loads and stores; consecutive threads touch consecutive float4s, so
// each warp moves whole 512-byte runs. The launch gives each thread about one
// float4 (the loop matters only where the grid is cut to the launch limit):
// on an H100 that reaches 3.0 TB/s, as cudaMemcpy does, while 4 float4s per
// thread gave 2.96 TB/s and one resident wave of threads striding over the
// whole buffer 2.8 TB/s, unrolled or not.
__global__ void tilelab_roofline_copy(const float4* __restrict__ src, float4* __restrict__ dst, size_t count) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) dst[i] = src[i];
}

// --- Measuring ---------------------------------------------------------------

json measure_fma(const cudaDeviceProp& prop, int runs) {
  int blocks_per_sm = 0;
  TILELAB_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm, tilelab_roofline_fma, kFmaBlock, 0));
  if (blocks_per_sm < 1) blocks_per_sm = 1;
  const int blocks = prop.multiProcessorCount * blocks_per_sm * kFmaWaves;
  const uint64_t threads = uint64_t(blocks) * kFmaBlock;
  const double flop_per_run = 2.0 * double(threads) * kFmaTrips * kFmaUnroll * kFmaChains;

  const tilelab::DeviceBuffer<float> sink(threads);
  float* sink_ptr = sink.get();
  const std::vector<double> ms = time_runs(runs, [&] {
    tilelab_roofline_fma<<<blocks, kFmaBlock>>>(0.999f, 0.001f, -1.0f, kFmaTrips, sink_ptr);
  });
  json out = rates(ms, flop_per_run, "gflops_median", "gflops_max");
  out["flop_per_run"] = flop_per_run;
  return out;
}

json measure_dram(const cudaDeviceProp& prop, int runs) {
  size_t free_bytes = 0, total_bytes = 0;
  TILELAB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  size_t buffer_bytes = std::max(kL2Multiple * size_t(prop.l2CacheSize), kMinBufferBytes);
  const size_t cap = static_cast<size_t>(kFreeMemoryShare * double(free_bytes) / 2.0);
  if (buffer_bytes > cap) {
    buffer_bytes = cap;
    std::fprintf(stderr, "tilelab-roofline: only %zu MiB free; using two %zu MiB buffers\n", free_bytes >> 20,
                 buffer_bytes >> 20);
  }
  buffer_bytes -= buffer_bytes % sizeof(float4);
  if (buffer_bytes < (size_t(1) << 20)) {
    std::fprintf(stderr, "tilelab-roofline: only %zu bytes of device memory free; cannot measure DRAM bandwidth\n",
                 free_bytes);
    tilelab::end_process(ExitCode::kCudaApiError);
  }
  if (buffer_bytes < 2 * size_t(prop.l2CacheSize)) {
    std::fprintf(stderr,
                 "tilelab-roofline: warning: buffers of %zu MiB are not much larger than the %d MiB L2; "
                 "the DRAM figure will be too high\n",
                 buffer_bytes >> 20, prop.l2CacheSize >> 20);
  }
  const size_t count = buffer_bytes / sizeof(float4);

  const tilelab::DeviceBuffer<float4> a(count);
  const tilelab::DeviceBuffer<float4> b(count);
  float4* a_ptr = a.get();
  float4* b_ptr = b.get();

  const int blocks = static_cast<int>(std::min<size_t>((count + kCopyBlock - 1) / kCopyBlock, kMaxGridBlocks));
  // Written once so that the copies move ordinary data, not fresh allocations.
  tilelab_roofline_fill<<<blocks, kCopyBlock>>>(a_ptr, count);
  TILELAB_CUDA_CHECK(cudaGetLastError());
  tilelab_roofline_fill<<<blocks, kCopyBlock>>>(b_ptr, count);
  TILELAB_CUDA_CHECK(cudaGetLastError());

  const double bytes_per_run = double(kCopyPasses) * 2.0 * double(buffer_bytes);  // each pass reads and writes
  const std::vector<double> ms = time_runs(runs, [&] {
    for (int pass = 0; pass < kCopyPasses; ++pass) {
      const bool forward = pass % 2 == 0;
      tilelab_roofline_copy<<<blocks, kCopyBlock>>>(forward ? a_ptr : b_ptr, forward ? b_ptr : a_ptr, count);
    }
  });
  json out = rates(ms, bytes_per_run, "gbps_median", "gbps_max");
  out["bytes_per_run"] = bytes_per_run;
  out["buffer_bytes"] = buffer_bytes;
  return out;
}

// --- Command line ------------------------------------------------------------

// Formatted like nvidia-smi's UUIDs, without its "GPU-" or "MIG-" prefix
// (cudaDeviceProp cannot tell which of the two it is).
std::string uuid_string(const cudaUUID_t& uuid) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    const auto byte = static_cast<unsigned char>(uuid.bytes[i]);
    out += kHex[byte >> 4];
    out += kHex[byte & 0xF];
  }
  return out;
}

json device_json(const cudaDeviceProp& p) {
  // The versions are part of what a calibration of the speed targets
  // depends on (a new driver can change a kernel's speed): 13000 is 13.0.
  int driver = 0, runtime = 0;
  TILELAB_CUDA_CHECK(cudaDriverGetVersion(&driver));
  TILELAB_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  return {{"name", p.name},
          {"uuid", uuid_string(p.uuid)},
          {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
          {"multiprocessors", p.multiProcessorCount},
          {"l2_bytes", p.l2CacheSize},
          {"memory_bytes", p.totalGlobalMem},
          {"driver_version", driver},
          {"runtime_version", runtime}};
}

void print_usage(std::FILE* to, const char* program) {
  std::fprintf(to,
               "usage: %s [--runs N]   measure the FP32 FMA rate and DRAM, L2 and shared-memory bandwidth; print JSON\n"
               "       %s --device     print only the device (name, uuid, ...) as JSON, measuring nothing\n"
               "       %s --help\n"
               "Each ceiling is the median of N timed runs (default %d) after about %.0f ms of warm-up.\n",
               program, program, program, kDefaultRuns, kWarmupMs);
}

[[noreturn]] void usage_error(const char* program, const std::string& message) {
  std::fprintf(stderr, "tilelab-roofline: %s\n", message.c_str());
  print_usage(stderr, program);
  std::exit(to_int(ExitCode::kUsage));
}

int parse_runs(const char* program, const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 1 || value > kMaxRuns) {
    usage_error(program, std::string("--runs wants a whole number from 1 to ") + std::to_string(kMaxRuns) +
                             ", not '" + text + "'");
  }
  return static_cast<int>(value);
}

}  // namespace

int main(int argc, char** argv) {
  int runs = kDefaultRuns;
  bool device_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout, argv[0]);
      return to_int(ExitCode::kOk);
    } else if (arg == "--device") {
      device_only = true;
    } else if (arg == "--runs") {
      if (i + 1 >= argc) usage_error(argv[0], "--runs needs a value");
      runs = parse_runs(argv[0], argv[++i]);
    } else if (arg.rfind("--runs=", 0) == 0) {
      runs = parse_runs(argv[0], argv[i] + std::strlen("--runs="));
    } else {
      usage_error(argv[0], "unknown argument '" + arg + "'");
    }
  }

  int devices = 0;
  const cudaError_t count_error = cudaGetDeviceCount(&devices);
  if (count_error != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "tilelab-roofline: no CUDA device: %s [exit %d: %s]\n",
                 count_error != cudaSuccess ? cudaGetErrorString(count_error) : "none found",
                 to_int(ExitCode::kNoDevice), tilelab::exit_code_info(ExitCode::kNoDevice).name);
    return to_int(ExitCode::kNoDevice);
  }
  // Device 0, as for the harness: CUDA_VISIBLE_DEVICES picks the GPU. Its
  // properties need no context: --device, which every grading waits for,
  // answers without one (a context costs about 0.3 s, and start-ups of
  // processes side by side wait for each other's).
  cudaDeviceProp prop;
  TILELAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const json device = device_json(prop);
  if (device_only) {
    std::cout << device.dump(2) << '\n';
    return to_int(ExitCode::kOk);
  }
  TILELAB_CUDA_CHECK(cudaSetDevice(0));

  // Version 2 added "l2" and "shared"; the grader re-measures a GPU whose
  // cached report is of another version.
  json report = {{"version", 2}, {"tool", "tilelab-roofline"}, {"device", device}};
  report["fp32_fma"] = measure_fma(prop, runs);
  report["dram"] = measure_dram(prop, runs);
  report["l2"] = tilelab::roofline::measure_l2(prop, runs);
  report["shared"] = tilelab::roofline::measure_shared(prop, runs);
  std::cout << report.dump(2) << '\n';
  return to_int(ExitCode::kOk);
}
