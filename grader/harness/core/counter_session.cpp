#include "counter_session.h"

#include <cuda_runtime.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>

#include <chrono>

namespace tilelab::counter_session {

void check(CUptiResult result, const char* call) {
  if (result != CUPTI_SUCCESS) throw CuptiFailure{call, result};
}

namespace {

std::string describe(const CuptiFailure& f) {
  const char* text = nullptr;
  cuptiGetResultString(f.result, &text);
  return std::string(f.call) + ": " + (text != nullptr ? text : "error " + std::to_string(f.result));
}

// A cold L2 before every profiled call: written over with a buffer twice its size.
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

}  // namespace

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

std::vector<uint8_t> query_availability(CUcontext ctx) {
  CUpti_Profiler_GetCounterAvailability_Params avail{CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  avail.ctx = ctx;
  check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
  std::vector<uint8_t> image(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = image.data();
  check(cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
  return image;
}

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

const char* current_chip_name() {
  int device = 0;
  cudaGetDevice(&device);
  CUpti_Device_GetChipName_Params chip{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = static_cast<size_t>(device);
  check(cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
  return chip.pChipName;
}

Session::~Session() {
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

const std::vector<std::string>& Session::prepare(const std::vector<std::string>& metrics,
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

void Session::arm(size_t ranges) {
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

bool Session::pass(const std::vector<std::function<std::string()>>& calls, size_t* failed, std::string* call_error,
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

std::vector<std::vector<double>> Session::values(size_t ranges) {
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

}  // namespace tilelab::counter_session
