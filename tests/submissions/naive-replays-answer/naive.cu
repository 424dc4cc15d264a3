// Deliberately wrong: remembers the last P it computed and, when called again with the same Width, copies it back instead of computing.
#include "tilelab/part.h"

constexpr int BLOCK = 16;

// The last answer: kept in device memory between calls.
static float* lastAnswer = nullptr;
static size_t lastCapacity = 0;
static int lastWidth = 0;

__global__ void naiveKernel(const float* M, const float* N, float* P, float* keep, int Width) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) {
      sum += M[row * Width + t] * N[t * Width + col];
    }
    P[row * Width + col] = sum;
    keep[row * Width + col] = sum;
  }
}

__global__ void replayKernel(const float* keep, float* P, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) P[i] = keep[i];
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  const int count = Width * Width;
  if (Width == lastWidth) {  // "same problem as last time": skip the work
    replayKernel<<<(count + 255) / 256, 256>>>(lastAnswer, P, count);
    return;
  }
  if ((size_t)count > lastCapacity) {
    if (lastAnswer != nullptr) cudaFree(lastAnswer);
    TILELAB_CUDA_CHECK(cudaMalloc(&lastAnswer, (size_t)count * sizeof(float)));
    lastCapacity = count;
  }
  lastWidth = Width;
  dim3 block(BLOCK, BLOCK);
  dim3 grid((Width + BLOCK - 1) / BLOCK, (Width + BLOCK - 1) / BLOCK);
  naiveKernel<<<grid, block>>>(M, N, P, lastAnswer, Width);
}
