#include "counter_profile.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>

#include "hex.h"

namespace tilelab {

namespace {

// A CUPTI call that failed: which one, and CUPTI's word for it.
struct CuptiFailure {
  const char* call;
  CUptiResult result;
};

void check(CUptiResult result, const char* call) {
  if (result != CUPTI_SUCCESS) throw CuptiFailure{call, result};
}

std::string describe(const CuptiFailure& f) {
  const char* text = nullptr;
  cuptiGetResultString(f.result, &text);
  return std::string(f.call) + ": " + (text != nullptr ? text : "error " + std::to_string(f.result));
}

// The profile that a CUPTI failure leaves: why, in the grader's words.
CounterProfile failure(const CuptiFailure& f) {
  CounterProfile out;
  switch (f.result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      out.status = kProfileNotAllowed;
      out.message =
          "this machine lets only administrators read the GPU's performance counters "
          "(the driver's RmProfilingAdminOnly)";
      break;
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
      out.status = kProfileUnsupported;
      out.message = describe(f);
      break;
    default: out.status = kProfileFailed; out.message = describe(f);
  }
  return out;
}

// This GPU's counter availability image, asked of the driver. Asking holds
// the GPU's counters for a moment, so a run asks only in its GPU turn, and
// a setup made before the turn is given the image (counter_availability()).
std::vector<uint8_t> query_availability(CUcontext ctx) {
  CUpti_Profiler_GetCounterAvailability_Params avail{CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  avail.ctx = ctx;
  check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
  std::vector<uint8_t> image(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = image.data();
  check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
  return image;
}

// The calling thread's CUDA context, through the runtime: linking libcuda
// would keep the harness from starting (and saying so) on a machine without a GPU.
CUcontext current_context() {
  using GetCurrent = CUresult (*)(CUcontext*);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  CUcontext ctx = nullptr;
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &entry, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      entry == nullptr || reinterpret_cast<GetCurrent>(entry)(&ctx) != CUDA_SUCCESS || ctx == nullptr) {
    throw CuptiFailure{"cuCtxGetCurrent", CUPTI_ERROR_INVALID_CONTEXT};
  }
  return ctx;
}

// The current device's chip name, as CUPTI's metric tables know it; after cuptiProfilerInitialize.
const char* current_chip_name() {
  int device = 0;
  cudaGetDevice(&device);
  CUpti_Device_GetChipName_Params chip{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = static_cast<size_t>(device);
  check(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
  return chip.pChipName;
}

// A cold L2 before every pass: written over with a buffer twice its size.
void flush_l2() {
  static void* scratch = nullptr;
  static size_t bytes = 0;
  if (scratch == nullptr) {
    int device = 0, l2 = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) != cudaSuccess || l2 <= 0) {
      return;
    }
    bytes = 2 * static_cast<size_t>(l2);
    if (cudaMalloc(&scratch, bytes) != cudaSuccess) {
      scratch = nullptr;
      return;
    }
  }
  cudaMemset(scratch, 0, bytes);
  cudaDeviceSynchronize();
}

// What CUPTI holds for one profile; released in reverse order, whatever failed.
class Session {
 public:
  ~Session() {
    if (object_ != nullptr) {
      CUpti_RangeProfiler_Disable_Params p{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
      p.pRangeProfilerObject = object_;
      cuptiRangeProfilerDisable(&p);
    }
    if (host_ != nullptr) {
      CUpti_Profiler_Host_Deinitialize_Params p{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
      p.pHostObject = host_;
      cuptiProfilerHostDeinitialize(&p);
    }
    if (initialized_) {
      CUpti_Profiler_DeInitialize_Params p{CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
      cuptiProfilerDeInitialize(&p);
    }
  }

  // The host's part: CUPTI's metric tables for this chip and the config
  // image of `metrics`, those this GPU's profiler knows (the others go to
  // `unavailable`). With the GPU's counter availability image given it
  // touches no counters, so it may be made while other runs share the GPU;
  // without one it asks the driver for it, which only a run in its GPU turn may.
  const std::vector<std::string>& prepare(const std::vector<std::string>& metrics,
                                          const std::vector<uint8_t>& availability,
                                          std::vector<std::string>* unavailable) {
    CUpti_Profiler_Initialize_Params init{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    check(cuptiProfilerInitialize(&init), "cuptiProfilerInitialize");
    initialized_ = true;
    ctx_ = current_context();
    const char* chip = current_chip_name();
    // Without the counter availability image CUPTI schedules one metric a
    // pass (25 passes instead of 4 on the H100), which costs more than reading it.
    availability_ = availability.empty() ? query_availability(ctx_) : availability;
    CUpti_Profiler_Host_Initialize_Params host{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = chip;
    host.pCounterAvailabilityImage = availability_.data();
    check(cuptiProfilerHostInitialize(&host), "cuptiProfilerHostInitialize");
    host_ = host.pHostObject;

    // Every metric in one call: added one at a time, each would be scheduled in passes of its own.
    std::vector<std::string>& taken = taken_;
    taken.clear();
    for (const std::string& name : metrics) {
      CUpti_Profiler_Host_GetMetricProperties_Params props{CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
      props.pHostObject = host_;
      props.pMetricName = name.c_str();
      (cuptiProfilerHostGetMetricProperties(&props) == CUPTI_SUCCESS ? taken : *unavailable).push_back(name);
    }
    names_.clear();
    for (const std::string& name : taken) names_.push_back(name.c_str());
    if (taken.empty()) return taken;
    CUpti_Profiler_Host_ConfigAddMetrics_Params add{CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    add.pHostObject = host_;
    add.ppMetricNames = names_.data();
    add.numMetrics = names_.size();
    check(cuptiProfilerHostConfigAddMetrics(&add), "cuptiProfilerHostConfigAddMetrics");
    CUpti_Profiler_Host_GetConfigImageSize_Params size{CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = host_;
    check(cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize");
    config_.resize(size.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params image{CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    image.pHostObject = host_;
    image.configImageSize = config_.size();
    image.pConfigImage = config_.data();
    check(cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage");
    return taken;
  }

  // The context's part, after prepare(): the range profiler on this context,
  // its counter data and the config, which hold the GPU's counters until the
  // session ends (two processes cannot both hold them).
  // Armed again after a profile, the range profiler is enabled already:
  // only its counter data and config are set afresh, for `ranges` calls a pass.
  void arm(size_t ranges) {
    if (object_ == nullptr) {
      CUpti_RangeProfiler_Enable_Params enable{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
      enable.ctx = ctx_;
      check(cuptiRangeProfilerEnable(&enable), "cuptiRangeProfilerEnable");
      object_ = enable.pRangeProfilerObject;
    }

    CUpti_RangeProfiler_GetCounterDataSize_Params data{CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    data.pRangeProfilerObject = object_;
    data.pMetricNames = names_.data();
    data.numMetrics = names_.size();
    data.maxNumOfRanges = ranges;
    data.maxNumRangeTreeNodes = static_cast<uint32_t>(ranges);
    check(cuptiRangeProfilerGetCounterDataSize(&data), "cuptiRangeProfilerGetCounterDataSize");
    counters_.assign(data.counterDataSize, 0);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params init{
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    init.pRangeProfilerObject = object_;
    init.counterDataSize = counters_.size();
    init.pCounterData = counters_.data();
    check(cuptiRangeProfilerCounterDataImageInitialize(&init), "cuptiRangeProfilerCounterDataImageInitialize");

    CUpti_RangeProfiler_SetConfig_Params set{CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    set.pRangeProfilerObject = object_;
    set.configSize = config_.size();
    set.pConfig = config_.data();
    set.counterDataImageSize = counters_.size();
    set.pCounterDataImage = counters_.data();
    set.range = CUPTI_UserRange;
    set.replayMode = CUPTI_UserReplay;
    set.maxRangesPerPass = ranges;
    set.numNestingLevels = 1;
    set.minNestingLevel = 1;
    set.passIndex = 0;
    set.targetNestingLevel = 1;
    check(cuptiRangeProfilerSetConfig(&set), "cuptiRangeProfilerSetConfig");
  }

  // One pass: each call inside a range of its own, named by its index, L2
  // flushed before each (the first's before Start, as for a single call).
  // True once every pass was made. Where a call fails, the pass still ends
  // and `failed` says which call (else it is calls.size()); `first_ms`: how long the first call took.
  bool pass(const std::vector<std::function<std::string()>>& calls, size_t* failed, std::string* call_error,
            double* first_ms) {
    *failed = calls.size();
    flush_l2();
    CUpti_RangeProfiler_Start_Params start{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    start.pRangeProfilerObject = object_;
    check(cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart");
    for (size_t i = 0; i < calls.size() && *failed == calls.size(); ++i) {
      if (i > 0) flush_l2();  // outside every range: its traffic is counted in none
      const std::string name = std::to_string(i);
      CUpti_RangeProfiler_PushRange_Params push{CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
      push.pRangeProfilerObject = object_;
      push.pRangeName = name.c_str();
      check(cuptiRangeProfilerPushRange(&push), "cuptiRangeProfilerPushRange");
      const auto t0 = std::chrono::steady_clock::now();
      *call_error = calls[i]();
      if (i == 0) *first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!call_error->empty()) *failed = i;
      CUpti_RangeProfiler_PopRange_Params pop{CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
      pop.pRangeProfilerObject = object_;
      check(cuptiRangeProfilerPopRange(&pop), "cuptiRangeProfilerPopRange");
    }
    CUpti_RangeProfiler_Stop_Params stop{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    stop.pRangeProfilerObject = object_;
    check(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop");
    return stop.isAllPassSubmitted != 0;
  }

  const std::vector<std::string>& taken() const { return taken_; }

  // The values of every range, in the order of the calls: `ranges` of them, each named by its index.
  std::vector<std::vector<double>> values(size_t ranges) {
    CUpti_RangeProfiler_DecodeData_Params decode{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    decode.pRangeProfilerObject = object_;
    check(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData");
    CUpti_RangeProfiler_GetCounterDataInfo_Params info{CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = counters_.data();
    info.counterDataImageSize = counters_.size();
    check(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo");
    if (info.numTotalRanges < ranges || decode.numOfRangeDropped > 0) {
      throw CuptiFailure{"cuptiRangeProfilerGetCounterDataInfo", CUPTI_ERROR_UNKNOWN};
    }
    std::vector<std::vector<double>> out;
    for (size_t r = 0; r < ranges; ++r) {
      if (ranges > 1) {  // the ranges come back in the order they were made: each is asked whose it is all the same
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params range{
            CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
        range.pCounterDataImage = counters_.data();
        range.counterDataImageSize = counters_.size();
        range.rangeIndex = r;
        range.rangeDelimiter = "/";
        check(cuptiRangeProfilerCounterDataGetRangeInfo(&range), "cuptiRangeProfilerCounterDataGetRangeInfo");
        if (range.rangeName == nullptr || std::string(range.rangeName) != std::to_string(r)) {
          throw CuptiFailure{"cuptiRangeProfilerCounterDataGetRangeInfo", CUPTI_ERROR_UNKNOWN};
        }
      }
      out.emplace_back(names_.size(), 0.0);
      CUpti_Profiler_Host_EvaluateToGpuValues_Params eval{CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
      eval.pHostObject = host_;
      eval.pCounterDataImage = counters_.data();
      eval.counterDataImageSize = counters_.size();
      eval.rangeIndex = r;
      eval.ppMetricNames = names_.data();
      eval.numMetrics = names_.size();
      eval.pMetricValues = out.back().data();
      check(cuptiProfilerHostEvaluateToGpuValues(&eval), "cuptiProfilerHostEvaluateToGpuValues");
    }
    return out;
  }

 private:
  bool initialized_ = false;
  CUcontext ctx_ = nullptr;
  CUpti_RangeProfiler_Object* object_ = nullptr;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  std::vector<uint8_t> availability_, config_, counters_;
  std::vector<std::string> taken_;  // the metrics collected; names_ points into it
  std::vector<const char*> names_;
};

}  // namespace

nlohmann::json to_json(const CounterProfile& profile) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [name, value] : profile.values) values[name] = value;
  return {{"status", profile.status},
          {"message", profile.message},
          {"metrics", values},
          {"unavailable", profile.unavailable},
          {"passes", profile.passes},
          {"ranges", profile.ranges},
          {"setup_seconds", profile.setup_seconds},
          {"passes_seconds", profile.passes_seconds},
          {"prepared_seconds", profile.prepared_seconds}};
}

namespace {

// CUPTI's host part for one list of metrics (Session::prepare), or why it failed.
struct Prepared {
  std::vector<std::string> metrics;  // as asked for
  std::unique_ptr<Session> session;  // null where the setup failed
  std::vector<std::string> unavailable;
  CounterProfile failed;
  double seconds = 0;
};

// This process's, from prepare_counters until profile_call takes it. Never
// freed at exit: CUPTI may be gone by then.
Prepared* prepared = nullptr;

// Where keep_counter_session() asked for it, the session of the last
// profile, kept enabled for the next profile of the same metrics. Never
// freed at exit, as `prepared`.
bool keeping = false;
Prepared* kept = nullptr;

std::unique_ptr<Prepared> prepare_now(const std::vector<std::string>& metrics,
                                      const std::vector<uint8_t>& availability) {
  auto p = std::make_unique<Prepared>();
  p->metrics = metrics;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    p->session = std::make_unique<Session>();
    p->session->prepare(metrics, availability, &p->unavailable);
  } catch (const CuptiFailure& f) {
    p->session.reset();
    p->failed = failure(f);
  }
  p->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

// The passes over `calls` of a session armed for them, and the values they
// read into `out` (one profile a call, the same passes); none after a
// first pass whose single call took longer than `call_limit_ms` (> 0).
void collect(Session& session, const std::vector<std::function<std::string()>>& calls, double call_limit_ms,
             std::vector<CounterProfile>* out) {
  CounterProfile& first = out->front();  // the passes and what ended them, copied to the others at the end
  const auto start = std::chrono::steady_clock::now();
  bool all = false;
  while (!all) {
    if (first.passes == kMaxProfilePasses) {
      first.message = "the metrics need more than " + std::to_string(kMaxProfilePasses) + " passes";
      return;
    }
    std::string call_error;
    size_t failed = calls.size();
    double call_ms = 0;
    all = session.pass(calls, &failed, &call_error, &call_ms);
    ++first.passes;
    if (failed < calls.size()) {
      first.message = "the call failed while it was profiled: " + call_error;
      if (calls.size() > 1) {
        first.message = "call " + std::to_string(failed + 1) + " of the " + std::to_string(calls.size()) +
                        " profiled together failed: " + call_error;
      }
      return;
    }
    if (first.passes == 1 && calls.size() == 1 && call_limit_ms > 0 && call_ms > call_limit_ms && !all) {
      first.status = kProfileSkipped;
      first.message = "one call took " + std::to_string(static_cast<int>(call_ms)) +
                      " ms, and the counters need several more calls: not read";
      return;
    }
  }
  first.passes_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<std::vector<double>> values = session.values(calls.size());
  const std::vector<std::string>& taken = session.taken();
  for (size_t c = 0; c < calls.size(); ++c) {
    for (size_t i = 0; i < taken.size(); ++i) {
      if (std::isfinite(values[c][i])) (*out)[c].values[taken[i]] = values[c][i];
    }
    (*out)[c].status = kProfileMeasured;
  }
}

// Arms the session of `p` for `ranges` calls a pass where it has metrics to
// read; where CUPTI refuses, drops the session and keeps why.
void arm(Prepared& p, size_t ranges) {
  if (!p.session || p.session->taken().empty()) return;
  try {
    p.session->arm(ranges);
  } catch (const CuptiFailure& f) {
    p.failed = failure(f);
    p.session.reset();
  }
}

// profile_call's and profile_calls' work: one profile a call (calls: 1 to kMaxProfileRanges).
std::vector<CounterProfile> profile_each(const std::vector<std::string>& metrics,
                                         const std::vector<std::function<std::string()>>& calls, double call_limit_ms) {
  std::unique_ptr<Prepared> p(prepared);
  prepared = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  if (kept != nullptr && kept->metrics == metrics) {
    p.reset(kept);  // its first Start, the costly one, was paid by an earlier profile
    p->seconds = 0;
  } else {
    delete kept;  // CUPTI holds one session a process: the last one ends before another begins
  }
  kept = nullptr;
  // The host's part made before the turn, on the image the grader gave: armed
  // here, or made again from the driver's own image where it failed or arming it fails.
  if (p && (p->metrics != metrics || !p->session)) p.reset();
  if (p) arm(*p, calls.size());
  const double before = p && p->session ? p->seconds : 0.0;
  if (!p || !p->session) {
    p = prepare_now(metrics, {});
    arm(*p, calls.size());
  }
  CounterProfile head = p->session ? CounterProfile{} : p->failed;
  head.unavailable = p->unavailable;
  head.prepared_seconds = before;
  std::vector<CounterProfile> out;
  if (p->session && p->session->taken().empty()) {
    head.status = kProfileUnsupported;
    head.message = "this GPU's profiler knows none of the metrics asked for";
  } else if (p->session) {
    // The setup made here, in the GPU's turn: all of it unless prepare_counters made the host's part before.
    head.setup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.assign(calls.size(), head);
    try {
      collect(*p->session, calls, call_limit_ms, &out);
    } catch (const CuptiFailure& f) {
      CounterProfile failed = failure(f);
      failed.unavailable = head.unavailable;
      failed.passes = out.front().passes;
      failed.setup_seconds = head.setup_seconds;
      failed.prepared_seconds = head.prepared_seconds;
      out.front() = failed;
    }
    head = out.front();
    if (keeping && head.status == kProfileMeasured) kept = p.release();
  }
  // What the first profile says of the passes, their seconds and a failure is
  // every call's; the seconds shared out among them.
  const double n = static_cast<double>(calls.size());
  out.resize(calls.size(), head);
  for (CounterProfile& each : out) {
    if (head.status != kProfileMeasured) each = head;
    each.passes = head.passes;
    each.ranges = static_cast<int>(calls.size());
    each.setup_seconds = head.setup_seconds / n;
    each.passes_seconds = head.passes_seconds / n;
    each.prepared_seconds = head.prepared_seconds / n;
  }
  return out;
}

}  // namespace

void keep_counter_session() {
  keeping = true;
}

void prepare_counters(const std::vector<std::string>& metrics, const std::vector<uint8_t>& availability) {
  // Made already for these metrics and not yet used: each part of a run whose counters are read together asks.
  if (prepared != nullptr && prepared->session && prepared->metrics == metrics) return;
  delete prepared;
  prepared = nullptr;
  // A kept session is the setup already, or must end before another is made (profile_call).
  if (!availability.empty() && kept == nullptr) prepared = prepare_now(metrics, availability).release();
}

CounterProfile profile_call(const std::vector<std::string>& metrics, const std::function<std::string()>& call,
                            double call_limit_ms) {
  return profile_each(metrics, {call}, call_limit_ms).front();
}

std::vector<CounterProfile> profile_calls(const std::vector<std::string>& metrics,
                                          const std::vector<std::function<std::string()>>& calls) {
  if (calls.empty()) return {};
  if (calls.size() > kMaxProfileRanges) {
    CounterProfile refused;
    refused.message = "more than " + std::to_string(kMaxProfileRanges) + " calls to profile together";
    return std::vector<CounterProfile>(calls.size(), refused);
  }
  return profile_each(metrics, calls, 0.0);
}

nlohmann::json counter_availability() {
  try {
    CUpti_Profiler_Initialize_Params init{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    check(cuptiProfilerInitialize(&init), "cuptiProfilerInitialize");
    const std::string chip = current_chip_name();
    const std::vector<uint8_t> image = query_availability(current_context());
    CUpti_Profiler_DeInitialize_Params done{CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    cuptiProfilerDeInitialize(&done);
    return {{"status", kProfileMeasured}, {"chip", chip}, {"image", to_hex(image.data(), image.size())}};
  } catch (const CuptiFailure& f) {
    const CounterProfile failed = failure(f);
    return {{"status", failed.status}, {"message", failed.message}};
  }
}

}  // namespace tilelab
