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
// Timing makes `repetitions` timed calls, or stops at `min_repetitions` or
// after, as soon as the wall times of all timed calls so far lie within
// `stable_within` of their median ("stopped_stable"): calls that agree so
// closely have the median more of them would have, within that tolerance.
//
// A case that asks for counters (CaseSpec::profile_metrics) has them read
// first, as soon as the GPU is the run's alone (unless its caller reads them
// after the timed calls, with other parts': profiles_together.h): the counter profile's passes
// (counter_profile.h) are untimed calls at the case's size, each after an L2
// flush, so they bring the clocks up as warm-up calls would, and the warm-up
// goes on only until `warmup_calls` calls and `warmup_ms` have passed,
// the passes counted ("warmup_profile_passes"). CUPTI has let go of the
// context before the first timed call. A profile whose first call is slower
// than kProfileMaxCallMs, or than a call that would stop timing ("one_call"
// below), is not read here; the caller reads it after the timed calls where
// their median allows (harness.cu).
//
// A case whose first call (made before the gate, while the GPU may be
// shared) took over kFarJudgedFactor x its budget earns no speed points
// however it is timed: where its profile names far_over_metrics (fewer
// counters in fewer passes), those are read instead of its
// metrics (reads_far_over), since each pass is one more such call with
// the GPU alone. Where the timed calls then do not stop as too slow (runs
// beside it slowed the first call), the caller reads every metric after them
// instead (harness.cu).
//
// A case with a budget (TimingSpec::give_up_ms, written by the grader from
// the time at which a call earns no speed points) is timed only while more
// calls could change its score: timing stops, and the result says
// "stopped_slow", as soon as
//   - from the kJudgedCalls-th timed call on, the median wall time of the
//     timed calls so far is over the budget ("median"), or
//   - from the kFarJudgedCalls-th timed call on, every timed call so far is
//     over kFarJudgedFactor x the budget ("median" too), or
//   - any call after the case's first is over kFarOverFactor x the budget
//     ("one_call": no clock still ramping up explains that), or
//   - a call is still running after TimingSpec::call_limit_ms()
//     ("call_limit"): where the launcher runs in a process of its own, that
//     process is ended rather than waited for (a product computed on the
//     host takes minutes). In-process, nothing can end the call.
// The case's first call (harness.cu) is held to the call limit too. The
// calls made are reported as always, with "stop": {"rule", "ms" (the median,
// the one call, or the time waited), "calls" (every call at the case's size,
// its first and the one ended included), "call_limit_ms"}; the cases after a
// stopped one are not run.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "case_file.h"
#include "harness.h"
#include "tilelab/exit_codes.h"

namespace tilelab {

// A kernel that could earn points runs at half the budget or faster: one
// slow timed call is noise, the median of three is not...
inline constexpr int kJudgedCalls = 3;
// ...nor are two timed calls that are both this many budgets long...
inline constexpr int kFarJudgedCalls = 2;
inline constexpr double kFarJudgedFactor = 2.0;
// ...and a single call this many budgets long is no noise at all.
inline constexpr double kFarOverFactor = 4.0;

struct TimingOutcome {
  nlohmann::json result;
  ExitCode code = ExitCode::kOk;  // a failure during a timed call ends the case
  std::string message;
  bool stopped_slow = false;              // timing stopped as too slow to earn speed points
  std::optional<nlohmann::json> profile;  // the counters, read before the warm-up calls (above)
};

class Launcher;
class GpuTurn;
// Runs after the case's first call (harness.cu), which counts among the calls a stop reports.
// Its buffers are made and filled before `turn` is taken: the warm-up and the timed calls run alone.
// `far_over`: its profile reads the far-over metrics (reads_far_over); `profile_first`: false where the
// caller reads its counters after the timed calls.
TimingOutcome run_timing(const CaseFile& file, const CaseSpec& spec, Launcher& launcher, const cudaDeviceProp& given,
                         GpuTurn& turn, bool far_over, bool profile_first = true);
// Whether a case whose first call took `first_call_ms` reads its profile's far-over metrics (above).
bool reads_far_over(const CaseSpec& spec, double first_call_ms);
// The metrics a case with a profile reads: its far-over ones, or all of them.
const std::vector<std::string>& profile_metrics_for(const CaseSpec& spec, bool far_over);
// The timing result of a case whose first call ran past its call limit and
// was ended after `waited_ms`: no call was timed.
TimingOutcome timing_stopped_at_first_call(const CaseSpec& spec, const Launcher& launcher, double waited_ms);

}  // namespace tilelab
