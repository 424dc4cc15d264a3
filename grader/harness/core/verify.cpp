#include "verify.h"

#include <cmath>

#include "compare.h"
#include "json_io.h"
#include "reference.h"
#include "tilelab/exit_codes.h"

namespace tilelab {

using nlohmann::json;

namespace {

std::string status_meaning(const std::string& status) {
  for (const ExitCodeInfo& info : kExitCodeTable) {
    if (status == info.name) return info.meaning;
  }
  return "unknown harness status \"" + status + "\"";
}

// A count the harness reported; anything but a non-negative integer counts as
// "changed", since only the process that runs student code wrote it.
uint64_t count_field(const json& obj, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return 1;
  return it->is_number_unsigned() ? it->get<uint64_t>() : (it->get<int64_t>() == 0 ? 0 : 1);
}

// Checks every timed call's sampled outputs against the reference for the
// inputs that call was given.
json verify_timing(const CaseFile& file, const CaseSpec& spec, const json& timing, std::vector<std::string>& reasons) {
  const TimingSpec& t = *spec.timing;
  uint64_t failed_calls = 0, unwritten_calls = 0, kernel_less_calls = 0;
  json first_failure;
  for (const json& call : timing.at("calls")) {
    const uint64_t seed = call.at("seed").get<uint64_t>();
    const auto bits = call.at("sample_bits").get<std::vector<uint32_t>>();
    Comparator cmp(spec.tolerance, spec.k, false, file.poison_bits, 3);
    for (int s = 0; s < static_cast<int>(bits.size()) && s < t.samples; ++s) {
      const Position pos = sample_position(seed, s, spec.j, spec.l);
      const ReferenceElement ref =
          generated_reference_element(seed, Distribution::kUniform, spec.k, spec.l, pos.row, pos.col);
      cmp.check(pos.row, pos.col, ref.value, ref.magnitude, bits[static_cast<size_t>(s)]);
    }
    const bool samples_ok = cmp.result().passed() && bits.size() == static_cast<size_t>(t.samples);
    const bool written = call.at("unwritten").get<uint64_t>() == 0;
    if (!samples_ok) ++failed_calls;
    if (!written) ++unwritten_calls;
    if (call.at("kernels").get<uint64_t>() == 0) ++kernel_less_calls;
    if ((!samples_ok || !written) && first_failure.is_null()) {
      first_failure = {
          {"call", call.at("call")}, {"samples", to_json(cmp.result())}, {"unwritten", call.at("unwritten")}};
    }
  }
  const uint64_t calls = timing.at("calls").size();
  if (failed_calls > 0) {
    reasons.push_back(std::to_string(failed_calls) + " of " + std::to_string(calls) +
                      " timed calls returned wrong values for fresh inputs");
  }
  if (unwritten_calls > 0) {
    reasons.push_back(std::to_string(unwritten_calls) + " of " + std::to_string(calls) +
                      " timed calls left part of P unwritten");
  }
  const double event_ms = timing.at("median_event_ms").get<double>();
  const double flop = 2.0 * spec.j * spec.k * spec.l;
  json out = {{"calls", calls},
              {"failed_calls", failed_calls},
              {"unwritten_calls", unwritten_calls},
              {"calls_without_kernel", kernel_less_calls},
              {"median_event_ms", event_ms},
              {"median_wall_ms", timing.at("median_wall_ms")},
              {"median_cupti_span_ms", timing.at("median_cupti_span_ms")},
              {"clock", timing.value("clock", "in_process")},
              {"gflops", event_ms > 0 ? flop / (event_ms * 1e6) : 0.0},
              {"first_failure", first_failure}};
  if (timing.contains("guard") && !timing["guard"].at("intact").get<bool>()) {
    reasons.push_back("timed calls wrote outside P");
    out["guard"] = timing["guard"];
  }
  // A stop is no verdict on the values: the calls that were made are checked above like any others.
  if (timing.contains("give_up_ms")) out["give_up_ms"] = timing.at("give_up_ms").get<double>();
  out["stopped_slow"] = timing.value("stopped_slow", false);
  if (out["stopped_slow"].get<bool>()) out["stop"] = timing.at("stop");
  return out;
}

json failed_case(const CaseSpec& spec, bool ran, const std::string& reason) {
  return {{"name", spec.name}, {"j", spec.j},     {"k", spec.k},        {"l", spec.l},
          {"ran", ran},        {"passed", false}, {"reasons", {reason}}};
}

}  // namespace

json verify_case(const CaseFile& file, const CaseSpec& spec, const json& r) {
  std::vector<std::string> reasons;
  json verdict = {{"name", spec.name}, {"j", spec.j}, {"k", spec.k}, {"l", spec.l}, {"ran", true}};
  const std::string status = r.value("status", "missing");
  verdict["status"] = status;
  if (status != "ok") {
    std::string reason = status_meaning(status);
    const std::string message = r.value("message", "");
    if (!message.empty()) reason += ": " + message;
    reasons.push_back(reason);
  }

  // The output is checked whenever it exists, also after a non-ok status:
  // a launcher that computed on the host still gets told whether it was right.
  if (r.contains("output")) {
    try {
      const HostInputs in = host_inputs(spec);
      const ReferenceProduct ref = reference_product(in);
      const std::vector<float> got = read_matrix_file(spec.output, uint64_t(spec.j) * spec.l);
      const bool exact = exact_inputs(in);
      const Comparison cmp = compare_output(reinterpret_cast<const uint32_t*>(got.data()), ref, spec.k, spec.tolerance,
                                            exact, file.poison_bits);
      verdict["comparison"] = to_json(cmp);
      verdict["exact"] = exact;
      if (cmp.wrong > 0) reasons.push_back(std::to_string(cmp.wrong) + " elements of P are wrong");
      if (cmp.not_a_number > 0) reasons.push_back(std::to_string(cmp.not_a_number) + " elements of P are NaN");
      if (cmp.unwritten > 0) reasons.push_back(std::to_string(cmp.unwritten) + " elements of P were never written");
    } catch (const IoError& e) {
      reasons.push_back(std::string("the output could not be checked: ") + e.what());
    }
  } else if (status == "ok" && !spec.timing) {
    // A timing case may go without an output file: its timed calls are checked below.
    reasons.push_back("the harness reported no output file for this case");
  }
  if (r.contains("guard")) {
    verdict["guard"] = r["guard"];
    if (!r["guard"].value("intact", false)) reasons.push_back("the part wrote outside P (guard region changed)");
  }
  if (r.contains("inputs_modified")) {
    verdict["inputs_modified"] = r["inputs_modified"];
    if (count_field(r["inputs_modified"], "M") + count_field(r["inputs_modified"], "N") > 0) {
      reasons.push_back("the part changed its input matrices M or N");
    }
  }
  if (spec.timing && r.contains("timing")) verdict["timing"] = verify_timing(file, spec, r["timing"], reasons);
  verdict["passed"] = reasons.empty();
  verdict["reasons"] = reasons;
  return verdict;
}

json verify_run(const CaseFile& file, const json& harness) {
  json cases = json::array();
  const json no_cases = json::array();
  const json& ran = harness.is_object() && harness.contains("cases") ? harness["cases"] : no_cases;
  const std::string state = harness.is_object() ? harness.value("state", "missing") : "missing";
  const json current = harness.is_object() ? harness.value("current_case", json()) : json();
  // The case whose timing stopped as too slow, once it has been seen: the
  // harness runs none after it (timing.h).
  const json stopped = harness.is_object() ? harness.value("stopped_slow", json()) : json();
  const json* stopped_at = nullptr;
  for (const CaseSpec& spec : file.cases) {
    const json* found = nullptr;
    for (const json& c : ran) {
      if (c.is_object() && c.contains("name") && c["name"] == spec.name) found = &c;
    }
    if (found != nullptr) {
      if (stopped.is_string() && stopped == spec.name) stopped_at = &stopped;
      try {
        cases.push_back(verify_case(file, spec, *found));
      } catch (const json::exception& e) {
        // The result file is written by the process that runs student code.
        cases.push_back(
            failed_case(spec, true, std::string("the harness result for this case is malformed: ") + e.what()));
      }
      continue;
    }
    if (stopped_at != nullptr) {
      json verdict = failed_case(spec, false,
                                 "not timed: timing stopped at " + stopped_at->get<std::string>() +
                                     ", whose calls were too slow to earn speed points");
      verdict["not_timed_after"] = *stopped_at;
      cases.push_back(std::move(verdict));
      continue;
    }
    const bool was_running = current.is_string() && current.get<std::string>() == spec.name;
    json verdict = failed_case(spec, false,
                               was_running ? "the harness process ended while running this case"
                                           : "not run: the harness stopped before this case");
    verdict["stopped_here"] = was_running;
    cases.push_back(std::move(verdict));
  }
  size_t passed = 0;
  for (const json& c : cases) passed += c.at("passed").get<bool>() ? 1 : 0;
  return {{"version", 1},           {"part", file.part},           {"harness_state", state},
          {"cases_passed", passed}, {"cases_total", cases.size()}, {"cases", cases}};
}

}  // namespace tilelab
