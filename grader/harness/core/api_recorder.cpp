#include "api_recorder.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <thread>

namespace tilelab {
namespace {

// One counter per callback id of a domain; the last one takes ids beyond
// what this CUPTI's headers list.
template <size_t N>
struct DomainCounts {
  std::atomic<uint64_t> by_cbid[N + 1];
  void add(uint32_t cbid) { by_cbid[cbid < N ? cbid : N].fetch_add(1, std::memory_order_relaxed); }
};

struct Counts {
  DomainCounts<CUPTI_RUNTIME_TRACE_CBID_SIZE> runtime;
  DomainCounts<CUPTI_DRIVER_TRACE_CBID_SIZE> driver;
  void add(CUpti_CallbackDomain domain, uint32_t cbid) {
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) runtime.add(cbid);
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API) driver.add(cbid);
  }
};

// Bytes passed to write calls and their number, for the whole process
// (/proc/self/io: wchar, syscw); known is false where it cannot be read.
struct IoCounts {
  bool known = false;
  uint64_t bytes = 0;
  uint64_t calls = 0;
};

IoCounts written_so_far() {
  IoCounts io;
  const int fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io;
  char text[512];
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0) return io;
  text[n] = '\0';
  const char* wchar = std::strstr(text, "wchar:");
  const char* syscw = std::strstr(text, "syscw:");
  if (wchar == nullptr || syscw == nullptr) return io;
  io.bytes = std::strtoull(wchar + 6, nullptr, 10);
  io.calls = std::strtoull(syscw + 6, nullptr, 10);
  io.known = true;
  return io;
}

// Callbacks arrive on whatever thread makes the call, so the state they
// touch is atomic; the rest is written by the main thread between calls.
struct State {
  bool active = false;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::thread::id main_thread;
  std::atomic<bool> in_call{false};    // the launcher is running: its calls are named
  std::atomic<bool> measuring{false};  // CPU time inside CUDA calls is set apart
  std::atomic<uint64_t> cuda_cpu_ns{0};
  std::atomic<uint64_t> excluded_cpu_ns{0};
  uint64_t process_at_begin = 0;
  IoCounts io_at_begin;
  Counts during_call;
  Counts outside_call;
};

State& state() {
  static State s;
  return s;
}

thread_local int t_depth = 0;              // nesting of API calls on this thread
thread_local uint64_t t_entered_cpu = 0;   // this thread's CPU clock at the outermost call's entry

void CUPTIAPI on_api_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  State& s = state();
  if (info->callbackSite == CUPTI_API_ENTER) {
    if (t_depth++ != 0) return;
    if (s.in_call.load(std::memory_order_acquire)) {
      s.during_call.add(domain, cbid);
    } else if (std::this_thread::get_id() != s.main_thread) {
      s.outside_call.add(domain, cbid);
    }
    t_entered_cpu = s.measuring.load(std::memory_order_acquire) ? thread_cpu_ns() : 0;
    return;
  }
  if (t_depth == 0) return;  // entered before the subscription
  if (--t_depth != 0) return;
  if (t_entered_cpu != 0) {
    s.cuda_cpu_ns.fetch_add(thread_cpu_ns() - t_entered_cpu, std::memory_order_relaxed);
    t_entered_cpu = 0;
  }
}

template <size_t N>
void drain(DomainCounts<N>& counts, CUpti_CallbackDomain domain, ApiCounts& out) {
  for (size_t cbid = 0; cbid <= N; ++cbid) {
    const uint64_t n = counts.by_cbid[cbid].exchange(0, std::memory_order_relaxed);
    if (n == 0) continue;
    const char* name = nullptr;
    if (cbid == N || cuptiGetCallbackName(domain, static_cast<uint32_t>(cbid), &name) != CUPTI_SUCCESS ||
        name == nullptr) {
      name = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "(unknown runtime call)" : "(unknown driver call)";
    }
    out[name] += n;
  }
}

ApiCounts drain(Counts& counts) {
  ApiCounts out;
  drain(counts.runtime, CUPTI_CB_DOMAIN_RUNTIME_API, out);
  drain(counts.driver, CUPTI_CB_DOMAIN_DRIVER_API, out);
  return out;
}

uint64_t clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

}  // namespace

uint64_t thread_cpu_ns() {
  return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

uint64_t process_cpu_ns() {
  // With the children it waited for: host work handed to a child process is
  // still the launcher's (its children that are never waited for are counted
  // by tilelab-contain, for the whole run).
  rusage children{};
  getrusage(RUSAGE_CHILDREN, &children);
  const auto ns = [](const timeval& t) { return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_usec) * 1000u; };
  return clock_ns(CLOCK_PROCESS_CPUTIME_ID) + ns(children.ru_utime) + ns(children.ru_stime);
}

std::string ApiRecorder::start() {
  State& s = state();
  if (s.active) return {};
  s.main_thread = std::this_thread::get_id();
  CUptiResult r = cuptiSubscribe(&s.subscriber, on_api_call, nullptr);
  if (r == CUPTI_SUCCESS) r = cuptiEnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
  if (r == CUPTI_SUCCESS) r = cuptiEnableDomain(1, s.subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
  if (r != CUPTI_SUCCESS) {
    const char* text = nullptr;
    cuptiGetResultString(r, &text);
    return std::string("cuptiSubscribe failed: ") + (text != nullptr ? text : "unknown CUPTI error");
  }
  s.active = true;
  return {};
}

bool ApiRecorder::active() {
  return state().active;
}

void ApiRecorder::begin_call() {
  State& s = state();
  s.cuda_cpu_ns.store(0);
  s.excluded_cpu_ns.store(0);
  s.io_at_begin = written_so_far();
  s.process_at_begin = process_cpu_ns();
  s.measuring.store(true, std::memory_order_release);
}

void ApiRecorder::launcher_starts() {
  state().in_call.store(true, std::memory_order_release);
}

void ApiRecorder::launcher_returned() {
  state().in_call.store(false, std::memory_order_release);
}

CallAccount ApiRecorder::end_call() {
  State& s = state();
  s.in_call.store(false, std::memory_order_release);
  s.measuring.store(false, std::memory_order_release);
  const uint64_t process = process_cpu_ns() - s.process_at_begin;
  const uint64_t cuda = s.cuda_cpu_ns.load();
  const uint64_t excluded = s.excluded_cpu_ns.load();
  CallAccount account;
  account.calls = drain(s.during_call);
  account.cuda_cpu_ms = cuda * 1e-6;
  account.host_cpu_ms = process > cuda + excluded ? (process - cuda - excluded) * 1e-6 : 0.0;
  const IoCounts io = written_so_far();
  if (s.io_at_begin.known && io.known && io.bytes >= s.io_at_begin.bytes && io.calls >= s.io_at_begin.calls) {
    account.written_bytes = static_cast<int64_t>(io.bytes - s.io_at_begin.bytes);
    account.write_calls = static_cast<int64_t>(io.calls - s.io_at_begin.calls);
  }
  return account;
}

ApiCounts ApiRecorder::take_outside() {
  return drain(state().outside_call);
}

void ApiRecorder::exclude_cpu_time(uint64_t ns) {
  State& s = state();
  if (s.measuring.load(std::memory_order_acquire)) s.excluded_cpu_ns.fetch_add(ns, std::memory_order_relaxed);
}

namespace {
// Set by host_made_the_context: whether the part used CUDA while it was loaded.
std::optional<bool> part_used_cuda_while_loading;
}  // namespace

void host_made_the_context(bool used) {
  part_used_cuda_while_loading = used;
}

bool cuda_context_before_harness() {
  if (part_used_cuda_while_loading.has_value()) return *part_used_cuda_while_loading;
  // Through the runtime's entry-point lookup, so the harness needs no link
  // to libcuda (and still starts, to say "no CUDA device", where there is none).
  using GetState = CUresult (*)(CUdevice, unsigned int*, int*);
  using GetCurrent = CUresult (*)(CUcontext*);
  void* get_state = nullptr;
  void* get_current = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &get_state, 12000, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    int devices = 0;
    cudaGetDeviceCount(&devices);
    for (int d = 0; d < devices; ++d) {
      unsigned int flags = 0;
      int active = 0;
      if (reinterpret_cast<GetState>(get_state)(d, &flags, &active) == CUDA_SUCCESS && active != 0) return true;
    }
  }
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get_current, 12000, cudaEnableDefault, &found) ==
          cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    CUcontext current = nullptr;
    if (reinterpret_cast<GetCurrent>(get_current)(&current) == CUDA_SUCCESS && current != nullptr) return true;
  }
  return false;
}

}  // namespace tilelab
