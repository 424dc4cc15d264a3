#include "guard.h"

namespace tilelab {

GuardReport check_guards(const uint32_t* region, uint64_t guard_elements, uint64_t p_elements, uint32_t guard_bits,
                         size_t max_reported) {
  return check_guard_copies(region, region + guard_elements + p_elements, guard_elements, p_elements, guard_bits,
                            max_reported);
}

GuardReport check_guard_copies(const uint32_t* before, const uint32_t* after, uint64_t guard_elements,
                               uint64_t p_elements, uint32_t guard_bits, size_t max_reported) {
  GuardReport report;
  for (uint64_t i = 0; i < guard_elements; ++i) {
    if (before[i] != guard_bits) {
      ++report.modified_before;
      if (report.first_offsets.size() < max_reported) {
        report.first_offsets.push_back(static_cast<int64_t>(i) - static_cast<int64_t>(guard_elements));
      }
    }
  }
  for (uint64_t i = 0; i < guard_elements; ++i) {
    if (after[i] != guard_bits) {
      ++report.modified_after;
      if (report.first_offsets.size() < max_reported) {
        report.first_offsets.push_back(static_cast<int64_t>(p_elements + i));
      }
    }
  }
  return report;
}

}  // namespace tilelab
