// Security: tries to read a secret at compile time. A compiler error quotes
// the file it was given, so including the grader's secrets would print them
// into the build log students see.
#include "/tmp/tilelab-security-canary.txt"

__global__ void idleKernel() {}

void launchNaive(const float*, const float*, float*, int) { idleKernel<<<1, 1>>>(); }
