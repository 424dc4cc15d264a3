#include <chrono>

#include "counter_profile.h"
#include "invoke.h"
#include "launch_recorder.h"
#include "launcher.h"
#include "tilelab/part.h"

namespace tilelab {

namespace {

// The events around every call, made once: with the recorders on, making
// two events costs microseconds of API calls, and in a launcher process
// that time would fall inside the trusted clock (which starts before the
// launcher's process has begun the call), not only outside the events.
struct CallEvents {
  cudaEvent_t start = nullptr, stop = nullptr;
};

const CallEvents& call_events() {
  static const CallEvents events = [] {
    CallEvents e;
    TILELAB_CUDA_CHECK(cudaEventCreate(&e.start));
    TILELAB_CUDA_CHECK(cudaEventCreate(&e.stop));
    return e;
  }();
  return events;
}

}  // namespace

void make_call_events() {
  call_events();
}

void prepare_call() {
  // The harness's own work before the call (inputs, poison, L2 flush) is not the launcher's.
  LaunchRecorder::clear();
}

Invocation invoke_launcher(const PartBinding& part, const LaunchArgs& args, const std::function<void()>& when_idle,
                           bool take_records) {
  Invocation call;
  const cudaEvent_t start = call_events().start, stop = call_events().stop;

  const bool account = ApiRecorder::active();
  const uint64_t window = LaunchRecorder::open_window();
  call.window = window;
  if (account) ApiRecorder::begin_call();
  const auto t0 = std::chrono::steady_clock::now();
  TILELAB_CUDA_CHECK(cudaEventRecord(start, 0));
  if (account) ApiRecorder::launcher_starts();
  part.call(args);
  if (account) ApiRecorder::launcher_returned();
  // Recorded before any error check, so nothing of the harness's sits between the events.
  const cudaError_t record_error = cudaEventRecord(stop, 0);
  LaunchRecorder::close_window();

  call.launch_error = cudaGetLastError();
  call.run_error = cudaDeviceSynchronize();
  const auto t1 = std::chrono::steady_clock::now();
  if (when_idle) when_idle();
  call.wall_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  if (account) call.account = ApiRecorder::end_call();

  if (call.run_error == cudaSuccess && record_error == cudaSuccess) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start, stop) == cudaSuccess) call.event_ms = ms;
  } else if (call.run_error == cudaSuccess) {
    call.run_error = record_error;
  }
  if (take_records && LaunchRecorder::active()) {
    LaunchRecorder::flush();
    call.record = LaunchRecorder::take(window);
    call.outside = LaunchRecorder::take_unattributed();
  }
  if (account) call.api_outside = ApiRecorder::take_outside();
  return call;
}

ExitCode invocation_status(const Invocation& call, std::string* message) {
  if (call.ended != ExitCode::kOk) {
    *message = call.ended_message;
    return call.ended;
  }
  // A fault is sticky: it can surface from the launcher's own calls (the
  // launch error) or from the synchronize. Either way the context is lost.
  const cudaError_t fault =
      exit_code_for_cuda_error(call.launch_error) == ExitCode::kKernelFault ? call.launch_error : call.run_error;
  if (fault != cudaSuccess) {
    // The status already says what happened; the message adds which error.
    *message = std::string(cudaGetErrorName(fault)) + " (" + cudaGetErrorString(fault) + ")";
    return ExitCode::kKernelFault;
  }
  if (call.launch_error != cudaSuccess) {
    *message = std::string(cudaGetErrorName(call.launch_error)) + " (" + cudaGetErrorString(call.launch_error) + ")";
    return ExitCode::kLaunchError;
  }
  return ExitCode::kOk;
}

std::string call_failure(const PartBinding& part, const LaunchArgs& args) {
  prepare_call();
  const Invocation call = invoke_launcher(part, args);  // its records are dropped with it
  std::string message;
  return invocation_status(call, &message) == ExitCode::kOk ? std::string() : message;
}

InProcessLauncher::InProcessLauncher(const PartBinding& binding, bool record)
    : binding_(binding), info_{binding.part_id, binding.launcher, binding.signature}, record_(record) {
  // CUPTI is set up before the first CUDA call creates a context. If that
  // fails, a missing GPU is the likelier reason, and the one to report.
  std::string profiler_error = record_ ? LaunchRecorder::start() : std::string();
  if (record_ && profiler_error.empty()) profiler_error = ApiRecorder::start();
  int devices = 0;
  const cudaError_t count_error = cudaGetDeviceCount(&devices);
  if (count_error != cudaSuccess || devices == 0) {
    error_ = ExitCode::kNoDevice;
    error_message_ =
        std::string("no CUDA device: ") + (count_error != cudaSuccess ? cudaGetErrorString(count_error) : "none found");
  } else if (!profiler_error.empty()) {
    error_ = ExitCode::kProfilerError;
    error_message_ = "cannot record kernel launches: " + profiler_error;
  } else {
    // Nothing here has made a context yet: one that exists was made by the
    // part file's code before main() (a global constructor), out of the
    // recorders' sight. Checked only where recording.
    context_before_ = record_ && cuda_context_before_harness();
  }
}

std::vector<WindowRecord> take_window_records(const std::vector<uint64_t>& windows) {
  LaunchRecorder::flush();
  std::vector<WindowRecord> out;
  for (uint64_t w : windows) out.push_back(LaunchRecorder::take(w));
  return out;
}

Invocation InProcessLauncher::invoke(const LaunchArgs& args, bool take_records, double /*limit_ms*/) {
  if (take_records) prepare_call();
  return invoke_launcher(binding_, args, {}, take_records);
}

nlohmann::json InProcessLauncher::profile(const LaunchArgs& args, const std::vector<std::string>& metrics,
                                          double call_limit_ms) {
  return to_json(profile_call(metrics, [&] { return call_failure(binding_, args); }, call_limit_ms));
}

void InProcessLauncher::prepare_profile(const std::vector<std::string>& metrics,
                                        const std::vector<uint8_t>& availability) {
  prepare_counters(metrics, availability);
}

std::vector<WindowRecord> InProcessLauncher::take_records(const std::vector<uint64_t>& windows) {
  return take_window_records(windows);
}

}  // namespace tilelab
