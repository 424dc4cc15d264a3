// The GPU's turn: a timing run's calls wait until the grader gives them the
// GPU to themselves.
//
// A timing run starts while other gradings share the GPU: its launcher's
// process, its CUDA context, its buffers and the case's first call cost the
// GPU little and need no quiet one. Only the warm-up, the timed calls and the
// counters' passes must run alone. So where the case file names a gate (a
// Unix socket the grader listens on), the trusted harness says "ready" there
// once, before the first warm-up call, and waits until the grader, holding the
// GPU exclusively, answers "go". The turn lasts until the run ends.
//
// Protocol, one line each way: harness -> grader "ready\n"; grader -> harness
// "go\n". Anything else, or the grader gone, ends the run (kIoError): timing
// on a GPU that others share would score their load.
#pragma once

#include <filesystem>

namespace tilelab {

class GpuTurn {
 public:
  explicit GpuTurn(std::filesystem::path gate) : gate_(std::move(gate)) {}
  ~GpuTurn();
  GpuTurn(const GpuTurn&) = delete;
  GpuTurn& operator=(const GpuTurn&) = delete;

  // Returns once the GPU is this run's alone: at once where no gate is named,
  // or once it was given. Throws HarnessExit (kIoError) if the gate fails.
  void take();
  bool taken() const { return taken_; }

 private:
  std::filesystem::path gate_;
  int socket_ = -1;
  bool taken_ = false;
};

}  // namespace tilelab
