// tilelab/part.h: the one project header a part file may include.
//
// It gives a part file two things:
//   TILELAB_CUDA_CHECK(call)   checks a CUDA runtime call; on failure it prints
//                              the call, file:line and the error's name, and ends
//                              the process with the exit code for that kind of
//                              error (see tilelab/exit_codes.h).
//   TILELAB_TODO(what)         marks host code a student has not written yet;
//   TILELAB_DEVICE_TODO(what)  the same inside a kernel. Both fail loudly and
//                              recognisably instead of leaving a silent zero
//                              matrix that could pass a 1x1 case.
// The harness uses the same macro for its own CUDA calls, so every failure is
// reported the same way.
#pragma once

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>

#include "tilelab/exit_codes.h"

namespace tilelab {

// Errors that leave the context unusable come from a kernel that faulted;
// errors raised at launch time come from its configuration; anything else is
// a failing API call.
inline ExitCode exit_code_for_cuda_error(cudaError_t err) {
  switch (err) {
    case cudaSuccess: return ExitCode::kOk;
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorLaunchTimeout: return ExitCode::kKernelFault;
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchOutOfResources:
    case cudaErrorCooperativeLaunchTooLarge: return ExitCode::kLaunchError;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver: return ExitCode::kNoDevice;
    default: return ExitCode::kCudaApiError;
  }
}

// Ends the process at once with `code`, after flushing what was printed.
// _exit skips atexit handlers on purpose: the harness treats a plain exit()
// during a part's launcher as the part quitting early.
[[noreturn]] inline void end_process(ExitCode code) {
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(to_int(code));
}

[[noreturn]] inline void fail_cuda_call(cudaError_t err, const char* expr, const char* file, int line,
                                        const char* func) {
  const ExitCode code = exit_code_for_cuda_error(err);
  std::fprintf(stderr, "tilelab: CUDA error %s (%s) from `%s` at %s:%d in %s [exit %d: %s]\n", cudaGetErrorName(err),
               cudaGetErrorString(err), expr, file, line, func, to_int(code), exit_code_info(code).name);
  end_process(code);
}

[[noreturn]] inline void todo_reached(const char* what, const char* file, int line) {
  std::fprintf(stderr, "tilelab: TODO(student) not done yet: %s (%s:%d) [exit %d: %s]\n", what, file, line,
               to_int(ExitCode::kNotImplemented), exit_code_info(ExitCode::kNotImplemented).name);
  end_process(ExitCode::kNotImplemented);
}

}  // namespace tilelab

#define TILELAB_CUDA_CHECK(call)                                                       \
  do {                                                                                 \
    const cudaError_t tilelab_status_ = (call);                                        \
    if (tilelab_status_ != cudaSuccess) {                                              \
      ::tilelab::fail_cuda_call(tilelab_status_, #call, __FILE__, __LINE__, __func__); \
    }                                                                                  \
  } while (false)

#define TILELAB_TODO(what) ::tilelab::todo_reached(what, __FILE__, __LINE__)

// A device-side assert, written out so that NDEBUG cannot remove it: the driver
// prints the message with the block and thread, and the launch ends with
// cudaErrorAssert, which the harness reports as a kernel fault.
// __assertfail is the device runtime's assert entry point (what assert()
// becomes in device code); it is declared here because <assert.h> hides its
// declarations when NDEBUG is set.
extern "C" __device__ void __assertfail(const char* message, const char* file, unsigned int line, const char* function,
                                        size_t char_size);
#define TILELAB_DEVICE_TODO(what) \
  __assertfail("TODO(student) not done yet: " what, __FILE__, __LINE__, __func__, sizeof(char))
