// Probe: a kernel that writes to an address no allocation covers.
// The address comes from the host, so the compiler cannot prove the store
// invalid and drop it (as it may for a store through a literal null pointer).
#include <cstddef>

__global__ void faultingKernel(float* target) { target[threadIdx.x] = 1.0f; }

void launchNaive(const float*, const float*, float* P, int) {
  faultingKernel<<<1, 32>>>(P + (std::size_t(1) << 40));  // 4 TiB past P
}
