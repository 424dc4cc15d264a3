#include "gpu_turn.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "harness.h"

namespace tilelab {

namespace {

[[noreturn]] void gate_failed(const std::string& why) {
  std::fprintf(stderr, "tilelab: the grader's GPU turn: %s [exit %d: %s]\n", why.c_str(), to_int(ExitCode::kIoError),
               exit_code_info(ExitCode::kIoError).name);
  throw HarnessExit{ExitCode::kIoError};
}

}  // namespace

GpuTurn::~GpuTurn() {
  if (socket_ >= 0) close(socket_);
}

void GpuTurn::take() {
  if (taken_ || gate_.empty()) return;
  taken_ = true;
  const std::string path = gate_.string();
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) gate_failed("the gate's path is too long: " + path);
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  socket_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (socket_ < 0) gate_failed(std::string("socket: ") + std::strerror(errno));
  if (connect(socket_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    gate_failed("cannot reach " + path + ": " + std::strerror(errno));
  }
  const char ready[] = "ready\n";
  if (send(socket_, ready, sizeof(ready) - 1, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(ready) - 1)) {
    gate_failed(std::string("cannot say ready: ") + std::strerror(errno));
  }
  std::string answer;
  char c = 0;
  while (answer.size() < 8) {
    const ssize_t n = recv(socket_, &c, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) gate_failed("the grader closed the gate before giving the GPU");
    if (c == '\n') break;
    answer.push_back(c);
  }
  if (answer != "go") gate_failed("the grader answered \"" + answer + "\", not \"go\"");
}

}  // namespace tilelab
