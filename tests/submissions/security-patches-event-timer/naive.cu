// Deliberately wrong: a correct but slow kernel (8 x 8 blocks), and a global constructor that overwrites the machine
// code of cudaEventElapsedTime in its own process (x86-64: a jump to a function of its own), so that every call
// between CUDA events claims to have taken a quarter of what it did. The trusted harness's clock runs in another
// process and is what scores: the part keeps only the speed points its kernel earns.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "tilelab/part.h"

namespace {

// What cudaEventElapsedTime says once patched: about a quarter of what a call at 4096 takes this kernel on an H100.
cudaError_t claim_quarter(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 10.4f;
  return cudaSuccess;
}

__attribute__((constructor)) void patch_event_timer() {
  auto* target = reinterpret_cast<unsigned char*>(&cudaEventElapsedTime);
  const long page = sysconf(_SC_PAGESIZE);
  auto* start = reinterpret_cast<unsigned char*>(reinterpret_cast<uintptr_t>(target) & ~uintptr_t(page - 1));
  if (mprotect(start, 2 * page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) return;
  const uint64_t to = reinterpret_cast<uint64_t>(&claim_quarter);
  unsigned char jump[12] = {0x48, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xE0};  // movabs rax, to; jmp rax
  std::memcpy(jump + 2, &to, 8);
  std::memcpy(target, jump, sizeof jump);
  mprotect(start, 2 * page, PROT_READ | PROT_EXEC);
}

}  // namespace

constexpr int BLOCK = 8;

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  dim3 block(BLOCK, BLOCK);
  dim3 grid((Width + BLOCK - 1) / BLOCK, (Width + BLOCK - 1) / BLOCK);
  naiveKernel<<<grid, block>>>(M, N, P, Width);
}
