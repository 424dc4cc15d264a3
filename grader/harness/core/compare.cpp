#include "compare.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tilelab {

uint32_t float_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float bits_float(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

bool exact_inputs(const HostInputs& in) {
  if (in.k >= (1 << 18)) return false;
  auto small_integers = [](const std::vector<float>& v) {
    for (float x : v) {
      if (!(std::fabs(x) <= 8.0f) || x != std::nearbyint(x)) return false;
    }
    return true;
  };
  return small_integers(in.M) && small_integers(in.N);
}

double allowed_error(const Tolerance& tol, int k, double magnitude, bool exact) {
  if (exact) return 0.0;
  return tol.sqrt_k_factor * std::sqrt(static_cast<double>(k)) * kUnitRoundoff * magnitude;
}

const char* element_fault_name(ElementFault fault) {
  switch (fault) {
    case ElementFault::kWrong: return "wrong";
    case ElementFault::kNotANumber: return "nan";
    case ElementFault::kUnwritten: return "unwritten";
  }
  return "wrong";
}

void Comparator::check(int row, int col, double expected, double magnitude, uint32_t got_bits) {
  ++result_.checked;
  const float got = bits_float(got_bits);
  const double allowed = allowed_error(tol_, k_, magnitude, exact_);
  ElementFault fault;
  if (got_bits == poison_bits_) {
    fault = ElementFault::kUnwritten;
    ++result_.unwritten;
  } else if (std::isnan(got)) {
    fault = ElementFault::kNotANumber;
    ++result_.not_a_number;
  } else {
    const double error = std::fabs(static_cast<double>(got) - expected);
    const double ratio = allowed > 0 ? error / allowed : (error > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    if (ratio > result_.worst_ratio) result_.worst_ratio = ratio;
    if (error <= allowed) return;
    fault = ElementFault::kWrong;
    ++result_.wrong;
  }
  if (result_.first.size() < max_reported_) {
    result_.first.push_back({row, col, expected, got, got_bits, allowed, fault});
  }
}

Comparison compare_output(const uint32_t* got_bits, const ReferenceProduct& ref, int k, const Tolerance& tol,
                          bool exact, uint32_t poison_bits, size_t max_reported) {
  Comparator cmp(tol, k, exact, poison_bits, max_reported);
  for (int row = 0; row < ref.j; ++row) {
    for (int col = 0; col < ref.l; ++col) {
      const size_t i = size_t(row) * ref.l + col;
      cmp.check(row, col, ref.value[i], ref.magnitude[i], got_bits[i]);
    }
  }
  return cmp.result();
}

}  // namespace tilelab
