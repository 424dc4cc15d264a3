// CUPTI's range profiler for one list of metrics, as counter_profile.cpp
// uses it: the host's setup, the context's, the passes of user ranges and
// the values they read, and what a CUPTI failure means in the grader's
// words. Only counter_profile.cpp includes it.
#pragma once

#include <cuda.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "counter_profile.h"

namespace tilelab::counter_session {

// A CUPTI call that failed: which one, and CUPTI's word for it.
struct CuptiFailure {
  const char* call;
  CUptiResult result;
};

// Throws CuptiFailure where `result` is not CUPTI_SUCCESS.
void check(CUptiResult result, const char* call);

// The profile that a CUPTI failure leaves: why, in the grader's words.
CounterProfile failure(const CuptiFailure& f);

// This GPU's counter availability image, asked of the driver. Asking holds
// the GPU's counters for a moment, so a run asks only in its GPU turn, and
// a setup made before the turn is given the image (counter_availability()).
std::vector<uint8_t> query_availability(CUcontext ctx);

// The calling thread's CUDA context, through the runtime: linking libcuda
// would keep the harness from starting (and saying so) on a machine without a GPU.
CUcontext current_context();

// The current device's chip name, as CUPTI's metric tables know it; after cuptiProfilerInitialize.
const char* current_chip_name();

// What CUPTI holds for one profile; released in reverse order, whatever failed.
class Session {
 public:
  ~Session();

  // The host's part: CUPTI's metric tables for this chip and the config
  // image of `metrics`, those this GPU's profiler knows (the others go to
  // `unavailable`). With the GPU's counter availability image given it
  // touches no counters, so it may be made while other runs share the GPU;
  // without one it asks the driver for it, which only a run in its GPU turn may.
  const std::vector<std::string>& prepare(const std::vector<std::string>& metrics,
                                          const std::vector<uint8_t>& availability,
                                          std::vector<std::string>* unavailable);

  // The context's part, after prepare(): the range profiler on this context,
  // its counter data and the config, which hold the GPU's counters until the
  // session ends (two processes cannot both hold them).
  // Armed again after a profile, the range profiler is enabled already:
  // only its counter data and config are set afresh, for `ranges` calls a pass.
  void arm(size_t ranges);

  // One pass: each call inside a range of its own, named by its index, L2
  // flushed before each (the first's before Start, as for a single call).
  // True once every pass was made. Where a call fails, the pass still ends
  // and `failed` says which call (else it is calls.size()); `first_ms`: how long the first call took.
  bool pass(const std::vector<std::function<std::string()>>& calls, size_t* failed, std::string* call_error,
            double* first_ms);

  const std::vector<std::string>& taken() const { return taken_; }

  // The values of every range, in the order of the calls: `ranges` of them, each named by its index.
  std::vector<std::vector<double>> values(size_t ranges);

 private:
  bool initialized_ = false;
  CUcontext ctx_ = nullptr;
  CUpti_RangeProfiler_Object* object_ = nullptr;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  std::vector<uint8_t> availability_, config_, counters_;
  std::vector<std::string> taken_;  // the metrics collected; names_ points into it
  std::vector<const char*> names_;
};

}  // namespace tilelab::counter_session
