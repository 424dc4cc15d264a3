// The entry point of one part's harness executable.
//
// Compiled once per part with three definitions from the build (see
// cmake/TilelabParts.cmake): TILELAB_PART_ID, TILELAB_LAUNCHER and one of
// TILELAB_SIGNATURE_{SQUARE,RECTANGULAR,RECTANGULAR_PROPS}. It declares the
// launcher with the contract's exact signature, so a part file whose launcher
// has another name or signature fails to link with an "undefined reference"
// that names the expected signature.
#include <cuda_runtime.h>

#include "core/harness.h"

#if defined(TILELAB_SIGNATURE_SQUARE)
void TILELAB_LAUNCHER(const float* M, const float* N, float* P, int Width);
static void call_launcher(const tilelab::LaunchArgs& a) {
  TILELAB_LAUNCHER(a.M, a.N, a.P, a.j);
}
static constexpr tilelab::Signature kSignature = tilelab::Signature::kSquare;
#elif defined(TILELAB_SIGNATURE_RECTANGULAR)
void TILELAB_LAUNCHER(const float* M, const float* N, float* P, int j, int k, int l);
static void call_launcher(const tilelab::LaunchArgs& a) {
  TILELAB_LAUNCHER(a.M, a.N, a.P, a.j, a.k, a.l);
}
static constexpr tilelab::Signature kSignature = tilelab::Signature::kRectangular;
#elif defined(TILELAB_SIGNATURE_RECTANGULAR_PROPS)
void TILELAB_LAUNCHER(const float* M, const float* N, float* P, int j, int k, int l, const cudaDeviceProp& prop);
static void call_launcher(const tilelab::LaunchArgs& a) {
  TILELAB_LAUNCHER(a.M, a.N, a.P, a.j, a.k, a.l, *a.prop);
}
static constexpr tilelab::Signature kSignature = tilelab::Signature::kRectangularProps;
#else
#error "part_main.cu needs one of TILELAB_SIGNATURE_SQUARE, _RECTANGULAR, _RECTANGULAR_PROPS"
#endif

#define TILELAB_STRINGIFY_(x) #x
#define TILELAB_STRINGIFY(x) TILELAB_STRINGIFY_(x)

int main(int argc, char** argv) {
  const tilelab::PartBinding part{TILELAB_PART_ID, TILELAB_STRINGIFY(TILELAB_LAUNCHER), kSignature, call_launcher};
  return tilelab::harness_main(argc, argv, part);
}
