#include <chrono>

#include "invoke.h"
#include "launch_recorder.h"
#include "tilelab/part.h"

namespace tilelab {

Invocation invoke_launcher(const PartBinding& part, const LaunchArgs& args) {
  Invocation call;
  cudaEvent_t start, stop;
  TILELAB_CUDA_CHECK(cudaEventCreate(&start));
  TILELAB_CUDA_CHECK(cudaEventCreate(&stop));

  const bool account = ApiRecorder::active();
  call.window = LaunchRecorder::open_window();
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
  call.wall_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  if (account) call.account = ApiRecorder::end_call();

  if (call.run_error == cudaSuccess && record_error == cudaSuccess) {
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start, stop) == cudaSuccess) call.event_ms = ms;
  } else if (call.run_error == cudaSuccess) {
    call.run_error = record_error;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return call;
}

ExitCode invocation_status(const Invocation& call, std::string* message) {
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

}  // namespace tilelab
