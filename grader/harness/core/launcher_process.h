// The trusted side of a launcher that runs in a process of its own.
//
// tilelab-harness starts the part's executable (behind whatever command
// puts it in the sandbox) with `--serve`, and from then on owns everything
// that decides a score: it allocates M, N and P and shares them through CUDA
// IPC handles, generates the inputs, starts its clock when the inputs are
// ready and the child's context is on the GPU, stops it when the child says
// the launcher returned and its device work is done, and reads P itself.
// What the child reports about its own calls (kernels, copies, API calls,
// its own event times) is kept for the launch checks and as a cross-check;
// the time is the trusted clock's. See launcher_protocol.h for the exchange.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher.h"
#include "launcher_protocol.h"

namespace tilelab {

class LauncherProcess : public Launcher {
 public:
  // Starts `command` + {"--serve", <fds>, ["--record"]} and asks what it
  // runs. Returns nullptr with `error` set if it cannot be started at all.
  static std::unique_ptr<LauncherProcess> start(const std::vector<std::string>& command, bool record,
                                                std::string* error);
  ~LauncherProcess() override;

  const PartInfo& part() const override { return info_; }
  bool records_launches() const override { return record_; }
  bool cuda_in_use_at_start() const override { return context_before_; }
  void share(const void* base, size_t bytes) override;
  void unshare(const void* base) override;
  Invocation invoke(const LaunchArgs& args, bool take_records = true) override;
  std::vector<WindowRecord> take_records(const std::vector<uint64_t>& windows) override;
  bool trusted_clock() const override { return true; }
  ExitCode startup_error(std::string* message) const override;

 private:
  LauncherProcess() = default;
  nlohmann::json request(const nlohmann::json& message);  // throws ProtocolError
  nlohmann::json where(const void* pointer) const;        // [id, offset] of a shared allocation
  bool wait_done(uint64_t seq);                           // false if the process ended first
  void note_end(const std::string& why);                  // reaps the process, keeps how it ended

  pid_t pid_ = -1;
  bool reaped_ = false;  // wait_done() saw it end: its status is below
  int reaped_status_ = -1;
  int to_child_ = -1, from_child_ = -1;
  ControlBlock* control_ = nullptr;
  bool record_ = false;
  PartInfo info_;
  bool context_before_ = false;
  ExitCode start_error_ = ExitCode::kOk;
  std::string start_message_;
  uint64_t seq_ = 0;
  int64_t next_id_ = 1;
  struct Shared {
    int64_t id;
    size_t bytes;
  };
  std::map<uintptr_t, Shared> shared_;  // by base address
  ExitCode ended_ = ExitCode::kOk;      // how the process ended, once it has
  std::string ended_message_;
};

}  // namespace tilelab
