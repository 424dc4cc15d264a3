// Helpers shared by the project's C++ tests: temporary directories, running
// a harness in a child process, and detecting a GPU.
#pragma once

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "case_file.h"

namespace tilelab::test {

// True when the CUDA runtime sees at least one device. GPU tests call
// TILELAB_REQUIRE_GPU() first, which skips them (and says why) otherwise.
bool gpu_available();

#define TILELAB_REQUIRE_GPU()                                                         \
  do {                                                                                \
    if (!::tilelab::test::gpu_available()) GTEST_SKIP() << "skipped: no CUDA device"; \
  } while (false)

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct ProcessResult {
  int exit_code = -1;  // valid when !signaled && !timed_out
  int signal = 0;      // the signal that ended it, when signaled
  bool signaled = false;
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs argv[0] with arguments, killing it (and its process group) after timeout_s.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s);

struct HarnessRun {
  ProcessResult process;
  std::optional<nlohmann::json> result;  // the harness's result JSON, if it wrote one
  CaseFile cases;                        // the case file as written (paths resolved)
};

// tilelab-harness --serve-jobs (core/harness_service.h) for as long as this
// lives, on a socket in a folder of its own.
class HarnessService {
 public:
  HarnessService();  // returns once it listens
  ~HarnessService();
  HarnessService(const HarnessService&) = delete;
  HarnessService& operator=(const HarnessService&) = delete;
  const std::filesystem::path& socket() const { return socket_; }
  // Closes its standard input and waits: its exit status (-1 if it was killed).
  int stop();

 private:
  TempDir dir_;
  std::filesystem::path socket_;
  int pid_ = -1;
  int stdin_ = -1;
};

// Writes `cases` as run_harness does, its result file and the output file of
// every case without timing placed in `dir`, and returns it with its paths.
CaseFile write_case_file(CaseFile cases, const std::filesystem::path& dir);

// Writes `cases` and runs the harness on it. The result file, and the output
// file of every case without timing, are placed in `dir`. With `trusted`,
// tilelab-harness runs the cases and `harness` serves only its launcher:
// one-shot, or through `service` (tilelab-harness --via) when given.
// `harness_args` come between the harness and its own arguments (the part's
// library, for tilelab-part-host).
HarnessRun run_harness(const std::filesystem::path& harness, CaseFile cases, const std::filesystem::path& dir,
                       double timeout_s = 300, bool trusted = false, const HarnessService* service = nullptr,
                       const std::vector<std::string>& harness_args = {});

// Copies `from` to `to` after `delay`, under another name first and then
// renamed, as a build puts a part's shared object in place. Join the thread.
std::thread put_in_place_after(std::filesystem::path from, std::filesystem::path to, std::chrono::milliseconds delay);

// A generated-input case with an output file; props and timing left empty.
CaseSpec make_case(const std::string& name, int j, int k, int l, uint64_t seed,
                   Distribution dist = Distribution::kUniform);

// A timing case of Width x Width x Width: make_case's, with TimingSpec's defaults and `timing_seed`.
CaseSpec timed_case(const std::string& name, int width, uint64_t seed, uint64_t timing_seed);

// A case file of `part` with the one case `c`.
CaseFile one_case(const std::string& part, CaseSpec c);

std::filesystem::path build_dir();  // $TILELAB_BUILD_DIR, set by CTest

// Traffic and stall counters: more than one pass on the GPUs the course grades on.
inline const std::vector<std::string> kSeveralPassMetrics = {
    "smsp__inst_executed.sum",
    "dram__bytes_read.sum",
    "lts__t_bytes.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "smsp__warps_issue_stalled_long_scoreboard.sum",
    "smsp__warps_issue_stalled_barrier.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"};

// The built harness of a reference part, and of a probe: a naive launcher
// that misbehaves on purpose (tests/parts).
std::filesystem::path reference(const std::string& part);
std::filesystem::path probe(const std::string& name);

// Two small checked cases of `part`, at 17 and 33.
CaseFile two_cases(const std::string& part);

}  // namespace tilelab::test
