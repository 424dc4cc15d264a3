// cublas_sgemm.cu: cuBLAS SGEMM behind the rectangular launcher contract.
//
// The yardstick of a part scored against the vendor library (assignment.yaml:
// versus_cublas). The grader links it into the same harness as a part and
// times it exactly as it times a student's launcher: same case file, inputs,
// warm-up, L2 flush and time rule (tilelab.grading.calibration). It is the
// grader's own code; students may not call any library GEMM.
//
// True FP32: CUBLAS_PEDANTIC_MATH forbids TF32 tensor cores and every other
// reduced-precision shortcut, so the comparison is with FP32 FMAs, as the
// students' kernels must be. (The default math mode was measured at the
// same speed: docs/measurements-archive.md, "Challenge part: the ladder
// toward cuBLAS".)
#include <cublas_v2.h>

#include <cstdio>
#include <cstdlib>

namespace {

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cuBLAS baseline: %s failed with status %d\n", what, static_cast<int>(status));
    std::exit(1);
  }
}

cublasHandle_t handle() {
  // Created on the first call, which the harness makes untimed (warm-up).
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    check(cublasCreate(&created), "cublasCreate");
    check(cublasSetMathMode(created, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode(CUBLAS_PEDANTIC_MATH)");
    return created;
  }();
  return h;
}

}  // namespace

// Row-major P = M N (j x k times k x l) is column-major P^T = N^T M^T: cuBLAS
// sees N as an l x k matrix and M as a k x j one, and writes P as l x j.
void launchCublasSgemm(const float* M, const float* N, float* P, int j, int k, int l) {
  const float one = 1.0f, zero = 0.0f;
  check(cublasSgemm(handle(), CUBLAS_OP_N, CUBLAS_OP_N, l, j, k, &one, N, l, M, k, &zero, P, l), "cublasSgemm");
}
