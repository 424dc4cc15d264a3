// Recording which CUDA runtime and driver API calls a launcher makes, and the
// host CPU time it spends outside them, through CUPTI's callback API.
//
// The launch recorder (launch_recorder.h) sees the work that reached the GPU:
// kernels and copies. A launcher that computes on the host needs more than
// that: host memory its kernels can reach (host allocation or registration,
// managed memory), copies through the host, or host threads doing the
// arithmetic. The first two are API calls, named here; the third is CPU time
// that no CUDA call explains, measured here. The harness records; the grader
// judges (grader/tilelab/grading/launch_checks.py).
//
// Only outermost calls count: a runtime call's own driver calls are the
// runtime's doing, not the launcher's. CPU time inside CUDA calls (a
// synchronize that spins, the first launch loading a module) is the
// runtime's, so it is taken out of the launcher's host time.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace tilelab {

using ApiCounts = std::map<std::string, uint64_t>;  // API function as CUPTI names it -> calls

struct CallAccount {
  ApiCounts calls;        // made while the launcher ran, by any thread
  double host_cpu_ms = 0;  // process CPU time of the call, less what CUDA calls and the recorders used
  double cuda_cpu_ms = 0;  // CPU time inside CUDA calls (any thread) during the call
  // What the process wrote during the call (printing, by any thread), from
  // /proc/self/io: printing costs host CPU time that is not arithmetic.
  // -1 where the kernel does not tell.
  int64_t written_bytes = -1;
  int64_t write_calls = -1;
};

class ApiRecorder {
 public:
  // Subscribes to the runtime and driver API callbacks. Call on the
  // harness's main thread, with the launch recorder, before any CUDA call.
  // Returns an empty string on success or the reason it failed.
  static std::string start();
  static bool active();

  // Brackets one launcher call: begin_call() starts the CPU account,
  // launcher_starts() and launcher_returned() sit right around the launcher
  // (calls outside them are the harness's, like its timing events; each is
  // one atomic store), end_call() once the device is idle.
  static void begin_call();
  static void launcher_starts();
  static void launcher_returned();
  static CallAccount end_call();

  // Calls made by threads other than the harness's own while no launcher
  // call was running (a thread the launcher left behind). Removes them.
  static ApiCounts take_outside();

  // CPU time the harness spent on the launcher's behalf during a call
  // (handing over CUPTI's activity buffers): not the launcher's host time.
  static void exclude_cpu_time(uint64_t ns);
};

// Whether a CUDA context already existed when the harness's main() began:
// only code of the part file (a global constructor) can have made one.
// Call after cudaGetDeviceCount() and before any call that creates a context.
// Where a host made the context itself before it loaded the part
// (part_host_main.cu), it says so first: the answer is then whether the
// part's code made CUDA calls while it was loaded.
bool cuda_context_before_harness();
void host_made_the_context(bool part_used_cuda_while_loading);

// CPU clocks, in nanoseconds: this thread's, and the whole process's with the
// children it has waited for.
uint64_t thread_cpu_ns();
uint64_t process_cpu_ns();

}  // namespace tilelab
