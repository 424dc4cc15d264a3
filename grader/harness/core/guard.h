// Guard regions around the output: catching writes outside P without a sanitizer.
//
// The harness allocates P with `guard_elements` extra floats on each side,
// fills them with a known bit pattern, and after the call reports every guard
// element that changed. An off-by-one in a boundary check lands a few
// elements past the end of P; a wrong row stride lands further out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tilelab {

struct GuardReport {
  uint64_t modified_before = 0;
  uint64_t modified_after = 0;
  // Offsets relative to P[0] of the first changed guard elements: negative
  // before P, >= j*l after it.
  std::vector<int64_t> first_offsets;

  bool intact() const { return modified_before == 0 && modified_after == 0; }
};

// `region` holds guard_elements words, then p_elements words of P, then
// guard_elements words again.
GuardReport check_guards(const uint32_t* region, uint64_t guard_elements, uint64_t p_elements, uint32_t guard_bits,
                         size_t max_reported = 8);

// The same from copies of the two guards alone (guard_elements words each):
// where P itself is not needed on the host (a timing case), reading back
// only the guards spares a 64 MB copy at 4096 x 4096.
GuardReport check_guard_copies(const uint32_t* before, const uint32_t* after, uint64_t guard_elements,
                               uint64_t p_elements, uint32_t guard_bits, size_t max_reported = 8);

}  // namespace tilelab
