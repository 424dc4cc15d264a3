// The GPU's clocks, power, temperature and throttling, read through NVML
// around a part's timed calls.
//
// A GPU held at its power or thermal limit runs every kernel slower, the
// student's and the reference alike, and a time taken then says little about
// the kernel. Reading the clocks-event reasons just before the first timed
// call and just after the last, and NVML's power and thermal violation
// counters between the two (so throttling in the middle of the calls is seen
// too), lets the grader time such a part again or have staff look at it.
//
// NVML is the driver's library (libnvidia-ml.so.1), not the toolkit's: it is
// opened at run time, once per process, so a harness on a host without it
// still starts, and reports the clocks as unavailable instead of failing.
// The result's "clocks" object (see clocks_json) is read by
// grader/tilelab/grading/clocks.py.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace tilelab {

// One reading of the device. A figure NVML does not give on this device is empty.
struct ClockReading {
  std::optional<unsigned> sm_mhz;
  std::optional<unsigned> memory_mhz;
  std::optional<double> power_w;
  std::optional<unsigned> temperature_c;
  std::optional<uint64_t> event_reasons;       // NVML's clocks-event (throttle) reasons bitmask
  std::optional<uint64_t> power_violation_ns;  // cumulative since the driver loaded
  std::optional<uint64_t> thermal_violation_ns;
  std::chrono::steady_clock::time_point at;
};

// NVML's handle on the CUDA device this process uses, matched by PCI bus id
// (so CUDA_VISIBLE_DEVICES is respected). Cheap to make after the first one:
// NVML is loaded and initialized once per process, and never shut down (the
// trusted harness may serve many runs).
class GpuClocks {
 public:
  // The current CUDA device (cudaGetDevice).
  static GpuClocks of_current_device();

  bool available() const { return device_ != nullptr; }
  const std::string& message() const { return message_; }  // why not available
  const std::string& pci_bus_id() const { return pci_bus_id_; }
  ClockReading read() const;

 private:
  void* device_ = nullptr;  // an nvmlDevice_t
  std::string message_;
  std::string pci_bus_id_;
};

// Names of the reasons in an NVML clocks-event bitmask that slow a kernel
// (a power cap, a thermal or hardware slowdown), in bit order. Idleness,
// application clock settings, sync boost and display clocks do not count.
std::vector<std::string> slowing_reasons(uint64_t event_reasons);

// The timing result's "clocks" object:
//   {"available": true, "pci_bus_id": "...", "elapsed_ms": x,
//    "before": READING, "after": READING,
//    "violation_ms": {"power": x|null, "thermal": x|null},
//    "throttled": bool, "reasons": [name, ...]}
// READING: {"sm_mhz", "memory_mhz", "power_w", "temperature_c", "event_reasons",
//           "power_violation_ns", "thermal_violation_ns"}, each null where unread.
// "reasons" holds slowing_reasons of either reading, then "power_violation"
// and "thermal_violation" where that counter grew by a share of the elapsed
// time (kViolationShare); "throttled" is whether "reasons" is not empty.
nlohmann::json clocks_json(const ClockReading& before, const ClockReading& after, const std::string& pci_bus_id);
// {"available": false, "message": why}: timing goes on without readings.
nlohmann::json clocks_unavailable(const std::string& message);

// A median over many calls barely moves for a limit held during a sliver of
// them; this share of the bracket held at a limit counts as throttled.
inline constexpr double kViolationShare = 0.05;

}  // namespace tilelab
