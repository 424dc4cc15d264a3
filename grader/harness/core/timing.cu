#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "counter_profile.h"
#include "device_ops.h"
#include "gpu_clocks.h"
#include "gpu_turn.h"
#include "guard.h"
#include "invoke.h"
#include "json_io.h"
#include "launch_recorder.h"
#include "launcher.h"
#include "tilelab/part.h"
#include "timing.h"

namespace tilelab {

using nlohmann::json;

namespace {

// Upper bound on warm-up calls, so a slow part cannot stretch warm-up forever.
constexpr int kMaxWarmupCalls = 1000;

struct InputSet {
  DeviceBuffer<float> M;
  DeviceBuffer<float> N;
};

struct TimedCall {
  int call = 0;
  uint64_t seed = 0;
  int input_set = 0;
  uint64_t window = 0;
  double event_ms = 0;
  double wall_ms = 0;
  double host_cpu_ms = 0;
  int64_t printed_bytes = -1;
  int64_t print_calls = -1;
  uint64_t unwritten = 0;
  std::vector<uint32_t> sample_bits;
};

// Why timing stopped early, in the result's "stop" object.
struct SlowStop {
  const char* rule;  // "median", "one_call" or "call_limit"
  double ms;         // the median, the one call, or how long the call was waited for
};

// The stop the budget calls for after a call that took `last_ms`, the timed
// calls so far having taken `timed_wall_ms` (the last one among them, if it was timed).
std::optional<SlowStop> over_budget(const TimingSpec& t, const std::vector<double>& timed_wall_ms, double last_ms) {
  if (t.give_up_ms <= 0) return std::nullopt;
  if (last_ms > kFarOverFactor * t.give_up_ms) return SlowStop{"one_call", last_ms};
  const int timed = static_cast<int>(timed_wall_ms.size());
  const bool all_far_over =
      timed >= kFarJudgedCalls &&
      *std::min_element(timed_wall_ms.begin(), timed_wall_ms.end()) > kFarJudgedFactor * t.give_up_ms;
  if (timed >= kJudgedCalls || all_far_over) {
    const double m = median(timed_wall_ms);
    if (m > t.give_up_ms) return SlowStop{"median", m};
  }
  return std::nullopt;
}

// The longest first call of a counter profile read before the warm-up: one
// longer would not be profiled after the timed calls either (harness.cu).
double profile_call_limit_ms(const TimingSpec& t) {
  return t.give_up_ms > 0 ? std::min(kProfileMaxCallMs, kFarOverFactor * t.give_up_ms) : kProfileMaxCallMs;
}

// Whether the timed calls so far settle their median: at least
// min_repetitions of them, all within stable_within of it.
bool settled(const TimingSpec& t, const std::vector<double>& timed_wall_ms) {
  if (t.stable_within <= 0 || static_cast<int>(timed_wall_ms.size()) < t.min_repetitions) return false;
  const double m = median(timed_wall_ms);
  const auto [low, high] = std::minmax_element(timed_wall_ms.begin(), timed_wall_ms.end());
  return m > 0 && (*high - *low) <= t.stable_within * m;
}

// The "give_up_ms", "stopped_slow" and "stop" fields of a timing result.
// `calls`: every call at the case's size, its first call included.
void add_stop(json& result, const TimingSpec& t, const std::optional<SlowStop>& stop, int calls) {
  if (t.give_up_ms > 0) result["give_up_ms"] = t.give_up_ms;
  result["stopped_slow"] = stop.has_value();
  if (stop) {
    result["stop"] = {{"rule", stop->rule}, {"ms", stop->ms}, {"calls", calls}, {"call_limit_ms", t.call_limit_ms()}};
  }
}

}  // namespace

bool reads_far_over(const CaseSpec& spec, double first_call_ms) {
  return spec.profile_far_over_metrics && spec.timing && spec.timing->give_up_ms > 0 &&
         first_call_ms > kFarJudgedFactor * spec.timing->give_up_ms;
}

const std::vector<std::string>& profile_metrics_for(const CaseSpec& spec, bool far_over) {
  return far_over ? *spec.profile_far_over_metrics : *spec.profile_metrics;
}

TimingOutcome timing_stopped_at_first_call(const CaseSpec& spec, const Launcher& launcher, double waited_ms) {
  const TimingSpec& t = *spec.timing;
  TimingOutcome out;
  out.stopped_slow = true;
  out.result = {{"seed", t.seed},
                {"warmup_calls", 0},
                {"repetitions", 0},
                {"input_sets", t.input_sets},
                {"flush_bytes", 0},
                {"samples", t.samples},
                {"median_event_ms", 0.0},
                {"median_wall_ms", 0.0},
                {"median_cupti_span_ms", 0.0},
                {"calls", json::array()},
                {"api_calls", json::object()},
                {"api_calls_outside_call", json::object()},
                {"clock", launcher.trusted_clock() ? "trusted" : "in_process"},
                {"clocks", clocks_unavailable("no call was timed")}};
  add_stop(out.result, t, SlowStop{"call_limit", waited_ms}, 1);
  return out;
}

TimingOutcome run_timing(const CaseFile& file, const CaseSpec& spec, Launcher& launcher, const cudaDeviceProp& given,
                         GpuTurn& turn, bool far_over, bool profile_first) {
  const TimingSpec& t = *spec.timing;
  const uint64_t m_count = uint64_t(spec.j) * spec.k;
  const uint64_t n_count = uint64_t(spec.k) * spec.l;
  const uint64_t p_count = uint64_t(spec.j) * spec.l;
  const uint64_t guard = static_cast<uint64_t>(file.guard_elements);

  std::vector<InputSet> sets;
  for (int s = 0; s < t.input_sets; ++s) sets.push_back({DeviceBuffer<float>(m_count), DeviceBuffer<float>(n_count)});
  DeviceBuffer<uint32_t> region(p_count + 2 * guard);
  std::vector<std::unique_ptr<SharedWith>> shared;  // after the buffers: let go of before they are freed
  for (const InputSet& set : sets) {
    shared.push_back(std::make_unique<SharedWith>(launcher, set.M.get(), set.M.bytes()));
    shared.push_back(std::make_unique<SharedWith>(launcher, set.N.get(), set.N.bytes()));
  }
  shared.push_back(std::make_unique<SharedWith>(launcher, region.get(), region.bytes()));
  uint32_t* p_words = region.get() + guard;
  fill_bits(region.get(), region.size(), file.guard_bits);

  // Writing twice the L2's size evicts whatever the previous call left in it.
  // (`given` is the device's own properties but for the shared-memory and
  // thread limits a case may lower.)
  const size_t flush_bytes = t.flush_l2 ? std::max<size_t>(size_t(2) * given.l2CacheSize, size_t(8) << 20) : 0;
  DeviceBuffer<unsigned char> flush(flush_bytes);
  DeviceBuffer<uint32_t> samples(static_cast<size_t>(t.samples));

  TimingOutcome out;
  std::vector<TimedCall> timed;
  // NVML is opened here, not between the calls; readings bracket the timed calls only.
  const GpuClocks clocks = GpuClocks::of_current_device();
  std::optional<ClockReading> clocks_before, clocks_after;
  ApiCounts api_calls, api_outside;  // over every call, warm-ups too
  int warmups = 0;
  std::vector<double> timed_wall_ms;
  std::optional<SlowStop> stop;
  bool abandoned = false;  // the last call was ended unfinished
  bool stable = false;     // timing stopped before `repetitions`: the calls agreed (settled)
  const double limit_ms = t.call_limit_ms();
  if (!turn.taken() && !file.counter_availability.empty()) {
    // Most of the counters' setup is the host's and, given the GPU's availability image, touches no counters.
    for (const CaseSpec& c : file.cases) {
      if (c.profile_metrics) {
        launcher.prepare_profile(profile_metrics_for(c, &c == &spec && far_over), file.counter_availability);
        break;
      }
    }
  }
  // Call `call`'s fresh inputs in its set, and P poisoned: that call's arguments.
  const auto fresh_inputs = [&](int call) {
    const int s = call % t.input_sets;
    const uint64_t seed = derive_seed(t.seed, static_cast<uint64_t>(call));
    fill_generated(sets[s].M.get(), m_count, seed, MatrixId::kM, Distribution::kUniform);
    fill_generated(sets[s].N.get(), n_count, seed, MatrixId::kN, Distribution::kUniform);
    fill_bits(p_words, p_count, file.poison_bits);
    return LaunchArgs{sets[s].M.get(), sets[s].N.get(), reinterpret_cast<float*>(p_words), spec.j, spec.k,
                      spec.l,          &given};
  };
  TILELAB_CUDA_CHECK(cudaDeviceSynchronize());
  turn.take();
  const auto warmup_begin = std::chrono::steady_clock::now();
  int profile_passes = 0;  // untimed calls of the counter profile, counted as warm-up
  if (spec.profile_metrics && profile_first) {
    const LaunchArgs args = fresh_inputs(0);
    TILELAB_CUDA_CHECK(cudaDeviceSynchronize());
    json profile = launcher.profile(args, profile_metrics_for(spec, far_over), profile_call_limit_ms(t));
    profile["far_over"] = far_over;
    profile["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - warmup_begin).count();
    const json passes = profile.value("passes", json(0));
    profile_passes = passes.is_number_integer() ? std::clamp(passes.get<int>(), 0, kMaxProfilePasses) : 0;
    if (profile.value("status", json()) != kProfileSkipped) out.profile = std::move(profile);
  }
  for (int call = 0;; ++call) {
    const bool warming =
        warmups < kMaxWarmupCalls &&
        (warmups + profile_passes < t.warmup_calls ||
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warmup_begin).count() <
             t.warmup_ms);
    if (!warming && (static_cast<int>(timed.size()) >= t.repetitions || (stable = settled(t, timed_wall_ms)))) break;

    const int s = call % t.input_sets;
    const uint64_t seed = derive_seed(t.seed, static_cast<uint64_t>(call));
    const LaunchArgs args = fresh_inputs(call);
    if (t.flush_l2) {
      TILELAB_CUDA_CHECK(cudaMemsetAsync(flush.get(), call & 0xFF, flush_bytes, 0));
      // Drops lines a part might have pinned with an access-policy window.
      TILELAB_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
    }
    TILELAB_CUDA_CHECK(cudaDeviceSynchronize());

    if (!warming && timed.empty() && clocks.available()) clocks_before = clocks.read();
    // Records are taken once, after the last call: a flush between timed calls slows the next one.
    const Invocation inv = launcher.invoke(args, false, limit_ms);
    if (!warming && static_cast<int>(timed.size()) + 1 == t.repetitions && clocks_before) clocks_after = clocks.read();
    if (inv.abandoned) {  // the launcher's process is gone with the call: nothing of it came back
      stop = SlowStop{"call_limit", inv.wall_ms};
      abandoned = true;
      break;
    }
    for (const auto& [name, n] : inv.account.calls) api_calls[name] += n;
    for (const auto& [name, n] : inv.api_outside) api_outside[name] += n;
    const ExitCode code = invocation_status(inv, &out.message);
    if (code != ExitCode::kOk) {
      out.code = code;
      out.message = "timed call " + std::to_string(call) + ": " + out.message;
      break;
    }
    if (warming) {
      ++warmups;
      // Warm-up calls are held to the one-call rule only: the clocks may still be coming up.
      if ((stop = over_budget(t, {}, inv.wall_ms))) break;
      continue;
    }
    TimedCall tc;
    tc.call = call;
    tc.seed = seed;
    tc.input_set = s;
    tc.window = inv.window;
    tc.event_ms = inv.event_ms;
    tc.wall_ms = inv.wall_ms;
    tc.host_cpu_ms = inv.account.host_cpu_ms;
    tc.printed_bytes = inv.account.written_bytes;
    tc.print_calls = inv.account.write_calls;
    gather_samples(p_words, spec.j, spec.l, seed, t.samples, samples.get());
    tc.sample_bits.resize(static_cast<size_t>(t.samples));
    TILELAB_CUDA_CHECK(cudaMemcpy(tc.sample_bits.data(), samples.get(), samples.bytes(), cudaMemcpyDeviceToHost));
    tc.unwritten = count_equal(p_words, p_count, file.poison_bits);
    timed.push_back(std::move(tc));
    timed_wall_ms.push_back(inv.wall_ms);
    if ((stop = over_budget(t, timed_wall_ms, inv.wall_ms))) break;
  }

  if (clocks_before && !clocks_after) clocks_after = clocks.read();  // the timed calls ended early

  std::vector<uint64_t> windows;
  for (const TimedCall& tc : timed) windows.push_back(tc.window);
  const std::vector<WindowRecord> records =
      out.code == ExitCode::kOk ? launcher.take_records(windows) : std::vector<WindowRecord>(timed.size());
  json calls = json::array();
  std::vector<double> event_ms, wall_ms, cupti_ms;
  for (size_t i = 0; i < timed.size(); ++i) {
    const TimedCall& tc = timed[i];
    const WindowRecord& rec = records[i];
    uint64_t first = UINT64_MAX, last = 0;
    double kernel_ms = 0;
    for (const KernelLaunch& k : rec.kernels) {
      first = std::min(first, k.start_ns);
      last = std::max(last, k.end_ns);
      kernel_ms += k.duration_ms();
    }
    const double span_ms = rec.kernels.empty() ? 0.0 : (last - first) * 1e-6;
    event_ms.push_back(tc.event_ms);
    wall_ms.push_back(tc.wall_ms);
    cupti_ms.push_back(span_ms);
    calls.push_back({{"call", tc.call},
                     {"seed", tc.seed},
                     {"input_set", tc.input_set},
                     {"event_ms", tc.event_ms},
                     {"wall_ms", tc.wall_ms},
                     {"host_cpu_ms", tc.host_cpu_ms},
                     {"printed_bytes", tc.printed_bytes},
                     {"print_calls", tc.print_calls},
                     {"cupti_span_ms", span_ms},
                     {"cupti_kernel_ms", kernel_ms},
                     {"kernels", rec.kernels.size()},
                     {"memory_operations", rec.memory.size()},
                     {"unwritten", tc.unwritten},
                     {"sample_bits", tc.sample_bits}});
  }

  out.result = {{"seed", t.seed},
                {"warmup_calls", warmups},
                {"warmup_profile_passes", profile_passes},
                {"repetitions", timed.size()},
                {"input_sets", t.input_sets},
                {"flush_bytes", flush_bytes},
                {"samples", t.samples},
                {"median_event_ms", median(event_ms)},
                {"median_wall_ms", median(wall_ms)},
                {"median_cupti_span_ms", median(cupti_ms)},
                {"calls", calls},
                {"api_calls", api_calls},
                {"api_calls_outside_call", api_outside},
                {"clock", launcher.trusted_clock() ? "trusted" : "in_process"},
                {"stopped_stable", stable}};
  // The case's first call, the warm-ups, the timed calls and the one ended unfinished, if any.
  const int calls_made = 1 + warmups + static_cast<int>(timed.size()) + (abandoned ? 1 : 0);
  add_stop(out.result, t, stop, calls_made);
  out.stopped_slow = stop.has_value();
  if (!clocks.available()) {
    out.result["clocks"] = clocks_unavailable(clocks.message());
  } else if (!clocks_before) {
    out.result["clocks"] = clocks_unavailable("no call was timed");
  } else {
    out.result["clocks"] = clocks_json(*clocks_before, *clocks_after, clocks.pci_bus_id());
  }
  if (out.code == ExitCode::kOk) {
    out.result["guard"] = to_json(check_guards_on_device(region.get(), guard, p_count, file.guard_bits));
  }
  return out;
}

}  // namespace tilelab
