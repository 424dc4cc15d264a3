// Hardware counters of one launcher call, through CUPTI's range profiler.
//
// The trusted clock decides a part's speed points; these counters only
// explain them (how many bytes each level of the memory hierarchy moved,
// how many bank conflicts, how full the SMs were). Counters belong to a CUDA
// context, so they are read in the process that runs the launcher: they are
// as trustworthy as the launcher itself, and change no points.
//
// One user range around the whole call sums its kernels. The call is made
// once per pass the metrics need (user replay), each time after L2 was
// flushed, so DRAM traffic is what one cold call moves. Several calls (the
// parts a run times together) can be read in the same passes, a range each:
// a pass's Start and Stop, most of what a pass costs, are then paid once
// for all of them (profile_calls).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tilelab {

// Why no figures came back, in the words the grader shows: "measured" or
// one of the others, with a one-line message.
inline constexpr const char* kProfileMeasured = "measured";
inline constexpr const char* kProfileNotAllowed = "not_allowed";   // counters are for administrators here
inline constexpr const char* kProfileUnsupported = "unsupported";  // this GPU or setup has no range profiler
inline constexpr const char* kProfileFailed = "failed";
inline constexpr const char* kProfileSkipped = "skipped";  // the call is too slow to repeat for its counters

// A call slower than this is not profiled: the passes would repeat it
// several times more, and the grading's time limit covers them too.
inline constexpr double kProfileMaxCallMs = 500.0;

// The most passes one profile may take: more means a metric list the
// harness was never meant to collect, and the call would be repeated for long.
inline constexpr int kMaxProfilePasses = 64;

struct CounterProfile {
  std::string status = kProfileFailed;
  std::string message;
  std::map<std::string, double> values;  // metric name -> value, for the whole call
  std::vector<std::string> unavailable;  // names this GPU's profiler does not know
  int passes = 0;
  int ranges = 1;               // the calls read in the same passes, this one among them (profile_calls)
  double setup_seconds = 0;     // CUPTI's part before the first pass, made in this call
  double passes_seconds = 0;    // the passes, each with its L2 flush and its call
  double prepared_seconds = 0;  // the setup's host part, made before (prepare_counters)
};

nlohmann::json to_json(const CounterProfile& profile);

// Makes the host's part of CUPTI's setup for `metrics` now, for this
// process's next profile_call of the same metrics, from the GPU's counter
// availability image as counter_availability() gave it (the grader keeps it
// per GPU). It touches no counters and costs most of the setup, so it is
// made before the run's GPU turn (gpu_turn.h); without an image it makes
// nothing and profile_call makes all of the setup. Needs the CUDA context current.
void prepare_counters(const std::vector<std::string>& metrics, const std::vector<uint8_t>& availability);

// The current device's chip name and counter availability image (hex), as
// {"status": "measured", "chip", "image"}, or {"status", "message"} where
// CUPTI refuses. Asking holds the GPU's counters for a moment: only while no
// other run on the GPU is timed (`tilelab-harness --counter-availability`).
nlohmann::json counter_availability();

// From now on this process keeps the session of a profile, its range
// profiler enabled, for its next profile of the same metrics: a session's
// first Start costs about 0.15 s of the GPU's turn, and a process that
// serves several parts (tilelab-part-host --parts) pays it once for all of
// them. The timed calls after a profile then run with the profiler enabled
// and no range started.
void keep_counter_session();

// Collects `metrics` over calls of `call` (it returns "" or why the call
// failed), with the host's part prepare_counters made, or all of the setup
// now. Where `call_limit_ms` > 0 and the first pass's call takes longer, no
// more passes are made and the profile is kProfileSkipped: nothing read.
// Needs the calling thread's CUDA context current.
CounterProfile profile_call(const std::vector<std::string>& metrics, const std::function<std::string()>& call,
                            double call_limit_ms = 0);

// Collects `metrics` over each of `calls` as profile_call does, all of them
// in each pass, one user range each and an L2 flush before each: one profile
// a call, in order, each with its share of the setup's and passes' seconds.
// A call that fails fails the profile of every one (which failed is said).
// Each call must be quick enough to repeat (kProfileMaxCallMs); at most
// kMaxProfileRanges calls.
inline constexpr size_t kMaxProfileRanges = 16;
std::vector<CounterProfile> profile_calls(const std::vector<std::string>& metrics,
                                          const std::vector<std::function<std::string()>>& calls);

}  // namespace tilelab
