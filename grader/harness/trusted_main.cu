// tilelab-harness: the trusted harness. It links no student code.
//
//   tilelab-harness CASE_FILE -- LAUNCHER_COMMAND...
//
// runs the cases of CASE_FILE with the part's launcher in a process of its
// own, started as LAUNCHER_COMMAND (the part's executable, behind whatever
// puts it in the sandbox) with --serve. This process owns the buffers, the
// inputs, the clock and every check of the outputs, and writes the result
// JSON and the outputs where the case file says: see
// core/launcher_process.h. Same result, same exit codes as the in-process
// harness (core/harness.h), plus "launcher_process": true.
#include <signal.h>
#include <sys/prctl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/case_file.h"
#include "core/harness.h"
#include "core/launcher_process.h"
#include "tilelab/exit_codes.h"

int main(int argc, char** argv) {
  using namespace tilelab;
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "usage: %s CASE_FILE -- LAUNCHER_COMMAND...\n", argv[0]);
    return to_int(ExitCode::kUsage);
  }
  // The launcher's process may run as this user (no sandbox user): then it
  // may not read or trace this one through /proc or ptrace.
  prctl(PR_SET_DUMPABLE, 0);
  signal(SIGPIPE, SIG_IGN);  // a launcher process that is gone is noticed, not fatal
  CaseFile file;
  try {
    file = load_case_file(argv[1]);
  } catch (const CaseFileError& e) {
    std::fprintf(stderr, "tilelab: %s [exit %d: %s]\n", e.what(), to_int(ExitCode::kBadCaseFile),
                 exit_code_info(ExitCode::kBadCaseFile).name);
    return to_int(ExitCode::kBadCaseFile);
  }
  std::string error;
  auto launcher = LauncherProcess::start(std::vector<std::string>(argv + 3, argv + argc), file.record_launches, &error);
  if (!launcher) {
    std::fprintf(stderr, "tilelab-harness: cannot start the launcher: %s [exit %d: %s]\n", error.c_str(),
                 to_int(ExitCode::kUsage), exit_code_info(ExitCode::kUsage).name);
    return to_int(ExitCode::kUsage);
  }
  if (launcher->part().part_id.empty()) {  // it never said what it runs: it did not start
    std::string message;
    launcher->startup_error(&message);
    std::fprintf(stderr, "tilelab-harness: the launcher did not start: %s [exit %d: %s]\n", message.c_str(),
                 to_int(ExitCode::kUsage), exit_code_info(ExitCode::kUsage).name);
    return to_int(ExitCode::kUsage);
  }
  run_case_file(file, *launcher);
}
