// Host-side inputs and the float64 reference product.
//
// Used by the trusted verifier and the tests; never by code that needs a GPU.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "case_file.h"
#include "generator.h"

namespace tilelab {

class IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HostInputs {
  int j = 0, k = 0, l = 0;
  std::vector<float> M;  // j x k, row-major
  std::vector<float> N;  // k x l, row-major
};

std::vector<float> generate_matrix(uint64_t seed, MatrixId which, uint64_t count, Distribution dist);
// Reads exactly `count` raw float32 values; throws IoError if the file is
// missing or has another size.
std::vector<float> read_matrix_file(const std::filesystem::path& path, uint64_t count);
void write_matrix_file(const std::filesystem::path& path, const float* data, uint64_t count);

// The inputs a case describes, from its files or its seed.
HostInputs host_inputs(const CaseSpec& spec);

// P = M N in float64, and |M||N| (the scale of each element's rounding error).
struct ReferenceProduct {
  int j = 0, l = 0;
  std::vector<double> value;      // j x l
  std::vector<double> magnitude;  // j x l, sum over t of |M_it| |N_tc|
};

// Rows are split across `threads` host threads (0: as many as the machine has).
ReferenceProduct reference_product(const HostInputs& in, unsigned threads = 0);

struct ReferenceElement {
  double value = 0;
  double magnitude = 0;
};

// One element of the product of generated inputs, from its row of M and
// column of N alone: O(k) work, for checking sampled outputs of timed calls.
ReferenceElement generated_reference_element(uint64_t seed, Distribution dist, int k, int l, int row, int col);

}  // namespace tilelab
