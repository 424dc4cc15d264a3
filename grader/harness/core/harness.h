// The harness: runs one part's launcher on the cases of a case file.
//
// One executable per part links this library, a small adapter that knows the
// part's launcher signature (grader/harness/part_main.cu) and the part file.
// It decides nothing about correctness: it records what happened (outputs,
// guard regions, launches, times) for the trusted verifier to judge.
//
// Usage:  <harness> CASE_FILE       run the cases, write the result JSON
//         <harness> --describe      print the part this binary runs, as JSON
// Exit status: see tilelab/exit_codes.h; the first failing case decides it.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "tilelab/exit_codes.h"

namespace tilelab {

enum class Signature {
  kSquare,            // (M, N, P, Width)
  kRectangular,       // (M, N, P, j, k, l)
  kRectangularProps,  // (M, N, P, j, k, l, const cudaDeviceProp&)
};

const char* signature_name(Signature s);

struct LaunchArgs {
  const float* M;
  const float* N;
  float* P;
  int j, k, l;
  const cudaDeviceProp* prop;  // the properties given to the part (overrides applied)
};

struct PartBinding {
  const char* part_id;
  const char* launcher;
  Signature signature;
  void (*call)(const LaunchArgs&);
};

int harness_main(int argc, char** argv, const PartBinding& part);

// `--serve CONTROL_FD REQUESTS_FD REPLIES_FD [--record]` for several parts,
// the first served at start (tilelab-part-host --parts); any other command
// line is a usage error. Never returns.
[[noreturn]] void serve_main(int argc, char** argv, const std::vector<PartBinding>& parts);

// Runs the cases of `case_file` with the part's launcher in this process, as
// harness_main does, and returns the run's exit status instead of ending the
// process: a host runs several parts one after another this way
// (part_host_main.cu). Install the signal guards first.
ExitCode run_in_this_process(const char* case_file, const PartBinding& part);

struct CaseFile;
class Launcher;
class ProfilesTogether;

// The harness cannot go on (a bad case file, no device, a result it cannot
// write): the message is printed, and the run ends with `code`.
struct HarnessExit {
  ExitCode code;
};

// Says `message` on standard error with the exit code's name and ends the
// run with `code` (throws HarnessExit).
[[noreturn]] void fail(ExitCode code, const std::string& message);

// Runs every case of `file` through `launcher` and writes the result JSON:
// the in-process harness and tilelab-harness alike. Returns the exit status
// of the run (the first failing case's); throws HarnessExit. With `together`,
// the file is the run's `index`-th of several, and the counters its timed
// cases would read after their timing are left to it (profiles_together.h).
ExitCode run_case_file(const CaseFile& file, Launcher& launcher, ProfilesTogether* together = nullptr,
                       size_t index = 0);

}  // namespace tilelab
