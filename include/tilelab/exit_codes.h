// tilelab/exit_codes.h: how a harness process ends.
//
// The exit status of a harness is an interface between the untrusted process
// that runs a part and the grader that judges it. Codes are only ever added,
// never renumbered. `tilelab-verify --exit-codes` prints this table as JSON so
// the grader reads it from a binary that holds no student code.
#pragma once

namespace tilelab {

enum class ExitCode : int {
  kOk = 0,               // every case ran; results and outputs are written
  kUsage = 2,            // bad command line
  kBadCaseFile = 3,      // the case file is unreadable or breaks its schema
  kIoError = 4,          // an input could not be read or an output not written
  kNoDevice = 5,         // no CUDA device is visible
  kCudaApiError = 6,     // a CUDA call failed for a reason other than those below
  kProfilerError = 7,    // CUPTI could not be set up to record launches
  kNoKernel = 10,        // the launcher returned without starting any kernel
  kLaunchError = 11,     // a launch was rejected (bad configuration, too much shared memory...)
  kKernelFault = 12,     // a kernel faulted (illegal address, trap, device assert...)
  kCrash = 13,           // the process received a fatal signal (segfault, abort...)
  kEarlyExit = 14,       // exit() was called before the harness finished
  kNotImplemented = 15,  // a TODO stub of the starter code was reached
};

struct ExitCodeInfo {
  ExitCode code;
  const char* name;     // stable identifier, also the `status` string in result JSON
  const char* meaning;  // one sentence for a student or TA
};

inline constexpr ExitCodeInfo kExitCodeTable[] = {
    {ExitCode::kOk, "ok", "every case ran and its results were written"},
    {ExitCode::kUsage, "usage", "the harness was started with a bad command line"},
    {ExitCode::kBadCaseFile, "bad_case_file", "the case file could not be read or is invalid"},
    {ExitCode::kIoError, "io_error", "an input file could not be read or an output file not written"},
    {ExitCode::kNoDevice, "no_device", "no CUDA device is visible to the harness"},
    {ExitCode::kCudaApiError, "cuda_api_error", "a CUDA runtime call failed"},
    {ExitCode::kProfilerError, "profiler_error", "CUPTI could not be set up to record kernel launches"},
    {ExitCode::kNoKernel, "no_kernel", "the launcher returned without launching any kernel"},
    {ExitCode::kLaunchError, "launch_error",
     "a kernel launch was rejected (invalid grid or block, too much shared memory, too many resources)"},
    {ExitCode::kKernelFault, "kernel_fault",
     "a kernel faulted while running (illegal memory access, trap or device-side assert)"},
    {ExitCode::kCrash, "crash", "the process was killed by a fatal signal (segmentation fault, abort, ...)"},
    {ExitCode::kEarlyExit, "early_exit", "the part called exit() before the harness had finished"},
    {ExitCode::kNotImplemented, "not_implemented", "a TODO(student) stub was reached: the part is not written yet"},
};

inline constexpr const ExitCodeInfo& exit_code_info(ExitCode code) {
  for (const ExitCodeInfo& info : kExitCodeTable) {
    if (info.code == code) return info;
  }
  return kExitCodeTable[0];  // unreachable for codes of the enum; the table test checks it
}

inline constexpr int to_int(ExitCode code) {
  return static_cast<int>(code);
}

}  // namespace tilelab
