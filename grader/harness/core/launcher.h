// How the harness calls a part's launcher. Two ways, one interface:
//
//   - in its own process (InProcessLauncher, invoke.cu): the part file is
//     linked into the harness. The sanitizer runs use it (compute-sanitizer
//     must see the kernels' process) and so do the harness's own tests.
//   - in a child process that runs nothing but the launcher
//     (LauncherProcess, launcher_process.h): the trusted harness,
//     tilelab-harness, which links no student code, owns the buffers, the
//     inputs, the clock and every check of the outputs; the child reaches
//     M, N and P through CUDA IPC handles. What decides a score is then
//     measured where student code cannot reach it.
//
// Either way an Invocation (invoke.h) comes back with the call's records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "harness.h"
#include "invoke.h"

namespace tilelab {

struct PartInfo {
  std::string part_id;
  std::string launcher;
  Signature signature = Signature::kSquare;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual const PartInfo& part() const = 0;
  virtual bool records_launches() const = 0;  // kernels, copies and API calls are recorded
  // A CUDA context existed before the launcher's process began its work
  // (code of the part file ran before main()).
  virtual bool cuda_in_use_at_start() const = 0;
  // Allocations the launcher may be handed pointers into. A launcher in
  // another process gets them before a call and lets go of them before
  // they are freed; in-process there is nothing to do.
  virtual void share(const void* base, size_t bytes) = 0;
  virtual void unshare(const void* base) = 0;
  // One call on `args`: bracketed, timed and recorded (invoke.h). With
  // `take_records` false (timed calls), its kernels and copies stay with
  // CUPTI until take_records(): taking them means flushing CUPTI, and with
  // a flush before every timed call the H100 timed each about 0.6 ms
  // slower. Its API calls and CPU time come back at once either way.
  // `limit_ms` > 0 bounds the wait for the call where the launcher runs in a
  // process of its own: past it, that process is ended and the Invocation
  // says `abandoned`. In-process there is nothing to end, and it is ignored.
  virtual Invocation invoke(const LaunchArgs& args, bool take_records = true, double limit_ms = 0) = 0;
  // The kernels and copies of the calls with these windows (Invocation::window).
  virtual std::vector<WindowRecord> take_records(const std::vector<uint64_t>& windows) = 0;
  // The hardware counters `metrics` of calls on `args`, made untimed
  // (counter_profile.h: none where `call_limit_ms` > 0 and the first call
  // took longer); the JSON of a CounterProfile, sanitized when it comes from
  // another process.
  virtual nlohmann::json profile(const LaunchArgs& args, const std::vector<std::string>& metrics,
                                 double call_limit_ms = 0) = 0;
  // Makes the host's part of the counters' setup for a later profile() of
  // `metrics` now, before the run's GPU turn, from the GPU's counter
  // availability image (counter_profile.h).
  virtual void prepare_profile(const std::vector<std::string>& metrics, const std::vector<uint8_t>& availability) = 0;
  // Whether the wall clock of invoke() is the trusted harness's own.
  virtual bool trusted_clock() const = 0;
  // Why the launcher cannot be called at all (no device, no CUPTI, its
  // process did not start), or kOk.
  virtual ExitCode startup_error(std::string* message) const = 0;
};

// Shares one allocation with the launcher for as long as it lives: declare
// it after the buffer, so that the launcher lets go before the buffer is freed.
class SharedWith {
 public:
  SharedWith(Launcher& launcher, const void* base, size_t bytes) : launcher_(launcher), base_(base) {
    launcher_.share(base, bytes);
  }
  ~SharedWith() { launcher_.unshare(base_); }
  SharedWith(const SharedWith&) = delete;
  SharedWith& operator=(const SharedWith&) = delete;

 private:
  Launcher& launcher_;
  const void* base_;
};

// The part linked into this process. Construct it before any CUDA call: it
// starts the recorders when `record`, then looks for a device.
class InProcessLauncher : public Launcher {
 public:
  InProcessLauncher(const PartBinding& binding, bool record);
  const PartInfo& part() const override { return info_; }
  bool records_launches() const override { return record_; }
  bool cuda_in_use_at_start() const override { return context_before_; }
  void share(const void*, size_t) override {}
  void unshare(const void*) override {}
  Invocation invoke(const LaunchArgs& args, bool take_records = true, double limit_ms = 0) override;
  std::vector<WindowRecord> take_records(const std::vector<uint64_t>& windows) override;
  nlohmann::json profile(const LaunchArgs& args, const std::vector<std::string>& metrics,
                         double call_limit_ms = 0) override;
  void prepare_profile(const std::vector<std::string>& metrics, const std::vector<uint8_t>& availability) override;
  bool trusted_clock() const override { return false; }
  ExitCode startup_error(std::string* message) const override {
    *message = error_message_;
    return error_;
  }

 private:
  PartBinding binding_;
  PartInfo info_;
  bool record_ = false;
  bool context_before_ = false;
  ExitCode error_ = ExitCode::kOk;
  std::string error_message_;
};

}  // namespace tilelab
