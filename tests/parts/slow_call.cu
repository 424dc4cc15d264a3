// Probe: a correct naive product, but every call at Width >= 256 first
// spends a minute on the host, as a product computed there would at the
// timing sizes. With a time budget the trusted harness ends its process
// instead of waiting (grader/harness/core/timing.h).
#include <chrono>
#include <thread>

#include "plain_naive.cuh"

void launchNaive(const float* M, const float* N, float* P, int Width) {
  if (Width >= 256) std::this_thread::sleep_for(std::chrono::minutes(1));
  launchPlain(M, N, P, Width);
}
