#include "gpu_turn.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "harness.h"
#include "launcher_protocol.h"

namespace tilelab {

namespace {

std::string gate_words(const std::string& why) { return "the grader's GPU turn: " + why; }

}  // namespace

GpuTurn::~GpuTurn() {
  if (socket_ >= 0) close(socket_);
}

void GpuTurn::take() {
  if (taken_ || gate_.empty()) return;
  taken_ = true;
  socket_ = connect_to(gate_.string());
  if (socket_ < 0) fail(ExitCode::kIoError, gate_words("cannot reach " + gate_.string() + ": " + std::strerror(errno)));
  const char ready[] = "ready\n";
  if (send(socket_, ready, sizeof(ready) - 1, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(ready) - 1)) {
    fail(ExitCode::kIoError, gate_words(std::string("cannot say ready: ") + std::strerror(errno)));
  }
  std::string answer;
  char c = 0;
  while (answer.size() < 8) {
    const ssize_t n = recv(socket_, &c, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(ExitCode::kIoError, gate_words("the grader closed the gate before giving the GPU"));
    if (c == '\n') break;
    answer.push_back(c);
  }
  if (answer != "go") fail(ExitCode::kIoError, gate_words("the grader answered \"" + answer + "\", not \"go\""));
}

}  // namespace tilelab
