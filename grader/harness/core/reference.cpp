#include "reference.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <thread>

namespace tilelab {

std::vector<float> generate_matrix(uint64_t seed, MatrixId which, uint64_t count, Distribution dist) {
  std::vector<float> out(count);
  for (uint64_t i = 0; i < count; ++i) out[i] = input_value(seed, which, i, dist);
  return out;
}

std::vector<float> read_matrix_file(const std::filesystem::path& path, uint64_t count) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw IoError(path.string() + ": cannot read input file (" + ec.message() + ")");
  if (size != count * sizeof(float)) {
    throw IoError(path.string() + ": expected " + std::to_string(count * sizeof(float)) + " bytes (" +
                  std::to_string(count) + " float32 values), found " + std::to_string(size));
  }
  std::vector<float> out(count);
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(size))) {
    throw IoError(path.string() + ": read failed");
  }
  return out;
}

void write_matrix_file(const std::filesystem::path& path, const float* data, uint64_t count) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(path.string() + ": cannot open output file for writing");
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
  if (!out) throw IoError(path.string() + ": write failed");
}

HostInputs host_inputs(const CaseSpec& spec) {
  HostInputs in;
  in.j = spec.j;
  in.k = spec.k;
  in.l = spec.l;
  const uint64_t m_count = uint64_t(spec.j) * spec.k;
  const uint64_t n_count = uint64_t(spec.k) * spec.l;
  if (spec.inputs.from_files) {
    in.M = read_matrix_file(spec.inputs.m_path, m_count);
    in.N = read_matrix_file(spec.inputs.n_path, n_count);
  } else {
    in.M = generate_matrix(spec.inputs.seed, MatrixId::kM, m_count, spec.inputs.distribution);
    in.N = generate_matrix(spec.inputs.seed, MatrixId::kN, n_count, spec.inputs.distribution);
  }
  return in;
}

namespace {

// Rows [row_begin, row_end) of the product. The t-outer, c-inner order walks N
// and the accumulators contiguously, so the compiler vectorizes the inner loop.
void reference_rows(const HostInputs& in, ReferenceProduct& out, int row_begin, int row_end) {
  const int k = in.k, l = in.l;
  for (int row = row_begin; row < row_end; ++row) {
    double* value = &out.value[size_t(row) * l];
    double* magnitude = &out.magnitude[size_t(row) * l];
    for (int t = 0; t < k; ++t) {
      const double m = in.M[size_t(row) * k + t];
      const double m_abs = std::fabs(m);
      const float* n_row = &in.N[size_t(t) * l];
      for (int c = 0; c < l; ++c) {
        const double n = n_row[c];
        value[c] += m * n;  // exact product of two floats; the sum's error is ~2^-53
        magnitude[c] += m_abs * std::fabs(n);
      }
    }
  }
}

}  // namespace

ReferenceProduct reference_product(const HostInputs& in, unsigned threads) {
  ReferenceProduct out;
  out.j = in.j;
  out.l = in.l;
  out.value.assign(size_t(in.j) * in.l, 0.0);
  out.magnitude.assign(size_t(in.j) * in.l, 0.0);
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  // Small products are not worth a thread: keep them on the caller's thread.
  const double work = double(in.j) * in.k * in.l;
  threads = std::min<unsigned>(threads, static_cast<unsigned>(std::max(1.0, work / 4e6)));
  threads = std::min<unsigned>(threads, static_cast<unsigned>(in.j));
  if (threads <= 1) {
    reference_rows(in, out, 0, in.j);
    return out;
  }
  std::vector<std::thread> pool;
  const int per = (in.j + int(threads) - 1) / int(threads);
  for (unsigned t = 0; t < threads; ++t) {
    const int begin = int(t) * per;
    const int end = std::min(in.j, begin + per);
    if (begin >= end) break;
    pool.emplace_back(reference_rows, std::cref(in), std::ref(out), begin, end);
  }
  for (auto& th : pool) th.join();
  return out;
}

ReferenceElement generated_reference_element(uint64_t seed, Distribution dist, int k, int l, int row, int col) {
  ReferenceElement e;
  for (int t = 0; t < k; ++t) {
    const double m = input_value(seed, MatrixId::kM, uint64_t(row) * k + t, dist);
    const double n = input_value(seed, MatrixId::kN, uint64_t(t) * l + col, dist);
    e.value += m * n;
    e.magnitude += std::fabs(m) * std::fabs(n);
  }
  return e;
}

}  // namespace tilelab
