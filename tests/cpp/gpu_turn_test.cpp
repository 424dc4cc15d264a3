// The trusted harness's side of a timing run's GPU turn (core/gpu_turn.h),
// against a gate that a thread here keeps as the grader would.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "gpu_turn.h"
#include "harness.h"
#include "support.h"

namespace tilelab::test {
namespace {

// Listens on `path`, reads what the harness says, answers `answer` (nothing
// where empty) and closes; `heard` gets what it read.
std::thread keep_gate(const std::filesystem::path& path, std::string answer, std::string* heard) {
  const int server = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  EXPECT_EQ(bind(server, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
  EXPECT_EQ(listen(server, 1), 0);
  return std::thread([server, answer, heard] {
    const int conn = accept(server, nullptr, nullptr);
    char buffer[16] = {};
    const ssize_t n = recv(conn, buffer, sizeof(buffer) - 1, 0);
    *heard = std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0);
    if (!answer.empty()) send(conn, answer.data(), answer.size(), MSG_NOSIGNAL);
    close(conn);
    close(server);
  });
}

TEST(GpuTurn, WithoutAGateTheGpuIsTheRunsAtOnce) {
  GpuTurn turn{std::filesystem::path()};
  turn.take();
}

TEST(GpuTurn, SaysReadyAndWaitsForGo) {
  TempDir dir;
  std::string heard;
  std::thread gate = keep_gate(dir.path() / "gate", "go\n", &heard);
  GpuTurn turn(dir.path() / "gate");
  turn.take();
  turn.take();  // once per run: the second asks nothing
  gate.join();
  EXPECT_EQ(heard, "ready\n");
}

TEST(GpuTurn, AGateClosedOrAnsweredOtherwiseEndsTheRun) {
  for (const std::string answer : {"", "stop\n"}) {
    TempDir dir;
    std::string heard;
    std::thread gate = keep_gate(dir.path() / "gate", answer, &heard);
    GpuTurn turn(dir.path() / "gate");
    try {
      turn.take();
      ADD_FAILURE() << "took the GPU on the answer \"" << answer << "\"";
    } catch (const HarnessExit& e) {
      EXPECT_EQ(e.code, ExitCode::kIoError);
    }
    gate.join();
  }
}

TEST(GpuTurn, AGateNobodyKeepsEndsTheRun) {
  TempDir dir;
  GpuTurn turn(dir.path() / "nobody");
  EXPECT_THROW(turn.take(), HarnessExit);
}

}  // namespace
}  // namespace tilelab::test
