// Known good: 16 x 16 tiles, launched the long way round with only calls the grader allows. Each call queries the
// device, sets a kernel attribute, takes device scratch memory from the stream-ordered allocator, captures the
// kernel and a device-to-device copy of its result into P in a CUDA graph, launches the graph on a stream of its own,
// and makes the default stream wait on an event, so the harness's timing still brackets the work.
#include "tilelab/part.h"

static const int TW = 16;

__global__ void tiledIntoScratch(const float* M, const float* N, float* out, int Width) {
  __shared__ float sM[TW][TW];
  __shared__ float sN[TW][TW];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int r = blockIdx.y * TW + ty;
  const int c = blockIdx.x * TW + tx;
  float acc = 0.0f;
  for (int base = 0; base < Width; base += TW) {
    sM[ty][tx] = M[r * Width + base + tx];
    sN[ty][tx] = N[(base + ty) * Width + c];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < TW; ++i) acc += sM[ty][i] * sN[i][tx];
    __syncthreads();
  }
  out[r * Width + c] = acc;
}

void launchTiled(const float* M, const float* N, float* P, int Width) {
  static cudaStream_t stream = nullptr;
  if (stream == nullptr) TILELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int device = 0, sms = 0;
  TILELAB_CUDA_CHECK(cudaGetDevice(&device));
  TILELAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (sms < 1) return;
  TILELAB_CUDA_CHECK(cudaFuncSetAttribute(tiledIntoScratch, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared));

  const size_t bytes = (size_t)Width * Width * sizeof(float);
  float* scratch = nullptr;
  TILELAB_CUDA_CHECK(cudaMallocAsync(&scratch, bytes, stream));
  TILELAB_CUDA_CHECK(cudaMemsetAsync(scratch, 0, bytes, stream));

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  TILELAB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  tiledIntoScratch<<<dim3(Width / TW, Width / TW), dim3(TW, TW), 0, stream>>>(M, N, scratch, Width);
  TILELAB_CUDA_CHECK(cudaMemcpyAsync(P, scratch, bytes, cudaMemcpyDeviceToDevice, stream));
  TILELAB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  TILELAB_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  TILELAB_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  TILELAB_CUDA_CHECK(cudaFreeAsync(scratch, stream));

  cudaEvent_t done;
  TILELAB_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  TILELAB_CUDA_CHECK(cudaEventRecord(done, stream));
  TILELAB_CUDA_CHECK(cudaStreamWaitEvent(0, done, 0));
  TILELAB_CUDA_CHECK(cudaEventDestroy(done));
  TILELAB_CUDA_CHECK(cudaGraphExecDestroy(exec));
  TILELAB_CUDA_CHECK(cudaGraphDestroy(graph));
}
