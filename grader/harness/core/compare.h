// Comparing a part's float32 output with the float64 reference.
//
// Tolerance. A float32 dot product of length k carries rounding error that
// grows like sqrt(k) * u * (|M||N|)_ij for any summation order (u = 2^-24);
// honest kernels measured on an H100 stay below 1.3 times that, while TF32 or
// half-precision shortcuts land 7 to 1000 times above it at moderate k. So an
// element passes when |got - expected| <= factor * sqrt(k) * u * (|M||N|)_ij,
// with factor 16 by default. Scaling by |M||N| instead of |P| matters: with
// zero-mean inputs many P_ij are near zero by cancellation, and a tolerance
// relative to P_ij would fail honest kernels there.
//
// Small-integer inputs make every summation order exact, so those cases allow
// no error at all.
//
// The comparison is written as !(error <= allowed) so that NaN fails.
#pragma once

#include <cstdint>
#include <vector>

#include "case_file.h"
#include "generator.h"
#include "reference.h"

namespace tilelab {

constexpr double kUnitRoundoff = 0x1.0p-24;

// True when every float summation order gives the exact product: all inputs
// are integers in [-8, 8], so every partial sum is an integer below 2^24
// while k < 2^18.
bool exact_inputs(const HostInputs& in);

// Largest error allowed for one element whose |M||N| is `magnitude`.
double allowed_error(const Tolerance& tol, int k, double magnitude, bool exact);

enum class ElementFault { kWrong, kNotANumber, kUnwritten };

const char* element_fault_name(ElementFault fault);

struct ElementReport {
  int row = 0, col = 0;
  double expected = 0;
  float got = 0;
  uint32_t got_bits = 0;
  double allowed = 0;
  ElementFault fault = ElementFault::kWrong;
};

struct Comparison {
  uint64_t checked = 0;
  uint64_t wrong = 0;                // finite or infinite, outside the tolerance
  uint64_t not_a_number = 0;         // NaN the part wrote
  uint64_t unwritten = 0;            // still holds the poison written before the call
  double worst_ratio = 0;            // max error / allowed over finite outputs (inf if allowed is 0)
  std::vector<ElementReport> first;  // the first few faults, in row-major order

  bool passed() const { return wrong == 0 && not_a_number == 0 && unwritten == 0; }
};

// Accumulates element checks; used for whole outputs and for sampled elements.
class Comparator {
 public:
  Comparator(const Tolerance& tol, int k, bool exact, uint32_t poison_bits, size_t max_reported = 5)
      : tol_(tol), k_(k), exact_(exact), poison_bits_(poison_bits), max_reported_(max_reported) {}

  void check(int row, int col, double expected, double magnitude, uint32_t got_bits);
  const Comparison& result() const { return result_; }

 private:
  Tolerance tol_;
  int k_;
  bool exact_;
  uint32_t poison_bits_;
  size_t max_reported_;
  Comparison result_;
};

// Compares a whole output (j*l values, row-major, as raw bits) with the reference.
Comparison compare_output(const uint32_t* got_bits, const ReferenceProduct& ref, int k, const Tolerance& tol,
                          bool exact, uint32_t poison_bits, size_t max_reported = 5);

uint32_t float_bits(float x);
float bits_float(uint32_t bits);

}  // namespace tilelab
