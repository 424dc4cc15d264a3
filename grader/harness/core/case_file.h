// The case file: what the grader asks one harness run to do.
//
// The grader (trusted) writes it; the harness (untrusted, it links a student's
// part file) reads it; the verifier (trusted) reads it again to know what the
// right answers are. Paths in it are absolute or relative to the case file.
//
//   {
//     "version": 1,
//     "part": "tiled",                        // must match the harness binary
//     "result": "result.json",                // where the harness writes its JSON
//     "record_launches": true,                // CUPTI on (off under a sanitizer)
//     "poison_bits": 2143289344,              // optional: fills P before each call
//     "guard_bits": 2143260589,               // optional: fills the guard regions
//     "guard_elements": 4096,                 // optional: floats on each side of P
//     "gate": "/work/gpu-turn.sock",          // optional: wait there for the GPU alone (gpu_turn.h)
//     "counter_availability": "0a1b...",      // optional: the GPU's counter availability image, hex
//                                             // (counter_profile.h), so the counters' setup is made before the gate
//     "cases": [
//       { "name": "w17", "j": 17, "k": 17, "l": 17,
//         "inputs": {"seed": 7, "distribution": "uniform"},   // or {"M": path, "N": path}
//         "output": "w17.P.f32",              // optional: raw float32, j*l values
//         "tolerance": {"sqrt_k_factor": 16}, // read by the verifier only
//         "props": {"sharedMemPerBlock": 2048, "maxThreadsPerBlock": 256,   // optional
//                   "maxThreadsDim": [16, 16, 64]},
//         "timing": {"seed": 99, "repetitions": 10, "warmup_calls": 2, "warmup_ms": 100,
//                    "min_repetitions": 5, "stable_within": 0.01,   // optional (timing.h)
//                    "input_sets": 3, "samples": 64, "flush_l2": true,   // optional
//                    "give_up_ms": 104.2},            // optional: the budget of one call (timing.h)
//         "profile": {"metrics": ["dram__bytes_read.sum", ...],  // optional: counters of one call
//                     "far_over_metrics": [...]} }  // optional: read instead after a first call far
//                                                   // over the budget (timing.h, reads_far_over)
//     ]
//   }
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "generator.h"

namespace tilelab {

class CaseFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct InputSpec {
  // Either two raw float32 files (row-major, j*k and k*l values) or a seed.
  bool from_files = false;
  std::filesystem::path m_path;
  std::filesystem::path n_path;
  uint64_t seed = 0;
  Distribution distribution = Distribution::kUniform;
};

struct Tolerance {
  // Allowed error per element: sqrt_k_factor * sqrt(k) * 2^-24 * (|M||N|)_ij.
  double sqrt_k_factor = 16.0;
};

struct PropOverrides {
  std::optional<uint64_t> shared_mem_per_block;  // bytes
  bool shared_mem_per_block_optin = false;       // "optin": use the device's opt-in maximum
  std::optional<int> max_threads_per_block;
  std::optional<std::array<int, 3>> max_threads_dim;  // x, y, z
  bool any() const {
    return shared_mem_per_block || shared_mem_per_block_optin || max_threads_per_block || max_threads_dim;
  }
};

struct TimingSpec {
  uint64_t seed = 0;         // inputs of timed call c come from derive_seed(seed, c)
  int repetitions = 10;      // timed calls, at most...
  int min_repetitions = 5;   // ...or as few as this, where they all lie
  double stable_within = 0;  // within this share of their median (0: never fewer)
  int warmup_calls = 2;      // at least this many untimed calls...
  double warmup_ms = 100.0;  // ...and at least this long, so clocks are up
  int input_sets = 3;        // input buffers rotated between calls
  int samples = 64;          // output elements read back after each timed call
  bool flush_l2 = true;
  // The grader's budget for one call, in ms; 0: none. A call slower than it
  // earns no speed points whatever more calls would show, so timing stops
  // once the calls are over it, and one call is waited for only so long (timing.h).
  double give_up_ms = 0;
  // How long one call at this case's size is waited for; 0 without a budget.
  double call_limit_ms() const;
};

// One call is waited for this many budgets, and never less than
// kMinCallLimitMs: a call that could earn points takes half a budget or
// less, and the floor leaves room for what a first call may do once
// (loading the part's module, its own setup).
inline constexpr double kCallLimitFactor = 5.0;
inline constexpr double kMinCallLimitMs = 2000.0;

struct CaseSpec {
  std::string name;
  int j = 0, k = 0, l = 0;
  InputSpec inputs;
  std::filesystem::path output;  // empty: P is not written to a file
  Tolerance tolerance;
  PropOverrides props;
  std::optional<TimingSpec> timing;
  std::optional<std::vector<std::string>> profile_metrics;  // counter_profile.h
  // Fewer counters (fewer passes) for a call that earns no speed points however it is timed (timing.h).
  std::optional<std::vector<std::string>> profile_far_over_metrics;
};

struct CaseFile {
  std::filesystem::path path;  // the file itself, for messages
  std::string part;
  std::filesystem::path result;
  bool record_launches = true;
  uint32_t poison_bits = 0x7FC0DEADu;  // a quiet NaN no kernel computes from finite inputs
  uint32_t guard_bits = 0x7FBADBADu;   // a different NaN, so guard and poison never mix
  int guard_elements = 4096;
  std::filesystem::path gate;  // empty: the GPU is the run's from its start (gpu_turn.h)
  std::vector<uint8_t> counter_availability;  // empty: none given (counter_profile.h)
  std::vector<CaseSpec> cases;
};

// Throws CaseFileError naming the offending field ("cases[2].j: ...").
CaseFile parse_case_file(const nlohmann::json& doc, const std::filesystem::path& base_dir);
CaseFile load_case_file(const std::filesystem::path& path);
nlohmann::json case_file_to_json(const CaseFile& file);

}  // namespace tilelab
