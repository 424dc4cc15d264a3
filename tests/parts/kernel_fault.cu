// Probe: a kernel that writes through a null device pointer.
__global__ void faultingKernel(float* P) {
  float* nowhere = nullptr;
  nowhere[threadIdx.x] = P[0];
}

void launchNaive(const float*, const float*, float* P, int) { faultingKernel<<<1, 32>>>(P); }
