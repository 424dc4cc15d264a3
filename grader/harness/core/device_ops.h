// GPU work the harness does around a launcher call: filling inputs and
// poison, reading back samples, counting untouched or changed elements.
// All kernels here are named tilelab_harness_* so the launch recorder can
// tell them from the part's kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device_buffer.h"
#include "generator.h"
#include "guard.h"
#include "tilelab/part.h"

namespace tilelab {

// Asynchronous, on the legacy default stream like the part's launches.
void fill_generated(float* dst, uint64_t count, uint64_t seed, MatrixId which, Distribution dist);
void fill_bits(uint32_t* dst, uint64_t count, uint32_t bits);
// out[s] = P[sample_position(seed, s, rows, cols)] for s < samples.
void gather_samples(const uint32_t* p, int rows, int cols, uint64_t seed, int samples, uint32_t* out);

// Synchronous: how many of `count` words equal `bits`; how many differ between a and b.
uint64_t count_equal(const uint32_t* data, uint64_t count, uint32_t bits);
uint64_t count_different(const uint32_t* a, const uint32_t* b, uint64_t count);
// The guards of a region on the device (guard.h), reading back the guards only.
GuardReport check_guards_on_device(const uint32_t* region, uint64_t guard_elements, uint64_t p_elements,
                                   uint32_t guard_bits);

}  // namespace tilelab
