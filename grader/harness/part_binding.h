// A part's launcher, bound to the harness: what part_main.cu (a part's
// harness executable) and part_library.cu (a part built as a shared object)
// both compile once per part, with three definitions from the build (see
// cmake/TilelabParts.cmake): TILELAB_PART_ID, TILELAB_LAUNCHER and one of
// TILELAB_SIGNATURE_{SQUARE,RECTANGULAR,RECTANGULAR_PROPS}. It declares the
// launcher with the contract's exact signature, so a part file whose launcher
// has another name or signature fails to link with an "undefined reference"
// that names the expected signature.
#pragma once

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
#error "a part's binding needs one of TILELAB_SIGNATURE_SQUARE, _RECTANGULAR, _RECTANGULAR_PROPS"
#endif

#define TILELAB_STRINGIFY_(x) #x
#define TILELAB_STRINGIFY(x) TILELAB_STRINGIFY_(x)

static constexpr tilelab::PartBinding kPartBinding{TILELAB_PART_ID, TILELAB_STRINGIFY(TILELAB_LAUNCHER), kSignature,
                                                   call_launcher};
