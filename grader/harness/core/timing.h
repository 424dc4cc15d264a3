// Timing a part: warm-up, repeated calls, each on fresh inputs.
//
// Per call: new input contents generated into one of several rotating
// buffers (so neither a pointer-keyed nor a content-keyed cache of an earlier
// answer survives), P poisoned, L2 flushed by writing a buffer twice its
// size, the device synchronized so the clock starts on an idle GPU; then the
// launcher between CUDA events, and a device-wide synchronize. Outside the
// timed bracket a sample of P (corners first) is read back, with the number
// of elements left unwritten, so the verifier can check every timed call.
// Event time, host wall time and the CUPTI kernel time are all reported, with
// each call's host CPU time and the API calls of every call (api_recorder.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "case_file.h"
#include "harness.h"
#include "tilelab/exit_codes.h"

namespace tilelab {

struct TimingOutcome {
  nlohmann::json result;
  ExitCode code = ExitCode::kOk;  // a failure during a timed call ends the case
  std::string message;
};

class Launcher;
TimingOutcome run_timing(const CaseFile& file, const CaseSpec& spec, Launcher& launcher, const cudaDeviceProp& given);

}  // namespace tilelab
