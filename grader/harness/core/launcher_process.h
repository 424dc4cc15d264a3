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
#include <optional>
#include <string>
#include <vector>

#include "launcher.h"
#include "launcher_protocol.h"

namespace tilelab {

// The trusted side's ends of a launcher process's channels: the control
// block's memfd, the pipe requests go down and the pipe replies come up.
struct LauncherChannels {
  int control_fd = -1;
  int to_child = -1;
  int from_child = -1;
};

// A launcher process just started: its pid and the trusted side's ends.
struct SpawnedLauncher {
  pid_t pid = -1;
  LauncherChannels channels;
};

// Starts `command` + {"--serve", <fds>, ["--record"]}, its end of each
// channel inherited and this process's kept out. nullopt with `error` set
// if it cannot be started at all.
std::optional<SpawnedLauncher> spawn_launcher(const std::vector<std::string>& command, bool record, std::string* error);

// How the trusted side learns that the launcher's process ended, and ends
// it: by waiting for its own child, or through the relay that started it
// (harness_service.h).
class ProcessWatch {
 public:
  virtual ~ProcessWatch() = default;
  // True once the process has ended, with its wait status (-1 if unknown).
  virtual bool ended(int* status) = 0;
  // Kills it if it still runs; its wait status (-1 if unknown).
  virtual int stop() = 0;
  // A descriptor that becomes readable when ended() may have changed, or -1
  // when it must be polled.
  virtual int news_fd() const = 0;
};

// The launcher's process is this process's child.
class ChildWatch : public ProcessWatch {
 public:
  explicit ChildWatch(pid_t pid) : pid_(pid) {}
  bool ended(int* status) override;
  int stop() override;
  int news_fd() const override { return -1; }

 private:
  pid_t pid_;
  bool reaped_ = false;
  int status_ = -1;
};

class LauncherProcess : public Launcher {
 public:
  // Starts `command` as spawn_launcher does and asks what it runs. Returns
  // nullptr with `error` set if it cannot be started at all.
  static std::unique_ptr<LauncherProcess> start(const std::vector<std::string>& command, bool record,
                                                std::string* error);
  // Takes over the channels of a launcher process started elsewhere, watched
  // by `watch`, and asks what it runs. Closes the channels' descriptors when
  // it is destroyed.
  static std::unique_ptr<LauncherProcess> attach(const LauncherChannels& channels, std::unique_ptr<ProcessWatch> watch,
                                                 bool record);
  ~LauncherProcess() override;

  const PartInfo& part() const override { return info_; }
  bool records_launches() const override { return record_; }
  bool cuda_in_use_at_start() const override { return context_before_; }
  void share(const void* base, size_t bytes) override;
  void unshare(const void* base) override;
  Invocation invoke(const LaunchArgs& args, bool take_records = true, double limit_ms = 0) override;
  std::vector<WindowRecord> take_records(const std::vector<uint64_t>& windows) override;
  nlohmann::json profile(const LaunchArgs& args, const std::vector<std::string>& metrics,
                         double call_limit_ms = 0) override;
  void prepare_profile(const std::vector<std::string>& metrics, const std::vector<uint8_t>& availability) override;
  bool trusted_clock() const override { return true; }
  ExitCode startup_error(std::string* message) const override;
  // One call of each of several parts it serves (the part's index, its
  // arguments), their counters `metrics` read in the same passes
  // (counter_profile.h, profile_calls): a profile each, in order, sanitized as profile()'s.
  struct PartCall {
    size_t part;
    LaunchArgs args;
  };
  std::vector<nlohmann::json> profile_parts(const std::vector<PartCall>& calls,
                                            const std::vector<std::string>& metrics);
  // Turns the process to the `index`-th part it serves (tilelab-part-host
  // --parts) and learns what that part runs. False where it serves no such
  // part or is gone.
  bool use(size_t index);

 private:
  LauncherProcess() = default;
  nlohmann::json request(const nlohmann::json& message);  // throws ProtocolError
  void learn(const nlohmann::json& described);            // what a "describe" or "use" said it runs
  // The next reply; throws ProtocolError, also when the watch sees the
  // process end first (a descendant may hold the pipe open).
  nlohmann::json receive();
  nlohmann::json where(const void* pointer) const;         // [id, offset] of a shared allocation
  nlohmann::json call_args(const LaunchArgs& args) const;  // a request's buffers, sizes and props of a call
  enum class Wait { kDone, kEnded, kOverLimit };
  Wait wait_done(uint64_t seq, double limit_ms);  // limit_ms 0: as long as the process runs
  void note_end(const std::string& why);          // reaps the process, keeps how it ended
  void end_over_limit(double waited_ms);          // ends the process in the middle of a call

  std::unique_ptr<ProcessWatch> watch_;
  bool running_ = false;  // started, and not yet seen to end
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
