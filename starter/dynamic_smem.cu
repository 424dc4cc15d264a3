// dynamic_smem.cu: the tiled product with tiles sized at run time from the device.
//
// Contract (the grader depends on it; keep the launcher's name and signature):
//   void launchDynamicSmem(const float* M, const float* N, float* P,
//                          int j, int k, int l, const cudaDeviceProp& prop);
//   M is j x k, N is k x l, P = M * N is j x l, row-major floats in device
//   memory, any j, k, l >= 1 (as in rectangular.cu). `prop` describes the
//   device, but the grader may lower prop.sharedMemPerBlock (to 2048, 512 or
//   128 bytes), prop.maxThreadsPerBlock or prop.maxThreadsDim, to stand for
//   other GPUs: the kernel must adapt, and every launch must keep within all
//   three (threads per block, block width along x and y, shared memory per
//   block); the grader checks each launch against each. All shared
//   memory is dynamic (no static __shared__ arrays in this file). The
//   launcher starts its kernel(s) on the default stream and returns without
//   synchronizing.
//
// The idea: a tile size fixed at compile time is a guess about the GPU. Here
// the launcher reads the limits it is given and picks:
//   - the tile width T, so that a T x T block of threads fits in
//     maxThreadsPerBlock and maxThreadsDim (and a T x T pair of tiles fits in
//     shared memory);
//   - the tile depth S (a multiple of T): each phase stages a T x S slab of M
//     and an S x T slab of N, as deep as the shared memory allows. Deeper
//     slabs mean fewer phases, so fewer barriers per output element.
// It passes the byte count as the third launch parameter, and the kernel
// splits its one `extern __shared__` buffer into Mds and Nds itself.
//
// Build and run: see README.md ("Build and run one part").
#include "tilelab/part.h"

// Without an opt-in, a kernel may use at most 48 KB of dynamic shared memory.
constexpr size_t DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024;

struct TileShape {
  int width;     // T: the block is T x T threads and computes a T x T tile of P
  int depth;     // S: columns of M (rows of N) staged per phase, a multiple of T
  size_t bytes;  // dynamic shared memory per block: Mds (T x S) + Nds (S x T)
};

// Assumes prop.sharedMemPerBlock >= 8 bytes (one float of M and one of N).
TileShape chooseTileShape(const cudaDeviceProp& prop, int k) {
  // TODO(student): Pick the largest T (at most 32) with T * T <= prop.maxThreadsPerBlock,
  //   T <= prop.maxThreadsDim[0] and [1], and 2 * T * T * sizeof(float) <=
  //   prop.sharedMemPerBlock. Then stage as
  //   many T-wide slices per phase as the shared memory holds (but no more
  //   than k needs): S = T * slices. Return T, S and the bytes of Mds + Nds.
  TILELAB_TODO("chooseTileShape: size the tiles from prop");
}

__global__ void dynamicSmemKernel(const float* M, const float* N, float* P, int j, int k, int l, int depth) {
  extern __shared__ float tiles[];
  // TODO(student): The block is T x T with T = blockDim.x; the slabs are S = depth deep.
  //   Mds (T x S floats) starts at tiles, Nds (S x T floats) right after it:
  //   pointer arithmetic on a float* counts floats, not bytes. Each phase
  //   covers S values of the dot product; a thread loads S / T elements of
  //   each slab (0.0f outside the matrices), then the usual two barriers.
  TILELAB_DEVICE_TODO("dynamicSmemKernel: the tiled product in dynamic shared memory");
}

void launchDynamicSmem(const float* M, const float* N, float* P, int j, int k, int l, const cudaDeviceProp& prop) {
  // TODO(student): Choose the tile shape, launch T x T blocks covering P, and pass the
  //   byte count as the third launch parameter: <<<grid, block, bytes>>>.
  //   Above 48 KB the kernel must first be allowed more, with
  //   cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize, bytes).
  TILELAB_TODO("launchDynamicSmem: size the tiles, then launch dynamicSmemKernel");
}
