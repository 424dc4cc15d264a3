#include "launch_recorder.h"

#include <cupti.h>
#include <cxxabi.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "api_recorder.h"

namespace tilelab {
namespace {

constexpr size_t kBufferBytes = 8 << 20;
constexpr size_t kBufferAlign = 8;  // ACTIVITY_RECORD_ALIGNMENT
constexpr CUpti_ExternalCorrelationKind kWindowKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

struct PendingKernel {
  uint32_t correlation;
  KernelLaunch launch;
};

struct PendingMemory {
  uint32_t correlation;
  MemoryOperation op;
};

// CUPTI delivers buffers on its own thread, so all state sits behind a mutex.
struct State {
  std::mutex mutex;
  bool active = false;
  uint64_t next_window = 1;
  std::vector<PendingKernel> kernels;
  std::vector<PendingMemory> memory;
  std::unordered_map<uint32_t, uint64_t> window_of;  // correlation id -> window
  std::unordered_map<uint32_t, std::string> api_of;  // correlation id -> the API call, runtime first
};

State& state() {
  static State s;
  return s;
}

std::string demangle(const char* name) {
  if (name == nullptr) return "(unnamed)";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string result = (status == 0 && out != nullptr) ? out : name;
  std::free(out);
  return result;
}

const char* copy_kind_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "HtoD";
    default: return "other";
  }
}

// Buffers handed back by buffer_completed are kept and handed out again. The
// harness flushes after every call, so CUPTI asks for a buffer in the next
// one: a fresh 8 MB allocation would be paged in while that call is timed.
struct BufferPool {
  std::mutex mutex;
  std::vector<uint8_t*> free;
};

BufferPool& pool() {
  static BufferPool p;
  return p;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  {
    std::lock_guard<std::mutex> lock(pool().mutex);
    if (!pool().free.empty()) {
      *buffer = pool().free.back();
      pool().free.pop_back();
      *size = kBufferBytes;
      return;
    }
  }
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  if (*buffer != nullptr) std::memset(*buffer, 0, kBufferBytes);  // paged in now, not while a call is timed
  *size = *buffer != nullptr ? kBufferBytes : 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  const uint64_t cpu_at_start = thread_cpu_ns();
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        KernelLaunch launch;
        launch.name = demangle(k->name);
        launch.grid = {k->gridX, k->gridY, k->gridZ};
        launch.block = {k->blockX, k->blockY, k->blockZ};
        launch.static_shared_bytes = k->staticSharedMemory;
        launch.dynamic_shared_bytes = k->dynamicSharedMemory;
        launch.registers_per_thread = k->registersPerThread;
        launch.start_ns = k->start;
        launch.end_ns = k->end;
        launch.stream = k->streamId;
        s.kernels.push_back({k->correlationId, std::move(launch)});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        s.memory.push_back({m->correlationId, {copy_kind_name(m->copyKind), m->bytes, m->start, m->end}});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        s.memory.push_back({m->correlationId, {"memset", m->bytes, m->start, m->end}});
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        if (e->externalKind == kWindowKind) s.window_of[e->correlationId] = e->externalId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
        const bool runtime = record->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
        const char* name = nullptr;
        if (cuptiGetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &name) ==
                CUPTI_SUCCESS &&
            name != nullptr && (runtime || s.api_of.count(a->correlationId) == 0)) {
          s.api_of[a->correlationId] = name;
        }
        break;
      }
      default: break;
    }
  }
  lock.unlock();
  {
    std::lock_guard<std::mutex> keep(pool().mutex);
    pool().free.push_back(buffer);
  }
  ApiRecorder::exclude_cpu_time(thread_cpu_ns() - cpu_at_start);
}

std::string cupti_error(const char* what, CUptiResult r) {
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return std::string(what) + " failed: " + (text != nullptr ? text : "unknown CUPTI error");
}

bool is_harness_kernel(const KernelLaunch& k) {
  return k.name.rfind(kHarnessKernelPrefix, 0) == 0;
}

}  // namespace

std::string LaunchRecorder::start() {
  State& s = state();
  if (s.active) return {};
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) return cupti_error("cuptiActivityRegisterCallbacks", r);
  // Runtime and driver records are what external correlation ids attach to;
  // CONCURRENT_KERNEL (not KERNEL) leaves kernel overlap and timing untouched.
  const CUpti_ActivityKind kinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
      CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  for (CUpti_ActivityKind kind : kinds) {
    r = cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) return cupti_error("cuptiActivityEnable", r);
  }
  s.active = true;
  return {};
}

bool LaunchRecorder::active() {
  return state().active;
}

uint64_t LaunchRecorder::open_window() {
  State& s = state();
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    id = s.next_window++;
  }
  if (s.active) cuptiActivityPushExternalCorrelationId(kWindowKind, id);
  return id;
}

void LaunchRecorder::close_window() {
  if (!state().active) return;
  uint64_t last = 0;
  cuptiActivityPopExternalCorrelationId(kWindowKind, &last);
}

void LaunchRecorder::flush() {
  if (state().active) cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

// Moves the records that match `pred` out of `pending`, handing each to `take`.
template <typename Pending, typename Pred, typename Take>
void extract(std::vector<Pending>& pending, Pred pred, Take take) {
  std::vector<Pending> kept;
  for (Pending& p : pending) {
    if (pred(p)) {
      take(p);
    } else {
      kept.push_back(std::move(p));
    }
  }
  pending.swap(kept);
}

WindowRecord LaunchRecorder::take(uint64_t window) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto in_window = [&](const auto& pending) {
    auto it = s.window_of.find(pending.correlation);
    return it != s.window_of.end() && it->second == window;
  };
  WindowRecord out;
  extract(s.kernels, in_window, [&](PendingKernel& k) { out.kernels.push_back(std::move(k.launch)); });
  extract(s.memory, in_window, [&](PendingMemory& m) {
    auto api = s.api_of.find(m.correlation);
    if (api != s.api_of.end()) m.op.api = api->second;
    out.memory.push_back(std::move(m.op));
  });
  return out;
}

std::vector<KernelLaunch> LaunchRecorder::take_unattributed() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto outside = [&](const auto& pending) { return s.window_of.count(pending.correlation) == 0; };
  std::vector<KernelLaunch> out;
  extract(s.kernels, outside, [&](PendingKernel& k) {
    if (!is_harness_kernel(k.launch)) out.push_back(std::move(k.launch));
  });
  // The harness's own copies and memsets run outside every window: dropped.
  extract(s.memory, outside, [](PendingMemory&) {});
  return out;
}

void LaunchRecorder::clear() {
  flush();
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.kernels.clear();
  s.memory.clear();
  s.window_of.clear();
  s.api_of.clear();
}

}  // namespace tilelab
