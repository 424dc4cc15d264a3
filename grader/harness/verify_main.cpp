// tilelab-verify: the trusted side of a harness run. It links no student code.
//
// Usage:  tilelab-verify CASE_FILE HARNESS_RESULT [VERDICT]
//             judge a run; write the verdict JSON to VERDICT (default stdout)
//         tilelab-verify --exit-codes
//             print the harness exit-code table as JSON
// Exit status: 0 when a verdict was written (whatever it says), 2 usage,
// 3 unreadable case file, 4 I/O error.
#include <cstdio>
#include <cstring>
#include <iostream>

#include "core/case_file.h"
#include "core/json_io.h"
#include "core/reference.h"
#include "core/verify.h"
#include "tilelab/exit_codes.h"

using tilelab::ExitCode;
using tilelab::to_int;

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--exit-codes") == 0) {
    nlohmann::json table = nlohmann::json::array();
    for (const tilelab::ExitCodeInfo& info : tilelab::kExitCodeTable) {
      table.push_back({{"code", to_int(info.code)}, {"name", info.name}, {"meaning", info.meaning}});
    }
    std::cout << table.dump(2) << '\n';
    return to_int(ExitCode::kOk);
  }
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s CASE_FILE HARNESS_RESULT [VERDICT]\n       %s --exit-codes\n", argv[0], argv[0]);
    return to_int(ExitCode::kUsage);
  }
  tilelab::CaseFile file;
  try {
    file = tilelab::load_case_file(argv[1]);
  } catch (const tilelab::CaseFileError& e) {
    std::fprintf(stderr, "tilelab-verify: %s\n", e.what());
    return to_int(ExitCode::kBadCaseFile);
  }
  // A missing or broken result file is a verdict too: nothing ran.
  nlohmann::json result;
  try {
    result = tilelab::read_json_file(argv[2]);
  } catch (const tilelab::IoError& e) {
    std::fprintf(stderr, "tilelab-verify: no usable harness result (%s)\n", e.what());
  }
  const nlohmann::json verdict = tilelab::verify_run(file, result);
  try {
    if (argc == 4) {
      tilelab::write_json_file(argv[3], verdict);
    } else {
      std::cout << verdict.dump(2) << '\n';
    }
  } catch (const tilelab::IoError& e) {
    std::fprintf(stderr, "tilelab-verify: %s\n", e.what());
    return to_int(ExitCode::kIoError);
  }
  return to_int(ExitCode::kOk);
}
