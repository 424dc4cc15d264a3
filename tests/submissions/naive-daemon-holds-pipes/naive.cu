// Deliberately wrong: a correct kernel, and on its first call the launcher leaves a daemon behind (a child that
// calls setsid() and forks again), which keeps the run's standard output and error open, computes on the host for
// a while and then waits forever. Nothing the launcher starts may outlive its run.
#include <unistd.h>

#include <cstdio>

#include "tilelab/part.h"

constexpr int BLOCK = 16;

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

static void leave_a_daemon() {
  if (fork() != 0) return;  // the launcher goes on at once
  setsid();
  if (fork() != 0) _exit(0);
  volatile double x = 0;
  for (long i = 0; i < 200000000L; ++i) x = x + 1e-9 * i;  // host work nobody waits for
  for (;;) {
    std::printf("the daemon is still here\n");
    std::fflush(stdout);
    sleep(1);
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  static bool left = false;
  if (!left) {
    left = true;
    leave_a_daemon();
  }
  dim3 block(BLOCK, BLOCK);
  dim3 grid((Width + BLOCK - 1) / BLOCK, (Width + BLOCK - 1) / BLOCK);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
}
