// Deliberately wrong: a correct kernel, and in every call a child process that does 30 ms of arithmetic on the
// host, which the launcher waits for: host work handed to a child is still the launcher's.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

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

static void work_in_a_child() {
  const pid_t child = fork();
  if (child == 0) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
    volatile double x = 0;
    while (std::chrono::steady_clock::now() < until) x = x + 1.0;
    _exit(0);
  }
  if (child > 0) waitpid(child, nullptr, 0);
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  work_in_a_child();
  dim3 block(BLOCK, BLOCK);
  dim3 grid((Width + BLOCK - 1) / BLOCK, (Width + BLOCK - 1) / BLOCK);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
}
