// Deliberately wrong: multiplies on the CPU between host copies, then calls the harness's own
// tilelab::LaunchRecorder::clear() to erase the CUPTI records of those copies, and launches an empty kernel so that
// "a kernel ran". It also replaces the harness's inline median() (the linker may keep either definition) so that
// every timed call would look like the fastest. Both reach into the grader's code.
#include <vector>

#include "tilelab/part.h"

namespace tilelab {
struct LaunchRecorder {
  static void clear();
};
// Declared as the harness declares it; this body returns the smallest value.
inline double median(std::vector<double> v) {
  double best = v.empty() ? 0.0 : v[0];
  for (double x : v) best = x < best ? x : best;
  return best;
}
}  // namespace tilelab

__global__ void naiveKernel() {}

// Its address taken, so the definition is emitted for the linker to choose.
double (*volatile g_median)(std::vector<double>) = &tilelab::median;

void launchNaive(const float* M, const float* N, float* P, int Width) {
  const size_t count = (size_t)Width * Width;
  std::vector<float> hM(count), hN(count), hP(count, 0.0f);
  cudaMemcpy(hM.data(), M, count * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(hN.data(), N, count * sizeof(float), cudaMemcpyDeviceToHost);
  for (int r = 0; r < Width; ++r)
    for (int t = 0; t < Width; ++t)
      for (int c = 0; c < Width; ++c) hP[(size_t)r * Width + c] += hM[(size_t)r * Width + t] * hN[(size_t)t * Width + c];
  cudaMemcpy(P, hP.data(), count * sizeof(float), cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();
  tilelab::LaunchRecorder::clear();
  naiveKernel<<<1, 1>>>();
}
