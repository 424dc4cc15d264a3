#include "launcher_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "counter_profile.h"
#include "tilelab/part.h"

namespace tilelab {

using nlohmann::json;

namespace {

// Calls longer than this are waited for with short sleeps instead of a spin:
// a tenth of a millisecond is then under 0.1 % of the call.
constexpr double kSpinMs = 100.0;

bool signature_from_name(const std::string& name, Signature* out) {
  for (Signature s : {Signature::kSquare, Signature::kRectangular, Signature::kRectangularProps}) {
    if (name == signature_name(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

// The exit code a launcher process ended with, if it is one of the table's.
bool known_exit_code(int code, ExitCode* out) {
  for (const ExitCodeInfo& info : kExitCodeTable) {
    if (to_int(info.code) == code) {
      *out = info.code;
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<SpawnedLauncher> spawn_launcher(const std::vector<std::string>& command, bool record,
                                              std::string* error) {
  if (command.empty()) {
    *error = "no launcher command";
    return std::nullopt;
  }
  const int control_fd = memfd_create("tilelab-control", 0);  // inherited by the child
  if (control_fd < 0 || ftruncate(control_fd, sizeof(ControlBlock)) != 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    if (control_fd >= 0) close(control_fd);
    return std::nullopt;
  }
  int requests[2], replies[2];
  if (pipe(requests) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    close(control_fd);
    return std::nullopt;
  }
  if (pipe(replies) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    for (int fd : {control_fd, requests[0], requests[1]}) close(fd);
    return std::nullopt;
  }
  // The trusted side's ends stay out of the child, and out of any other
  // program this process starts.
  fcntl(requests[1], F_SETFD, FD_CLOEXEC);
  fcntl(replies[0], F_SETFD, FD_CLOEXEC);

  std::vector<std::string> argv = command;
  argv.insert(argv.end(),
              {"--serve", std::to_string(control_fd), std::to_string(requests[0]), std::to_string(replies[1])});
  if (record) argv.push_back("--record");
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    for (int fd : {control_fd, requests[0], requests[1], replies[0], replies[1]}) close(fd);
    return std::nullopt;
  }
  if (pid == 0) {
    execvp(cargv[0], cargv.data());
    const char* why = std::strerror(errno);
    (void)!write(STDERR_FILENO, "tilelab-harness: cannot start the launcher: ", 44);
    (void)!write(STDERR_FILENO, why, std::strlen(why));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  close(requests[0]);
  close(replies[1]);
  // The control block's memfd is the trusted side's too now: keep it out of later children.
  fcntl(control_fd, F_SETFD, FD_CLOEXEC);
  return SpawnedLauncher{pid, {control_fd, requests[1], replies[0]}};
}

bool ChildWatch::ended(int* status) {
  if (!reaped_) {
    int got = 0;
    const pid_t r = waitpid(pid_, &got, WNOHANG);
    if (r == 0) return false;
    reaped_ = true;
    status_ = r == pid_ ? got : -1;
  }
  *status = status_;
  return true;
}

int ChildWatch::stop() {
  int status = -1;
  if (ended(&status)) return status;
  kill(pid_, SIGKILL);
  int got = 0;
  status_ = waitpid(pid_, &got, 0) == pid_ ? got : -1;
  reaped_ = true;
  return status_;
}

std::unique_ptr<LauncherProcess> LauncherProcess::start(const std::vector<std::string>& command, bool record,
                                                        std::string* error) {
  const std::optional<SpawnedLauncher> spawned = spawn_launcher(command, record, error);
  if (!spawned) return nullptr;
  return attach(spawned->channels, std::make_unique<ChildWatch>(spawned->pid), record);
}

std::unique_ptr<LauncherProcess> LauncherProcess::attach(const LauncherChannels& channels,
                                                         std::unique_ptr<ProcessWatch> watch, bool record) {
  std::unique_ptr<LauncherProcess> lp(new LauncherProcess());
  lp->record_ = record;
  lp->watch_ = std::move(watch);
  lp->running_ = true;
  lp->to_child_ = channels.to_child;
  lp->from_child_ = channels.from_child;
  void* mem = mmap(nullptr, sizeof(ControlBlock), PROT_READ | PROT_WRITE, MAP_SHARED, channels.control_fd, 0);
  close(channels.control_fd);
  if (mem == MAP_FAILED) {
    lp->note_end(std::string("the control block could not be mapped (") + std::strerror(errno) + ")");
    lp->start_error_ = lp->ended_;
    lp->start_message_ = lp->ended_message_;
    return lp;
  }
  lp->control_ = static_cast<ControlBlock*>(mem);  // the child maps the same zeroed page
  try {
    const json d = lp->request({{"op", "describe"}});
    lp->learn(d);
    if (d.contains("no_device")) {
      lp->start_error_ = ExitCode::kNoDevice;
      lp->start_message_ = d["no_device"].get<std::string>();
    } else if (d.contains("profiler_error")) {
      lp->start_error_ = ExitCode::kProfilerError;
      lp->start_message_ = d["profiler_error"].get<std::string>();
    }
  } catch (const std::exception& e) {  // ProtocolError or a JSON type error: the child is not serving
    lp->note_end(std::string("it was asked what it runs (") + e.what() + ")");
    lp->start_error_ = lp->ended_;
    lp->start_message_ = lp->ended_message_;
  }
  return lp;
}

LauncherProcess::~LauncherProcess() {
  if (ended_ == ExitCode::kOk && running_) {
    send_message(to_child_, {{"op", "quit"}});
    note_end("it was told to quit");
  }
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
  if (control_ != nullptr) munmap(control_, sizeof(ControlBlock));
}

void LauncherProcess::learn(const json& d) {
  PartInfo info;
  info.part_id = d.at("part").get<std::string>();
  info.launcher = d.at("launcher").get<std::string>();
  if (!signature_from_name(d.at("signature").get<std::string>(), &info.signature)) {
    throw ProtocolError("an unknown signature");
  }
  info_ = info;
  context_before_ = d.value("cuda_in_use_at_start", false) == true;
}

bool LauncherProcess::use(size_t index) {
  if (ended_ != ExitCode::kOk || !running_) return false;
  try {
    const json d = request({{"op", "use"}, {"part", index}});
    if (d.contains("error")) return false;
    learn(d);
    return true;
  } catch (const std::exception& e) {  // ProtocolError or a JSON type error: it is not serving
    note_end(std::string("it was asked to serve another part (") + e.what() + ")");
    return false;
  }
}

ExitCode LauncherProcess::startup_error(std::string* message) const {
  *message = start_message_;
  return start_error_;
}

json LauncherProcess::request(const json& message) {
  if (!send_message(to_child_, message)) throw ProtocolError("the launcher's process is gone");
  return receive();
}

json LauncherProcess::receive() {
  const int news = watch_->news_fd();
  if (news < 0) return receive_message(from_child_);  // the pipe ends with the child
  for (;;) {
    pollfd fds[2] = {{from_child_, POLLIN, 0}, {news, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw ProtocolError(std::string("poll: ") + std::strerror(errno));
    }
    if (fds[0].revents != 0) return receive_message(from_child_);
    int status = -1;
    if (fds[1].revents != 0 && watch_->ended(&status)) throw ProtocolError("the launcher's process ended");
  }
}

void LauncherProcess::note_end(const std::string& why) {
  if (ended_ != ExitCode::kOk) return;
  int status = -1;
  bool stopped_by_us = false;
  if (running_ && !watch_->ended(&status)) {  // still running, but it stopped serving: it is stopped
    status = watch_->stop();
    stopped_by_us = true;
  }
  running_ = false;
  ExitCode code = ExitCode::kEarlyExit;
  if (stopped_by_us) {
    ended_ = ExitCode::kCrash;
    ended_message_ = "the launcher's process stopped answering the harness (" + why + ")";
  } else if (status != -1 && WIFSIGNALED(status)) {
    ended_ = ExitCode::kCrash;
    ended_message_ = "the launcher's process was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                     strsignal(WTERMSIG(status)) + ")";
  } else if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) > 0 &&
             known_exit_code(WEXITSTATUS(status), &code)) {
    ended_ = code;
    ended_message_ = std::string("the launcher's process ended: ") + exit_code_info(code).meaning;
  } else {
    ended_ = ExitCode::kEarlyExit;
    ended_message_ = "the launcher's process ended (status " +
                     std::to_string(status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ") while " + why;
  }
}

json LauncherProcess::where(const void* pointer) const {
  const auto p = reinterpret_cast<uintptr_t>(pointer);
  auto it = shared_.upper_bound(p);
  if (it != shared_.begin()) {
    --it;
    if (p >= it->first && p - it->first <= it->second.bytes) return json::array({it->second.id, p - it->first});
  }
  std::fprintf(stderr, "tilelab-harness: a launcher argument points into no shared allocation\n");
  std::abort();  // a fault in the harness, not in the part
}

void LauncherProcess::share(const void* base, size_t bytes) {
  cudaIpcMemHandle_t handle;
  TILELAB_CUDA_CHECK(cudaIpcGetMemHandle(&handle, const_cast<void*>(base)));
  const int64_t id = next_id_++;
  shared_[reinterpret_cast<uintptr_t>(base)] = {id, bytes};
  if (ended_ != ExitCode::kOk) return;
  try {
    const json reply = request({{"op", "share"}, {"id", id}, {"handle", to_hex(&handle, sizeof handle)}});
    if (reply.value("ok", false) != true) {
      const std::string err =
          reply.contains("error") && reply["error"].is_string() ? reply["error"].get<std::string>() : "no reason given";
      throw ProtocolError("it could not open the harness's buffers: " + err);
    }
  } catch (const std::exception& e) {
    note_end(e.what());
  }
}

void LauncherProcess::unshare(const void* base) {
  const auto it = shared_.find(reinterpret_cast<uintptr_t>(base));
  if (it == shared_.end()) return;
  const int64_t id = it->second.id;
  shared_.erase(it);
  if (ended_ != ExitCode::kOk) return;
  try {
    request({{"op", "unshare"}, {"id", id}});
  } catch (const std::exception& e) {
    note_end(e.what());
  }
}

LauncherProcess::Wait LauncherProcess::wait_done(uint64_t seq, double limit_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t spins = 1;; ++spins) {
    if (control_->done.load(std::memory_order_acquire) == seq) return Wait::kDone;
    if ((spins & 0xFFFF) != 0) continue;
    int status = -1;
    if (watch_->ended(&status)) return Wait::kEnded;
    const double waited = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (limit_ms > 0 && waited > limit_ms) return Wait::kOverLimit;
    if (waited > kSpinMs) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void LauncherProcess::end_over_limit(double waited_ms) {
  // The call may be minutes of host arithmetic, or a kernel that takes as
  // long: ending the process ends both, and gives the GPU back at once.
  watch_->stop();
  running_ = false;
  ended_ = ExitCode::kCrash;
  ended_message_ = "the launcher's process was ended: a call was still running after " +
                   std::to_string(static_cast<long long>(waited_ms)) + " ms";
}

std::vector<WindowRecord> LauncherProcess::take_records(const std::vector<uint64_t>& windows) {
  std::vector<WindowRecord> out(windows.size());
  if (ended_ != ExitCode::kOk) return out;
  try {
    const json reply = request({{"op", "records"}, {"windows", windows}});
    const json& records = reply.at("records");
    if (!records.is_array() || records.size() != windows.size()) throw ProtocolError("records for other calls");
    for (size_t i = 0; i < windows.size(); ++i) out[i] = record_from_wire(records[i]);
  } catch (const std::exception& e) {
    note_end(e.what());
    return std::vector<WindowRecord>(windows.size());
  }
  return out;
}

Invocation LauncherProcess::invoke(const LaunchArgs& args, bool take_records, double limit_ms) {
  Invocation call;
  if (ended_ != ExitCode::kOk) {
    call.ended = ended_;
    call.ended_message = ended_message_;
    return call;
  }
  const uint64_t seq = ++seq_;
  json req = call_args(args);
  req["op"] = "call";
  req["seq"] = seq;
  req["records"] = take_records;
  try {
    // The child brings its context onto the GPU before it answers, so the
    // clock below does not count the switch from this process's context.
    if (request(req).value("ready", false) != true) throw ProtocolError("no \"ready\" before the call");
  } catch (const std::exception& e) {
    note_end(e.what());
    call.ended = ended_;
    call.ended_message = ended_message_;
    return call;
  }
  const auto t0 = std::chrono::steady_clock::now();
  control_->go.store(seq, std::memory_order_release);
  const Wait waited = wait_done(seq, limit_ms);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (waited == Wait::kDone) {
    try {
      call = invocation_from_wire(receive_message(from_child_));
    } catch (const std::exception& e) {
      note_end(e.what());
    }
  } else if (waited == Wait::kOverLimit) {
    end_over_limit(wall_ms);
    call.abandoned = true;
  } else {
    note_end("the call was running");
  }
  if (ended_ != ExitCode::kOk) {
    call.ended = ended_;
    call.ended_message = ended_message_;
  }
  call.wall_ms = wall_ms;
  return call;
}

}  // namespace tilelab

namespace tilelab {

json LauncherProcess::call_args(const LaunchArgs& args) const {
  json req = {{"m", where(args.M)}, {"n", where(args.N)}, {"p", where(args.P)},
              {"j", args.j},        {"k", args.k},        {"l", args.l}};
  if (args.prop != nullptr) {
    const cudaDeviceProp& p = *args.prop;
    req["props"] = {{"sharedMemPerBlock", p.sharedMemPerBlock},
                    {"maxThreadsPerBlock", p.maxThreadsPerBlock},
                    {"maxThreadsDim", {p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]}}};
  }
  return req;
}

// Its answer tells the harness nothing: a setup that failed is said again by profile().
void LauncherProcess::prepare_profile(const std::vector<std::string>& metrics,
                                      const std::vector<uint8_t>& availability) {
  if (ended_ != ExitCode::kOk) return;
  try {
    request({{"op", "prepare_profile"},
             {"metrics", metrics},
             {"availability", to_hex(availability.data(), availability.size())}});
  } catch (const std::exception& e) {
    note_end(e.what());
  }
}

namespace {

// A profile that was not read, and why.
json unread_profile(const std::string& why) {
  CounterProfile out;
  out.message = why;
  return to_json(out);
}

}  // namespace

json LauncherProcess::profile(const LaunchArgs& args, const std::vector<std::string>& metrics, double call_limit_ms) {
  if (ended_ != ExitCode::kOk) return unread_profile("the launcher's process had ended");
  json req = call_args(args);
  req["op"] = "profile";
  req["metrics"] = metrics;
  req["call_limit_ms"] = call_limit_ms;
  try {
    return profile_from_wire(request(req), metrics);
  } catch (const std::exception& e) {
    note_end(e.what());
    return unread_profile("the launcher's process ended while it was profiled");
  }
}

std::vector<json> LauncherProcess::profile_parts(const std::vector<PartCall>& calls,
                                                 const std::vector<std::string>& metrics) {
  if (ended_ != ExitCode::kOk)
    return std::vector<json>(calls.size(), unread_profile("the launcher's process had ended"));
  json req = {{"op", "profile_parts"}, {"metrics", metrics}, {"calls", json::array()}};
  for (const PartCall& c : calls) {
    json call = call_args(c.args);
    call["part"] = c.part;
    req["calls"].push_back(std::move(call));
  }
  json reply;
  try {
    reply = request(req);
  } catch (const std::exception& e) {
    note_end(e.what());
    return std::vector<json>(calls.size(), unread_profile("the launcher's process ended while it was profiled"));
  }
  const json profiles = reply.is_object() ? reply.value("profiles", json()) : json();
  std::vector<json> out;
  for (size_t i = 0; i < calls.size(); ++i) {
    out.push_back(profiles.is_array() && profiles.size() == calls.size()
                      ? profile_from_wire(profiles[i], metrics)
                      : unread_profile("the launcher's process gave no profiles"));
  }
  return out;
}

}  // namespace tilelab
