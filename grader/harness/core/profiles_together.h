// The counters of the parts one run times together (tilelab-harness
// CASE_FILE... on tilelab-part-host --parts), read in one profile once every
// part was timed.
//
// A counter pass costs the GPU's turn about as much in CUPTI's Start and Stop
// as in the call it profiles, whatever the call. Read part by part, a run of
// six parts makes 24 passes; read together (counter_profile.h,
// profile_calls), each pass makes every part's call in a user range of its
// own, and the run makes 4. The profile runs after the last part's timed
// calls, in the same turn with the GPU alone, on inputs of its own: nothing
// of it is timed, and every part's timing is warmed up by its own calls
// (timing.h). Until it is read, each case's result says why it has no
// counters, so a run ended first (its time limit, a part that ended the
// launcher's process) leaves no profile that was never made.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tilelab {

class LauncherProcess;

class ProfilesTogether {
 public:
  // The case `case_index` of the run's `part`-th case file, whose result
  // document is `result`: its counters `metrics` of one call at j x k x l,
  // told `given` (its props), read later.
  struct Request {
    size_t part;
    std::filesystem::path result;
    size_t case_index;
    int j, k, l;
    cudaDeviceProp given;
    std::vector<std::string> metrics;
    uint64_t seed;  // of the inputs the calls are made on
  };

  // What a case's result says of its counters until read().
  static nlohmann::json waiting();

  void add(Request request) { requests_.push_back(std::move(request)); }
  bool pending() const { return !requests_.empty(); }

  // Reads every request's counters, those of one metric list in one profile
  // (up to kMaxProfileRanges calls), and writes each into its case's result.
  // Throws HarnessExit where the harness cannot (its buffers, its results).
  void read(LauncherProcess& launcher);

 private:
  std::vector<Request> requests_;
};

}  // namespace tilelab
