// The trusted verdict on one harness run.
//
// Reads what the grader asked for (the case file) and what the harness
// reported (its result JSON and output files), recomputes the inputs and the
// float64 reference itself, and decides per case whether the part's output
// is right. Nothing the part wrote is believed without checking: outputs are
// compared element by element, timed calls through their samples.
#pragma once

#include <nlohmann/json.hpp>

#include "case_file.h"

namespace tilelab {

// `harness_result` may be null (the harness wrote nothing) or partial (it
// stopped part way): cases it never finished are reported as not run.
nlohmann::json verify_run(const CaseFile& file, const nlohmann::json& harness_result);

// The verdict for one case, given that case's entry in the harness result.
nlohmann::json verify_case(const CaseFile& file, const CaseSpec& spec, const nlohmann::json& case_result);

}  // namespace tilelab
