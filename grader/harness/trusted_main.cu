// tilelab-harness: the trusted harness. It links no student code.
//
//   tilelab-harness CASE_FILE -- LAUNCHER_COMMAND...
//       runs the cases of CASE_FILE with the part's launcher in a process of
//       its own, started as LAUNCHER_COMMAND (the part's executable, behind
//       whatever puts it in the sandbox) with --serve. This process owns the
//       buffers, the inputs, the clock and every check of the outputs, and
//       writes the result JSON and the outputs where the case file says: see
//       core/launcher_process.h. Same result, same exit codes as the
//       in-process harness (core/harness.h), plus "launcher_process": true.
//   tilelab-harness CASE_FILE CASE_FILE... -- LAUNCHER_COMMAND...
//       several case files in turn on one launcher process, which serves the
//       i-th part for the i-th file (tilelab-part-host --parts), until one's
//       run does not end well; each writes its own result.
//   tilelab-harness --serve-jobs SOCKET
//   tilelab-harness --via SOCKET CASE_FILE... -- LAUNCHER_COMMAND...
//       the same runs, by one long-lived harness per grading and a relay
//       per run: core/harness_service.h.
//   tilelab-harness --counter-availability
//       prints the GPU's chip name and counter availability image as JSON
//       (core/counter_profile.h), which the grader keeps per GPU and gives
//       its timing runs; exit 0, 5 without a device, 7 where CUPTI refuses.
#include <cuda_runtime.h>
#include <signal.h>
#include <sys/prctl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/counter_profile.h"
#include "core/harness_service.h"
#include "tilelab/exit_codes.h"

int main(int argc, char** argv) {
  using namespace tilelab;
  // The launcher's process may run as this user (no sandbox user): then it
  // may not read or trace this one through /proc or ptrace.
  prctl(PR_SET_DUMPABLE, 0);
  signal(SIGPIPE, SIG_IGN);  // a process that is gone is noticed, not fatal
  if (argc == 3 && std::strcmp(argv[1], "--serve-jobs") == 0) return serve_jobs(argv[2]);
  if (argc == 2 && std::strcmp(argv[1], "--counter-availability") == 0) {
    if (cudaFree(nullptr) != cudaSuccess) {
      const nlohmann::json none = {{"status", "no_device"}, {"message", "no CUDA device is visible"}};
      std::printf("%s\n", none.dump().c_str());
      return to_int(ExitCode::kNoDevice);
    }
    const nlohmann::json found = counter_availability();
    std::printf("%s\n", found.dump().c_str());
    return to_int(found.value("status", "") == kProfileMeasured ? ExitCode::kOk : ExitCode::kProfilerError);
  }
  const bool via = argc >= 3 && std::strcmp(argv[1], "--via") == 0;
  const int first = via ? 3 : 1;  // the first case file
  int dashes = first;
  while (dashes < argc && std::strcmp(argv[dashes], "--") != 0) ++dashes;
  if (dashes > first && dashes + 1 < argc) {
    const std::vector<std::string> case_files(argv + first, argv + dashes);
    const std::vector<std::string> command(argv + dashes + 1, argv + argc);
    return via ? relay_job(argv[2], case_files, command) : run_once(case_files, command);
  }
  std::fprintf(stderr,
               "usage: %s CASE_FILE... -- LAUNCHER_COMMAND...\n"
               "       %s --serve-jobs SOCKET\n"
               "       %s --via SOCKET CASE_FILE... -- LAUNCHER_COMMAND...\n"
               "       %s --counter-availability\n",
               argv[0], argv[0], argv[0], argv[0]);
  return to_int(ExitCode::kUsage);
}
