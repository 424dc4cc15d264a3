// Probe: a correct naive product whose first call spends 300 ms on the host
// before its kernel, as a first call slowed by other runs on the GPU would
// take; every later call is as fast as the naive kernel. Its counters are
// judged by that first call, then read again once the timed calls show it
// fast (grader/harness/core/timing.h).
#include <chrono>
#include <thread>

#include "plain_naive.cuh"

void launchNaive(const float* M, const float* N, float* P, int Width) {
  static bool first = true;
  if (first) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  first = false;
  launchPlain(M, N, P, Width);
}
