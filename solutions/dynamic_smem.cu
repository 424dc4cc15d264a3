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
  // BEGIN SOLUTION
  // HINT: Pick the largest T (at most 32) with T * T <= prop.maxThreadsPerBlock,
  // HINT: T <= prop.maxThreadsDim[0] and [1], and 2 * T * T * sizeof(float) <=
  // HINT: prop.sharedMemPerBlock. Then stage as
  // HINT: many T-wide slices per phase as the shared memory holds (but no more
  // HINT: than k needs): S = T * slices. Return T, S and the bytes of Mds + Nds.
  const size_t limit = prop.sharedMemPerBlock;
  int width = 1;
  while (width < 32 && (width + 1) * (width + 1) <= prop.maxThreadsPerBlock &&
         width + 1 <= prop.maxThreadsDim[0] && width + 1 <= prop.maxThreadsDim[1] &&
         2 * size_t(width + 1) * (width + 1) * sizeof(float) <= limit) {
    ++width;
  }
  const size_t sliceBytes = 2 * size_t(width) * width * sizeof(float);  // one T x T tile of M and one of N
  const int slicesThatFit = static_cast<int>(limit / sliceBytes);
  const int slicesNeeded = (k + width - 1) / width;
  const int slices = slicesThatFit < slicesNeeded ? slicesThatFit : slicesNeeded;
  return TileShape{width, slices * width, slices * sliceBytes};
  // END SOLUTION
  // STUB: TILELAB_TODO("chooseTileShape: size the tiles from prop");
}

__global__ void dynamicSmemKernel(const float* M, const float* N, float* P, int j, int k, int l, int depth) {
  extern __shared__ float tiles[];
  // BEGIN SOLUTION
  // HINT: The block is T x T with T = blockDim.x; the slabs are S = depth deep.
  // HINT: Mds (T x S floats) starts at tiles, Nds (S x T floats) right after it:
  // HINT: pointer arithmetic on a float* counts floats, not bytes. Each phase
  // HINT: covers S values of the dot product; a thread loads S / T elements of
  // HINT: each slab (0.0f outside the matrices), then the usual two barriers.
  const int T = blockDim.x;
  const int S = depth;
  float* Mds = tiles;          // T rows of S floats: Mds[r * S + s]
  float* Nds = tiles + T * S;  // S rows of T floats: Nds[s * T + c]

  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int row = blockIdx.y * T + ty;
  const int col = blockIdx.x * T + tx;

  float sum = 0.0f;
  for (int base = 0; base < k; base += S) {
    // Row ty of the M slab: the T threads of that row step through it together,
    // so neighbouring threads load neighbouring addresses.
    for (int s = tx; s < S; s += T) {
      Mds[ty * S + s] = (row < j && base + s < k) ? M[row * k + base + s] : 0.0f;
    }
    for (int s = ty; s < S; s += T) {
      Nds[s * T + tx] = (base + s < k && col < l) ? N[(base + s) * l + col] : 0.0f;
    }
    __syncthreads();  // read-after-write: both slabs are complete
    for (int s = 0; s < S; ++s) {
      sum += Mds[ty * S + s] * Nds[s * T + tx];
    }
    __syncthreads();  // write-after-read: everyone is done with the slabs
  }
  if (row < j && col < l) {
    P[row * l + col] = sum;
  }
  // END SOLUTION
  // STUB: TILELAB_DEVICE_TODO("dynamicSmemKernel: the tiled product in dynamic shared memory");
}

void launchDynamicSmem(const float* M, const float* N, float* P, int j, int k, int l, const cudaDeviceProp& prop) {
  // BEGIN SOLUTION
  // HINT: Choose the tile shape, launch T x T blocks covering P, and pass the
  // HINT: byte count as the third launch parameter: <<<grid, block, bytes>>>.
  // HINT: Above 48 KB the kernel must first be allowed more, with
  // HINT: cudaFuncSetAttribute(..., cudaFuncAttributeMaxDynamicSharedMemorySize, bytes).
  const TileShape shape = chooseTileShape(prop, k);
  if (shape.bytes > DEFAULT_DYNAMIC_SMEM_LIMIT) {
    TILELAB_CUDA_CHECK(cudaFuncSetAttribute(dynamicSmemKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(shape.bytes)));
  }
  const dim3 block(shape.width, shape.width);
  const dim3 grid((l + shape.width - 1) / shape.width, (j + shape.width - 1) / shape.width);
  dynamicSmemKernel<<<grid, block, shape.bytes>>>(M, N, P, j, k, l, shape.depth);
  // END SOLUTION
  // STUB: TILELAB_TODO("launchDynamicSmem: size the tiles, then launch dynamicSmemKernel");
}
