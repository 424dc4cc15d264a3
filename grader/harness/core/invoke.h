// One call of a part's launcher, bracketed the same way everywhere:
// a launch-recorder window, the API recorder's account of calls and CPU time,
// CUDA events on the default stream, a host clock, and a device-wide synchronize so that work hidden on another stream is
// waited for (and shows in the wall time) before the call counts as done.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api_recorder.h"
#include "harness.h"
#include "launch_recorder.h"
#include "tilelab/exit_codes.h"

namespace tilelab {

struct Invocation {
  cudaError_t launch_error = cudaSuccess;  // cudaGetLastError() right after the launcher returned
  cudaError_t run_error = cudaSuccess;     // cudaDeviceSynchronize() after that
  double event_ms = 0;                     // between events recorded around the launcher, in its process
  double wall_ms = 0;                      // host clock, launcher call to device idle
  CallAccount account;                     // the launcher's API calls and host CPU time (if recorded)
  // What was recorded (when recording): the call's kernels and copies, and
  // what ran outside any call since the one before (kernels of other
  // threads or left running, API calls of other threads).
  WindowRecord record;
  std::vector<KernelLaunch> outside;
  ApiCounts api_outside;
  // The launcher's process ended during the call (LauncherProcess only):
  // how, as the exit code it would have given, and in words.
  ExitCode ended = ExitCode::kOk;
  std::string ended_message;
};

// The call itself, in this process: drops what was recorded before it,
// brackets the launcher, waits for the device, takes the call's records.
Invocation invoke_launcher(const PartBinding& part, const LaunchArgs& args);

// kOk, kKernelFault or kLaunchError (or how the launcher's process ended),
// with a message naming the CUDA error.
ExitCode invocation_status(const Invocation& call, std::string* message);

}  // namespace tilelab
