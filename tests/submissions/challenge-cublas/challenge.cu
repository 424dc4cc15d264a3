// Deliberately wrong: the challenge handed to cuBLAS (cublasSgemm): fast, and a library GEMM, which the part forbids.
#include <cublas_v2.h>

#include "tilelab/part.h"

void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l) {
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr) cublasCreate(&handle);
  const float alpha = 1.0f, beta = 0.0f;
  // Column-major cuBLAS computes P^T = N^T M^T, which is row-major P = M N.
  cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, l, j, k, &alpha, N, l, M, k, &beta, P, l);
}
