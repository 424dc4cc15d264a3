// Recording what a launcher starts on the GPU, through CUPTI's activity API.
//
// The grader must know that the work ran in the part's own kernels, with what
// grid, block and shared memory, and that no result was computed on the host
// and copied over. CUPTI reports every kernel and memory copy the process
// starts, with the driver's own timestamps, whatever stream or thread it came
// from. The harness opens a "window" (a CUPTI external correlation id) around
// each launcher call; every launch made inside it is attributed to that call.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tilelab {

// Kernels the harness itself launches (input generation, poisoning, sampling)
// carry this prefix; any other kernel is the part's.
inline constexpr const char* kHarnessKernelPrefix = "tilelab_harness_";

struct KernelLaunch {
  std::string name;  // demangled where possible
  std::array<int, 3> grid{};
  std::array<int, 3> block{};
  int static_shared_bytes = 0;
  int dynamic_shared_bytes = 0;
  int registers_per_thread = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t stream = 0;
  double duration_ms() const { return (end_ns - start_ns) * 1e-6; }
};

struct MemoryOperation {
  std::string kind;  // "HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "memset", "other"
  uint64_t bytes = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string api;  // the runtime (or else driver) call that started it, where CUPTI says
};

struct WindowRecord {
  std::vector<KernelLaunch> kernels;
  std::vector<MemoryOperation> memory;
};

class LaunchRecorder {
 public:
  // Turns activity recording on. Returns an empty string on success or the
  // reason it failed. Call before the first CUDA call of the process.
  static std::string start();
  static bool active();

  // Launches made by this thread between open_window() and close_window()
  // belong to the returned window id.
  static uint64_t open_window();
  static void close_window();

  // Hands over every buffered record. Call after synchronizing the device.
  static void flush();

  // Removes and returns what was recorded for a window.
  static WindowRecord take(uint64_t window);
  // Removes and returns kernels that belong to no window and were not started
  // by the harness: launches from other threads, or left running after a call.
  static std::vector<KernelLaunch> take_unattributed();
  // Drops every record not yet taken.
  static void clear();
};

}  // namespace tilelab
