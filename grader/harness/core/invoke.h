// One call of a part's launcher, bracketed the same way everywhere:
// a launch-recorder window, the API recorder's account of calls and CPU time,
// CUDA events on the default stream, a host clock, and a device-wide synchronize so that work hidden on another stream
// is waited for (and shows in the wall time) before the call counts as done.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "api_recorder.h"
#include "harness.h"
#include "launch_recorder.h"
#include "tilelab/exit_codes.h"

namespace tilelab {

struct Invocation {
  uint64_t window = 0;                     // the launch recorder's window of the call, in the launcher's process
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
  // The call was still running at the limit it was given, and the launcher's
  // process was ended with it (LauncherProcess only; `ended` says so too):
  // only wall_ms, the time waited, is known of it.
  bool abandoned = false;
};

// Makes the CUDA events that bracket every call of this process, if not yet
// made. A launcher process makes them before its first "ready".
void make_call_events();

// Drops what was recorded before a call (the harness's own work). Call it
// before the clock of the call starts: it flushes CUPTI's buffers.
void prepare_call();

// The call itself, in this process: brackets the launcher, waits for the
// device, calls `when_idle` at once (a launcher process says "done" there,
// before anything else of the harness's runs), then takes the call's
// kernels and copies if `take_records` (see Launcher::invoke).
Invocation invoke_launcher(const PartBinding& part, const LaunchArgs& args, const std::function<void()>& when_idle = {},
                           bool take_records = true);

// The kernels and copies of earlier calls, by window, in this process: one flush for all.
std::vector<WindowRecord> take_window_records(const std::vector<uint64_t>& windows);

// One untimed call whose records are dropped: "" if it went well, else why not.
std::string call_failure(const PartBinding& part, const LaunchArgs& args);
// kOk, kKernelFault or kLaunchError (or how the launcher's process ended),
// with a message naming the CUDA error.
ExitCode invocation_status(const Invocation& call, std::string* message);

}  // namespace tilelab
