// tilelab-harness as a service: trusted harnesses that a grading keeps.
//
// Every correctness and timing run has its launcher in a process of its own
// (launcher_process.h). Started once per run, the trusted harness would be a
// second CUDA process per run, and CUDA contexts are made one at a time on a
// GPU (docs/measurements-archive.md, "Fast feedback: where a grading's time
// goes"). So the grader starts a few services per grading, each keeping its
// CUDA context, and runs each case file through a relay:
//
//   tilelab-harness --serve-jobs SOCKET
//       the service: runs the jobs that reach SOCKET one at a time, until
//       its standard input closes. It makes its CUDA context before it
//       listens: the socket appears once the context is made.
//   tilelab-harness --via SOCKET CASE_FILE... -- LAUNCHER_COMMAND...
//       the relay: starts the launcher's process (its child, in the sandbox
//       when LAUNCHER_COMMAND puts it there), waits until it serves (its
//       CUDA context made: the service is not held by a launcher still
//       starting), hands the service the case file, the launcher's channels
//       and its own standard error, tells the service when its child ends,
//       and ends with the run's exit status.
//
// The relay has no CUDA context: it starts in milliseconds. It is what the
// grader starts, times and stops, so a run is limited, captured and stopped
// exactly as a one-shot `tilelab-harness CASE_FILE -- ...` is. If the relay
// is stopped from outside (a time limit), the service ends too: nothing of
// that run may be written after whoever stopped it reads the result.
//
// Relay and service speak over the socket in launcher_protocol.h's framing:
//   relay -> service  {"case_files": [path, ...]}, with four descriptors passed
//                     along (SCM_RIGHTS): standard error, the control block,
//                     the request pipe and the reply pipe
//   relay -> service  {"ended": wait status}   its child ended
//   service -> relay  {"kill": true}           end the child, then say "ended"
//   service -> relay  {"exit_code": n}         the run is over; end with n
#pragma once

#include <string>
#include <vector>

namespace tilelab {

// Serves jobs on a Unix socket at `socket_path` (created here; its folder
// keeps it private) until standard input closes. Returns the exit status.
int serve_jobs(const std::string& socket_path);

// Runs `case_files` through the service at `socket_path` with the launcher
// started as `command`; returns the run's exit status. Several case files
// run in turn on one launcher, the i-th part it serves for the i-th file
// (tilelab-part-host --parts), until one's run does not end well; each
// writes its own result, and the status is the last run's.
int relay_job(const std::string& socket_path, const std::vector<std::string>& case_files,
              const std::vector<std::string>& command);

// One-shot: runs `case_files` with the launcher started as `command`, in
// this process, as relay_job does. Returns the exit status.
int run_once(const std::vector<std::string>& case_files, const std::vector<std::string>& command);

}  // namespace tilelab
