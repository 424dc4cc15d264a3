#include "launcher_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

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

std::unique_ptr<LauncherProcess> LauncherProcess::start(const std::vector<std::string>& command, bool record,
                                                        std::string* error) {
  if (command.empty()) {
    *error = "no launcher command";
    return nullptr;
  }
  std::unique_ptr<LauncherProcess> lp(new LauncherProcess());
  lp->record_ = record;
  const int control_fd = memfd_create("tilelab-control", 0);  // inherited by the child
  if (control_fd < 0 || ftruncate(control_fd, sizeof(ControlBlock)) != 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    return nullptr;
  }
  void* mem = mmap(nullptr, sizeof(ControlBlock), PROT_READ | PROT_WRITE, MAP_SHARED, control_fd, 0);
  if (mem == MAP_FAILED) {
    *error = std::string("mmap: ") + std::strerror(errno);
    return nullptr;
  }
  lp->control_ = new (mem) ControlBlock();
  int requests[2], replies[2];
  if (pipe(requests) != 0 || pipe(replies) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return nullptr;
  }
  // The trusted side's ends stay out of the child.
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
    return nullptr;
  }
  if (pid == 0) {
    execvp(cargv[0], cargv.data());
    const char* why = std::strerror(errno);
    (void)!write(STDERR_FILENO, "tilelab-harness: cannot start the launcher: ", 44);
    (void)!write(STDERR_FILENO, why, std::strlen(why));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  close(control_fd);
  close(requests[0]);
  close(replies[1]);
  lp->pid_ = pid;
  lp->to_child_ = requests[1];
  lp->from_child_ = replies[0];

  try {
    const json d = lp->request({{"op", "describe"}});
    lp->info_.part_id = d.at("part").get<std::string>();
    lp->info_.launcher = d.at("launcher").get<std::string>();
    if (!signature_from_name(d.at("signature").get<std::string>(), &lp->info_.signature)) {
      throw ProtocolError("an unknown signature");
    }
    lp->context_before_ = d.value("cuda_in_use_at_start", false) == true;
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
  if (ended_ == ExitCode::kOk && pid_ > 0) {
    send_message(to_child_, {{"op", "quit"}});
    note_end("it was told to quit");
  }
  if (to_child_ >= 0) close(to_child_);
  if (from_child_ >= 0) close(from_child_);
}

ExitCode LauncherProcess::startup_error(std::string* message) const {
  *message = start_message_;
  return start_error_;
}

json LauncherProcess::request(const json& message) {
  if (!send_message(to_child_, message)) throw ProtocolError("the launcher's process is gone");
  return receive_message(from_child_);
}

void LauncherProcess::note_end(const std::string& why) {
  if (ended_ != ExitCode::kOk) return;
  int status = reaped_status_;
  bool stopped_by_us = false;
  if (!reaped_ && pid_ > 0) {
    const pid_t got = waitpid(pid_, &status, WNOHANG);
    if (got == 0) {  // still running, but it stopped serving: it is stopped
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      stopped_by_us = true;
    } else if (got < 0) {
      status = -1;
    }
  }
  pid_ = -1;
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

bool LauncherProcess::wait_done(uint64_t seq) {
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t spins = 1;; ++spins) {
    if (control_->done.load(std::memory_order_acquire) == seq) return true;
    if ((spins & 0xFFFF) != 0) continue;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      reaped_status_ = status;
      return false;
    }
    if (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() > kSpinMs) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
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

Invocation LauncherProcess::invoke(const LaunchArgs& args, bool take_records) {
  Invocation call;
  if (ended_ != ExitCode::kOk) {
    call.ended = ended_;
    call.ended_message = ended_message_;
    return call;
  }
  const uint64_t seq = ++seq_;
  json req = {{"op", "call"},       {"seq", seq},         {"records", take_records},
              {"m", where(args.M)}, {"n", where(args.N)}, {"p", where(args.P)},
              {"j", args.j},        {"k", args.k},        {"l", args.l}};
  if (args.prop != nullptr) {
    const cudaDeviceProp& p = *args.prop;
    req["props"] = {{"sharedMemPerBlock", p.sharedMemPerBlock},
                    {"maxThreadsPerBlock", p.maxThreadsPerBlock},
                    {"maxThreadsDim", {p.maxThreadsDim[0], p.maxThreadsDim[1], p.maxThreadsDim[2]}}};
  }
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
  const bool done = wait_done(seq);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (done) {
    try {
      call = invocation_from_wire(receive_message(from_child_));
    } catch (const std::exception& e) {
      note_end(e.what());
    }
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
