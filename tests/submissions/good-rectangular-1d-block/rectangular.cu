// Known good: rectangular tiled product launched with a 1-D block of 256 threads, folded into a 16 x 16 tile.
#include "tilelab/part.h"

#define TS 16
#define THREADS (TS * TS)

__global__ void rectTiled1D(const float* M, const float* N, float* P, int j, int k, int l) {
  __shared__ float Mt[TS * TS];
  __shared__ float Nt[TS * TS];

  const int lane = threadIdx.x % TS;  // column inside the tile
  const int line = threadIdx.x / TS;  // row inside the tile
  const int r = blockIdx.y * TS + line;  // row of M and P, < j
  const int c = blockIdx.x * TS + lane;  // column of N and P, < l

  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += TS) {
    const int mc = k0 + lane;  // column of M, < k
    const int nr = k0 + line;  // row of N, < k
    Mt[line * TS + lane] = (r < j && mc < k) ? M[(size_t)r * k + mc] : 0.0f;
    Nt[line * TS + lane] = (nr < k && c < l) ? N[(size_t)nr * l + c] : 0.0f;
    __syncthreads();
    for (int q = 0; q < TS; ++q) acc += Mt[line * TS + q] * Nt[q * TS + lane];
    __syncthreads();
  }
  if (r < j && c < l) P[(size_t)r * l + c] = acc;
}

void launchRectangular(const float* M, const float* N, float* P, int j, int k, int l) {
  dim3 grid((l + TS - 1) / TS, (j + TS - 1) / TS);
  rectTiled1D<<<grid, THREADS>>>(M, N, P, j, k, l);
}
