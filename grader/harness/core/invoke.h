// One call of a part's launcher, bracketed the same way everywhere:
// a launch-recorder window, the API recorder's account of calls and CPU time,
// CUDA events on the default stream, a host clock, and a device-wide synchronize so that work hidden on another stream is
// waited for (and shows in the wall time) before the call counts as done.
#pragma once

#include <cstdint>
#include <string>

#include "api_recorder.h"
#include "harness.h"
#include "tilelab/exit_codes.h"

namespace tilelab {

struct Invocation {
  uint64_t window = 0;                     // launch-recorder window of this call
  cudaError_t launch_error = cudaSuccess;  // cudaGetLastError() right after the launcher returned
  cudaError_t run_error = cudaSuccess;     // cudaDeviceSynchronize() after that
  double event_ms = 0;                     // between events recorded around the launcher
  double wall_ms = 0;                      // host clock, launcher call to device idle
  CallAccount account;                     // the launcher's API calls and host CPU time (if recorded)
};

Invocation invoke_launcher(const PartBinding& part, const LaunchArgs& args);

// kOk, kKernelFault or kLaunchError, with a message naming the CUDA error.
ExitCode invocation_status(const Invocation& call, std::string* message);

}  // namespace tilelab
