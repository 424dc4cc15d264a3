#include "gpu_clocks.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <utility>

namespace tilelab {

using nlohmann::json;

namespace {

// NVML's C interface, declared here since the toolkit on a build host need
// not ship nvml.h: these types and values have been stable since NVML's
// first releases (nvml.h: nvmlReturn_t, nvmlClockType_t, nvmlPerfPolicyType_t).
using NvmlReturn = int;  // 0: NVML_SUCCESS
struct NvmlDeviceSt;
using NvmlDevice = NvmlDeviceSt*;
struct NvmlViolationTime {
  unsigned long long reference_time;  // CPU timestamp, microseconds
  unsigned long long violation_time;  // nanoseconds, cumulative
};
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kClockSm = 1;         // NVML_CLOCK_SM
constexpr int kClockMemory = 2;     // NVML_CLOCK_MEM
constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
constexpr int kPolicyPower = 0;     // NVML_PERF_POLICY_POWER
constexpr int kPolicyThermal = 1;   // NVML_PERF_POLICY_THERMAL

// The clocks-event reasons that slow a kernel (nvml.h, nvmlClocksEventReason*).
constexpr std::pair<uint64_t, const char*> kSlowingReasons[] = {
    {0x04, "sw_power_cap"},
    {0x08, "hw_slowdown"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
};

struct Nvml {
  std::string message;  // why NVML cannot be used; empty when it can
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*power_usage)(NvmlDevice, unsigned*) = nullptr;  // milliwatts
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*event_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*violation_status)(NvmlDevice, int, NvmlViolationTime*) = nullptr;

  std::string why(NvmlReturn r) const {
    const char* s = error_string ? error_string(r) : nullptr;
    return s ? s : "NVML error " + std::to_string(r);
  }
};

template <typename F>
void find(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
}

Nvml load_nvml() {
  Nvml n;
  // The library stays loaded for the life of the process.
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    n.message = std::string("NVML (libnvidia-ml.so.1, part of the NVIDIA driver) could not be loaded: ") +
                (e ? e : "unknown error");
    return n;
  }
  NvmlReturn (*init)() = nullptr;
  find(lib, init, "nvmlInit_v2");
  find(lib, n.error_string, "nvmlErrorString");
  find(lib, n.handle_by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  find(lib, n.clock_info, "nvmlDeviceGetClockInfo");
  find(lib, n.power_usage, "nvmlDeviceGetPowerUsage");
  find(lib, n.temperature, "nvmlDeviceGetTemperature");
  find(lib, n.event_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  // Drivers before the "clocks event" naming have the same call under its old name.
  if (n.event_reasons == nullptr) find(lib, n.event_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  find(lib, n.violation_status, "nvmlDeviceGetViolationStatus");
  if (init == nullptr || n.handle_by_pci_bus_id == nullptr) {
    n.message = "this NVML lacks nvmlInit_v2 or nvmlDeviceGetHandleByPciBusId_v2";
    return n;
  }
  if (const NvmlReturn r = init(); r != kNvmlSuccess) n.message = "nvmlInit failed: " + n.why(r);
  return n;
}

// Loaded and initialized on first use, once per process (thread-safe static).
const Nvml& nvml() {
  static const Nvml loaded = load_nvml();
  return loaded;
}

template <typename T>
json optional_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json reading_json(const ClockReading& r) {
  return {{"sm_mhz", optional_json(r.sm_mhz)},
          {"memory_mhz", optional_json(r.memory_mhz)},
          {"power_w", optional_json(r.power_w)},
          {"temperature_c", optional_json(r.temperature_c)},
          {"event_reasons", optional_json(r.event_reasons)},
          {"power_violation_ns", optional_json(r.power_violation_ns)},
          {"thermal_violation_ns", optional_json(r.thermal_violation_ns)}};
}

// How long a counter grew between the readings; empty where either lacks it
// (or it went back, as after a driver reload).
std::optional<double> grew_ms(const std::optional<uint64_t>& before, const std::optional<uint64_t>& after) {
  if (!before || !after || *after < *before) return std::nullopt;
  return static_cast<double>(*after - *before) * 1e-6;
}

}  // namespace

GpuClocks GpuClocks::of_current_device() {
  GpuClocks c;
  const Nvml& n = nvml();
  if (!n.message.empty()) {
    c.message_ = n.message;
    return c;
  }
  int device = 0;
  char bus_id[64] = {};
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device);
  if (e != cudaSuccess) {
    c.message_ = std::string("the CUDA device's PCI bus id is unknown: ") + cudaGetErrorName(e);
    return c;
  }
  c.pci_bus_id_ = bus_id;
  NvmlDevice handle = nullptr;
  if (const NvmlReturn r = n.handle_by_pci_bus_id(bus_id, &handle); r != kNvmlSuccess) {
    c.message_ = "NVML has no device at PCI bus id " + c.pci_bus_id_ + ": " + n.why(r);
    return c;
  }
  c.device_ = handle;
  return c;
}

ClockReading GpuClocks::read() const {
  ClockReading out;
  out.at = std::chrono::steady_clock::now();
  if (device_ == nullptr) return out;
  const Nvml& n = nvml();
  const auto d = static_cast<NvmlDevice>(device_);
  unsigned value = 0;
  // A call this device does not support (NVML_ERROR_NOT_SUPPORTED) leaves its figure empty.
  if (n.clock_info && n.clock_info(d, kClockSm, &value) == kNvmlSuccess) out.sm_mhz = value;
  if (n.clock_info && n.clock_info(d, kClockMemory, &value) == kNvmlSuccess) out.memory_mhz = value;
  if (n.power_usage && n.power_usage(d, &value) == kNvmlSuccess) out.power_w = value * 1e-3;
  if (n.temperature && n.temperature(d, kTemperatureGpu, &value) == kNvmlSuccess) out.temperature_c = value;
  unsigned long long mask = 0;
  if (n.event_reasons && n.event_reasons(d, &mask) == kNvmlSuccess) out.event_reasons = mask;
  NvmlViolationTime v{};
  if (n.violation_status && n.violation_status(d, kPolicyPower, &v) == kNvmlSuccess) {
    out.power_violation_ns = v.violation_time;
  }
  if (n.violation_status && n.violation_status(d, kPolicyThermal, &v) == kNvmlSuccess) {
    out.thermal_violation_ns = v.violation_time;
  }
  return out;
}

std::vector<std::string> slowing_reasons(uint64_t event_reasons) {
  std::vector<std::string> names;
  for (const auto& [bit, name] : kSlowingReasons) {
    if (event_reasons & bit) names.emplace_back(name);
  }
  return names;
}

json clocks_json(const ClockReading& before, const ClockReading& after, const std::string& pci_bus_id) {
  const double elapsed_ms = std::chrono::duration<double, std::milli>(after.at - before.at).count();
  const std::vector<std::string> reasons =
      slowing_reasons(before.event_reasons.value_or(0) | after.event_reasons.value_or(0));
  json named = reasons;
  const std::optional<double> power = grew_ms(before.power_violation_ns, after.power_violation_ns);
  const std::optional<double> thermal = grew_ms(before.thermal_violation_ns, after.thermal_violation_ns);
  if (power && *power > kViolationShare * elapsed_ms) named.push_back("power_violation");
  if (thermal && *thermal > kViolationShare * elapsed_ms) named.push_back("thermal_violation");
  return {{"available", true},
          {"pci_bus_id", pci_bus_id},
          {"elapsed_ms", elapsed_ms},
          {"before", reading_json(before)},
          {"after", reading_json(after)},
          {"violation_ms", {{"power", optional_json(power)}, {"thermal", optional_json(thermal)}}},
          {"throttled", !named.empty()},
          {"reasons", named}};
}

json clocks_unavailable(const std::string& message) {
  return {{"available", false}, {"message", message}};
}

}  // namespace tilelab
