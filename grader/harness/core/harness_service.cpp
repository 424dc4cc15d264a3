#include "harness_service.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include "case_file.h"
#include "harness.h"
#include "launcher_process.h"
#include "launcher_protocol.h"
#include "profiles_together.h"
#include "tilelab/exit_codes.h"

namespace tilelab {

using nlohmann::json;

namespace {

constexpr int kJobDescriptors = 4;  // standard error, control block, requests, replies

void report(const std::string& what, const std::string& message, ExitCode code) {
  std::fprintf(stderr, "tilelab-harness: %s: %s [exit %d: %s]\n", what.c_str(), message.c_str(), to_int(code),
               exit_code_info(code).name);
}

// Loads a run's case files into `files`, which must agree on recording
// launches (one launcher process records for all of them or for none); says
// why not and returns the run's exit status where they cannot run.
ExitCode load_case_files(const std::vector<std::string>& paths, std::vector<CaseFile>* files) {
  try {
    for (const std::string& path : paths) files->push_back(load_case_file(path));
  } catch (const CaseFileError& e) {
    std::fprintf(stderr, "tilelab: %s [exit %d: %s]\n", e.what(), to_int(ExitCode::kBadCaseFile),
                 exit_code_info(ExitCode::kBadCaseFile).name);
    return ExitCode::kBadCaseFile;
  }
  for (const CaseFile& f : *files) {
    if (f.record_launches != files->front().record_launches) {
      report("cannot run these case files on one launcher", "some record launches and some do not", ExitCode::kUsage);
      return ExitCode::kUsage;
    }
  }
  return files->empty() ? ExitCode::kUsage : ExitCode::kOk;
}

// Loads the case files, makes the launcher's process with `make` (told
// whether they record launches) and runs each file's cases in turn, the
// launcher turned to the i-th part served for the i-th file (tilelab-part-host
// --parts), until a file's run does not end well: what the one-shot harness
// and the service do for each run. Returns the last file's run's status.
ExitCode run_with_launcher(
    const std::vector<std::string>& case_files,
    const std::function<std::unique_ptr<LauncherProcess>(bool record, std::string* error)>& make) {
  std::vector<CaseFile> files;
  if (const ExitCode loaded = load_case_files(case_files, &files); loaded != ExitCode::kOk) return loaded;
  std::string error;
  const std::unique_ptr<LauncherProcess> launcher = make(files[0].record_launches, &error);
  if (!launcher) {
    report("cannot start the launcher", error, ExitCode::kUsage);
    return ExitCode::kUsage;
  }
  if (launcher->part().part_id.empty()) {  // it never said what it runs: it did not start
    launcher->startup_error(&error);
    report("the launcher did not start", error, ExitCode::kUsage);
    return ExitCode::kUsage;
  }
  ExitCode code = ExitCode::kOk;
  // Several parts' counters are read together once all were timed (profiles_together.h).
  ProfilesTogether together;
  ProfilesTogether* parts_together = files.size() > 1 ? &together : nullptr;
  for (size_t i = 0; i < files.size() && code == ExitCode::kOk; ++i) {
    try {
      if (i > 0 && !launcher->use(i)) {
        report("the launcher cannot serve the part of " + case_files[i],
               "it serves " + std::to_string(i) + " parts, or it is gone", ExitCode::kUsage);
        code = ExitCode::kUsage;
        break;
      }
      code = run_case_file(files[i], *launcher, parts_together, i);
    } catch (const HarnessExit& e) {
      code = e.code;
    }
  }
  // Those of the parts that were timed, also where a later one ended the run: each result says so if it fails.
  if (together.pending()) {
    try {
      together.read(*launcher);
    } catch (const HarnessExit& e) {
      if (code == ExitCode::kOk) code = e.code;
    }
  }
  return code;
}

// Passes `fds` with one byte; the message follows in the usual framing.
bool send_with_descriptors(int sock, const json& message, const std::vector<int>& fds) {
  char byte = 'F';
  iovec iov{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == 1 && send_message(sock, message);
}

// The descriptors and message send_with_descriptors sent; throws ProtocolError.
json receive_with_descriptors(int sock, std::vector<int>* fds) {
  char byte = 0;
  iovec iov{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * kJobDescriptors));
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n != 1) throw ProtocolError("no job");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0) throw ProtocolError("too many descriptors");
  return receive_message(sock);
}

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

// The launcher's process as the service sees it: through its relay.
class RelayWatch : public ProcessWatch {
 public:
  explicit RelayWatch(int conn) : conn_(conn) {}

  bool ended(int* status) override {
    while (!known_ && readable(conn_, 0)) take(read_news());
    *status = status_;
    return known_;
  }

  int stop() override {
    int status = -1;
    if (ended(&status)) return status;
    if (!send_message(conn_, {{"kill", true}})) relay_gone();
    while (!known_) take(read_news());
    return status_;
  }

  int news_fd() const override { return conn_; }

 private:
  json read_news() {
    try {
      return receive_message(conn_);
    } catch (const ProtocolError&) {
      relay_gone();
    }
  }

  void take(const json& news) {
    const auto it = news.find("ended");
    if (it != news.end() && it->is_number_integer()) {
      status_ = it->get<int>();
      known_ = true;
    }
  }

  // Whoever started the run stopped it (its time limit) and will now read
  // the result: nothing more may be written. The service ends with the run;
  // the grader starts another for the next one.
  [[noreturn]] static void relay_gone() {
    std::fprintf(stderr, "tilelab-harness: a run was stopped from outside; the service ends with it\n");
    std::fflush(stderr);
    _exit(to_int(ExitCode::kEarlyExit));
  }

  int conn_;
  bool known_ = false;
  int status_ = -1;
};

void serve_one(int conn) {
  std::vector<int> fds;
  json job;
  try {
    job = receive_with_descriptors(conn, &fds);
  } catch (const ProtocolError&) {
    job = nullptr;
  }
  std::vector<std::string> case_files;
  const auto it = job.is_object() ? job.find("case_files") : job.end();
  if (it != job.end() && it->is_array()) {
    for (const json& path : *it) {
      if (path.is_string()) case_files.push_back(path.get<std::string>());
    }
    if (case_files.size() != it->size()) case_files.clear();
  }
  if (fds.size() != kJobDescriptors || case_files.empty()) {
    for (int fd : fds) close(fd);
    send_message(conn, {{"exit_code", to_int(ExitCode::kUsage)}});
    return;
  }
  // What the harness prints during the run goes where the relay's own
  // standard error goes: to whoever captures the run.
  std::fflush(stderr);
  const int own_stderr = dup(STDERR_FILENO);
  dup2(fds[0], STDERR_FILENO);
  close(fds[0]);
  const LauncherChannels channels{fds[1], fds[2], fds[3]};
  const ExitCode code = run_with_launcher(case_files, [&](bool record, std::string*) {
    return LauncherProcess::attach(channels, std::make_unique<RelayWatch>(conn), record);
  });
  std::fflush(stderr);
  dup2(own_stderr, STDERR_FILENO);
  close(own_stderr);
  send_message(conn, {{"exit_code", to_int(code)}});
}

// A launcher makes its CUDA context as it starts: about 0.2 s alone on the
// H100, and a second or more while other processes make theirs (contexts are
// made one at a time on a GPU). The service runs jobs one at a time, so the
// relay waits for that here, asking the launcher what it runs, before it
// hands the run over: the service is never held by a launcher that is still
// starting. Whatever comes back (an answer, garbage, the end of the pipe),
// the service asks again and judges; this only waits.
void wait_until_serving(const LauncherChannels& ch) {
  if (!send_message(ch.to_child, {{"op", "describe"}})) return;
  try {
    receive_message(ch.from_child);
  } catch (const ProtocolError&) {
  }
}

}  // namespace

int run_once(const std::vector<std::string>& case_files, const std::vector<std::string>& command) {
  return to_int(run_with_launcher(
      case_files, [&](bool record, std::string* error) { return LauncherProcess::start(command, record, error); }));
}

int serve_jobs(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) {
    report("the socket path is too long", socket_path, ExitCode::kUsage);
    return to_int(ExitCode::kUsage);
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  // The context first, then the socket: the grader holds the GPU shared until the socket is there, so no
  // service makes its context while another grading times a part (grader/tilelab/grading/trusted_harness.py).
  cudaFree(nullptr);
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0 || bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener, 64) != 0) {
    report("cannot listen on " + socket_path, std::strerror(errno), ExitCode::kUsage);
    return to_int(ExitCode::kUsage);
  }
  for (;;) {
    pollfd p[2] = {{listener, POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents != 0) break;  // the grader is done with this service (or gone)
    if (p[0].revents == 0) continue;
    const int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    serve_one(conn);
    close(conn);
  }
  close(listener);
  unlink(socket_path.c_str());
  return to_int(ExitCode::kOk);
}

int relay_job(const std::string& socket_path, const std::vector<std::string>& case_files,
              const std::vector<std::string>& command) {
  std::vector<CaseFile> files;
  if (const ExitCode loaded = load_case_files(case_files, &files); loaded != ExitCode::kOk) return to_int(loaded);
  const bool record = files[0].record_launches;
  std::string error;
  const std::optional<SpawnedLauncher> child = spawn_launcher(command, record, &error);
  if (!child) {
    report("cannot start the launcher", error, ExitCode::kUsage);
    return to_int(ExitCode::kUsage);
  }
  const LauncherChannels& ch = child->channels;
  ChildWatch launcher(child->pid);
  wait_until_serving(ch);
  const int conn = connect_to(socket_path);
  if (conn < 0) {
    const int e = errno;
    launcher.stop();
    report("cannot reach the harness service at " + socket_path, std::strerror(e), ExitCode::kUsage);
    return to_int(ExitCode::kUsage);
  }
  json absolute = json::array();
  for (const std::string& path : case_files) absolute.push_back(std::filesystem::absolute(path).string());
  const bool sent = send_with_descriptors(conn, {{"case_files", absolute}},
                                          {STDERR_FILENO, ch.control_fd, ch.to_child, ch.from_child});
  for (int fd : {ch.control_fd, ch.to_child, ch.from_child}) close(fd);  // the service holds them now

  if (!sent) {
    launcher.stop();
    report("cannot hand the run to the harness service", "it is gone", ExitCode::kCrash);
    return to_int(ExitCode::kCrash);
  }
  bool told = false;
  for (;;) {
    int status = -1;
    const bool ended = launcher.ended(&status);
    if (ended && !told) {
      send_message(conn, {{"ended", status}});  // a service that is gone is noticed below
      told = true;
    }
    if (!readable(conn, ended ? -1 : 10)) continue;
    json message;
    try {
      message = receive_message(conn);
    } catch (const ProtocolError&) {
      launcher.stop();
      report("the harness service ended during the run", "see the grader's log", ExitCode::kCrash);
      return to_int(ExitCode::kCrash);
    }
    if (message.contains("kill")) {
      launcher.stop();
      told = false;  // say "ended" again: the service is waiting for it
    } else if (message.contains("exit_code") && message["exit_code"].is_number_integer()) {
      // The launcher was told to quit; give it a moment before it is made to.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (!launcher.ended(&status) && std::chrono::steady_clock::now() < deadline) usleep(1000);
      launcher.stop();
      const int code = message["exit_code"].get<int>();
      return code >= 0 && code < 256 ? code : to_int(ExitCode::kUsage);
    }
  }
}

}  // namespace tilelab
