#include "case_file.h"

#include <gtest/gtest.h>

namespace tilelab {
namespace {

using nlohmann::json;

json minimal() {
  return json::parse(R"({"version": 1, "part": "naive", "result": "out/result.json",
                         "cases": [{"name": "w17", "j": 17, "k": 17, "l": 17, "inputs": {"seed": 5}}]})");
}

std::string error_of(const json& doc) {
  try {
    parse_case_file(doc, "/base");
  } catch (const CaseFileError& e) {
    return e.what();
  }
  return "";
}

TEST(CaseFile, MinimalFileGetsDefaults) {
  const CaseFile f = parse_case_file(minimal(), "/base");
  EXPECT_EQ(f.part, "naive");
  EXPECT_EQ(f.result, std::filesystem::path("/base/out/result.json"));
  EXPECT_TRUE(f.record_launches);
  EXPECT_EQ(f.guard_elements, 4096);
  ASSERT_EQ(f.cases.size(), 1u);
  const CaseSpec& c = f.cases[0];
  EXPECT_EQ(c.name, "w17");
  EXPECT_EQ(c.j, 17);
  EXPECT_FALSE(c.inputs.from_files);
  EXPECT_EQ(c.inputs.seed, 5u);
  EXPECT_EQ(c.inputs.distribution, Distribution::kUniform);
  EXPECT_DOUBLE_EQ(c.tolerance.sqrt_k_factor, 16.0);
  EXPECT_FALSE(c.props.any());
  EXPECT_FALSE(c.timing.has_value());
}

TEST(CaseFile, FullCaseRoundTripsThroughJson) {
  json doc = minimal();
  doc["record_launches"] = false;
  doc["guard_elements"] = 128;
  doc["cases"][0] = json::parse(R"({"name": "r", "j": 3, "k": 5, "l": 7,
      "inputs": {"M": "/abs/M.f32", "N": "rel/N.f32"}, "output": "P.f32",
      "tolerance": {"sqrt_k_factor": 4}, "props": {"sharedMemPerBlock": "optin", "maxThreadsPerBlock": 256,
                                                         "maxThreadsDim": [16, 8, 64]},
      "timing": {"seed": 9, "repetitions": 3, "warmup_calls": 1, "warmup_ms": 5, "input_sets": 2, "samples": 8,
                 "flush_l2": false, "give_up_ms": 104.25}})");
  const CaseFile f = parse_case_file(doc, "/base");
  const CaseSpec& c = f.cases[0];
  EXPECT_TRUE(c.inputs.from_files);
  EXPECT_EQ(c.inputs.m_path, std::filesystem::path("/abs/M.f32"));
  EXPECT_EQ(c.inputs.n_path, std::filesystem::path("/base/rel/N.f32"));
  EXPECT_EQ(c.output, std::filesystem::path("/base/P.f32"));
  EXPECT_TRUE(c.props.shared_mem_per_block_optin);
  EXPECT_EQ(c.props.max_threads_per_block, 256);
  ASSERT_TRUE(c.props.max_threads_dim.has_value());
  EXPECT_EQ(*c.props.max_threads_dim, (std::array<int, 3>{16, 8, 64}));
  ASSERT_TRUE(c.timing.has_value());
  EXPECT_EQ(c.timing->repetitions, 3);
  EXPECT_FALSE(c.timing->flush_l2);
  EXPECT_DOUBLE_EQ(c.timing->give_up_ms, 104.25);

  const CaseFile again = parse_case_file(case_file_to_json(f), "/elsewhere");
  EXPECT_EQ(case_file_to_json(again), case_file_to_json(f));
}

// The grader's time budget of a timing case: none unless given, and then
// written back as given; one call is waited for five budgets, at least two
// seconds (core/timing.h).
TEST(CaseFile, TimingBudgetIsOptionalAndBoundsTheWaitForOneCall) {
  json doc = minimal();
  doc["cases"][0]["timing"] = json::parse(R"({"seed": 9})");
  const CaseFile plain = parse_case_file(doc, "/base");
  EXPECT_EQ(plain.cases[0].timing->give_up_ms, 0.0);
  EXPECT_EQ(plain.cases[0].timing->call_limit_ms(), 0.0);
  EXPECT_FALSE(case_file_to_json(plain)["cases"][0]["timing"].contains("give_up_ms"));

  doc["cases"][0]["timing"]["give_up_ms"] = 1000;
  const CaseFile budget = parse_case_file(doc, "/base");
  EXPECT_DOUBLE_EQ(budget.cases[0].timing->give_up_ms, 1000.0);
  EXPECT_DOUBLE_EQ(budget.cases[0].timing->call_limit_ms(), kCallLimitFactor * 1000.0);
  EXPECT_EQ(case_file_to_json(budget)["cases"][0]["timing"]["give_up_ms"], 1000.0);

  doc["cases"][0]["timing"]["give_up_ms"] = 104.2;  // the naive part's budget on the H100
  EXPECT_DOUBLE_EQ(parse_case_file(doc, "/base").cases[0].timing->call_limit_ms(), kMinCallLimitMs);

  doc["cases"][0]["timing"]["give_up_ms"] = -1;
  EXPECT_EQ(error_of(doc).rfind("cases[0].timing.give_up_ms: must be between 0 and ", 0), 0u) << error_of(doc);
  doc["cases"][0]["timing"]["give_up_ms"] = "fast";
  EXPECT_EQ(error_of(doc), "cases[0].timing.give_up_ms: must be a number");
}

TEST(CaseFile, ErrorsNameTheField) {
  json doc = minimal();
  doc["cases"][0]["k"] = -3;
  EXPECT_EQ(error_of(doc), "cases[0].k: must be between 1 and 1048576, got -3");

  doc = minimal();
  doc["cases"][0]["props"] = json::parse(R"({"maxThreadsDim": [16, 8]})");
  EXPECT_EQ(error_of(doc), "cases[0].props.maxThreadsDim: must be [x, y, z]");

  doc = minimal();
  doc["cases"][0]["inputs"] = json::parse(R"({"seed": 1, "distribution": "gaussian"})");
  EXPECT_EQ(error_of(doc), "cases[0].inputs.distribution: unknown distribution \"gaussian\" (uniform or small_int)");

  doc = minimal();
  doc["cases"].push_back(doc["cases"][0]);
  EXPECT_EQ(error_of(doc), "cases[1].name: duplicate name \"w17\"");

  doc = minimal();
  doc["cases"][0]["name"] = "../escape";
  EXPECT_NE(error_of(doc).find("must be 1-100 characters"), std::string::npos);

  doc = minimal();
  doc["version"] = 2;
  EXPECT_EQ(error_of(doc), "version: this harness reads version 1, got 2");

  doc = minimal();
  doc["guard_elements"] = 100;
  EXPECT_EQ(error_of(doc), "guard_elements: must be a multiple of 64");

  doc = minimal();
  doc["poison_bits"] = doc.contains("guard_bits") ? doc["guard_bits"] : json(0x7FBADBADu);
  EXPECT_EQ(error_of(doc), "guard_bits: must differ from poison_bits");

  doc = minimal();
  doc["cases"][0]["j"] = 65536;
  doc["cases"][0]["k"] = 65536;
  EXPECT_EQ(error_of(doc), "cases[0]: a matrix of this case has more than 2^30 elements");

  doc = minimal();
  doc["cases"] = json::array();
  EXPECT_EQ(error_of(doc), "cases: must be a non-empty list");
}

// A profile's far-over metrics (core/timing.h): optional, written back as
// given, a list of names as its metrics are, and nothing without metrics.
TEST(CaseFile, FarOverMetricsAreOptionalBesideAProfilesMetrics) {
  json doc = minimal();
  doc["cases"][0]["profile"] = json::parse(R"({"metrics": ["a.sum", "b.sum", "c.sum"]})");
  const CaseFile plain = parse_case_file(doc, "/base");
  ASSERT_TRUE(plain.cases[0].profile_metrics.has_value());
  EXPECT_FALSE(plain.cases[0].profile_far_over_metrics.has_value());
  EXPECT_FALSE(case_file_to_json(plain)["cases"][0]["profile"].contains("far_over_metrics"));

  doc["cases"][0]["profile"]["far_over_metrics"] = json::parse(R"(["a.sum"])");
  const CaseFile fewer = parse_case_file(doc, "/base");
  EXPECT_EQ(*fewer.cases[0].profile_far_over_metrics, std::vector<std::string>{"a.sum"});
  EXPECT_EQ(case_file_to_json(fewer)["cases"][0]["profile"], doc["cases"][0]["profile"]);

  doc["cases"][0]["profile"]["far_over_metrics"] = json::array();
  EXPECT_EQ(error_of(doc), "cases[0].profile.far_over_metrics: must be 1-256 metric names");
  doc["cases"][0]["profile"]["far_over_metrics"] = json::parse(R"(["a.sum", 7])");
  EXPECT_EQ(error_of(doc).rfind("cases[0].profile.far_over_metrics[1]: ", 0), 0u) << error_of(doc);
  doc["cases"][0]["profile"] = json::parse(R"({"far_over_metrics": ["a.sum"]})");
  EXPECT_EQ(error_of(doc).rfind("cases[0].profile", 0), 0u) << error_of(doc);
  EXPECT_NE(error_of(doc).find("metrics"), std::string::npos) << error_of(doc);
}

// The gate where a timing run waits for the GPU alone (core/gpu_turn.h):
// none unless given, relative to the case file, and written back.
TEST(CaseFile, GateIsOptionalAndResolvedAgainstTheCaseFile) {
  json doc = minimal();
  EXPECT_TRUE(parse_case_file(doc, "/base").gate.empty());
  EXPECT_FALSE(case_file_to_json(parse_case_file(doc, "/base")).contains("gate"));
  doc["gate"] = "turn/gate";
  const CaseFile f = parse_case_file(doc, "/base");
  EXPECT_EQ(f.gate, std::filesystem::path("/base/turn/gate"));
  EXPECT_EQ(case_file_to_json(f)["gate"], "/base/turn/gate");
  doc["gate"] = 7;
  EXPECT_THROW(parse_case_file(doc, "/base"), CaseFileError);
}

// The GPU's counter availability image (core/counter_profile.h): none
// unless given, hex two digits a byte, written back as it came.
TEST(CaseFile, CounterAvailabilityIsHexBytesAndOptional) {
  json doc = minimal();
  EXPECT_TRUE(parse_case_file(doc, "/base").counter_availability.empty());
  EXPECT_FALSE(case_file_to_json(parse_case_file(doc, "/base")).contains("counter_availability"));
  doc["counter_availability"] = "00ff7a10";
  const CaseFile f = parse_case_file(doc, "/base");
  EXPECT_EQ(f.counter_availability, (std::vector<uint8_t>{0x00, 0xff, 0x7a, 0x10}));
  EXPECT_EQ(case_file_to_json(f)["counter_availability"], "00ff7a10");
  for (const json bad : {json(""), json("abc"), json("zz"), json("0A"), json(12), json(std::string(4u << 20, 'a'))}) {
    doc["counter_availability"] = bad;
    EXPECT_EQ(error_of(doc).rfind("counter_availability: ", 0), 0u) << bad.dump().substr(0, 20);
  }
}

// The stability rule of a timing case (core/timing.h): off unless given, and written back when on.
TEST(CaseFile, TimingStopsEarlyOnlyWhenAToleranceIsGiven) {
  json doc = minimal();
  doc["cases"][0]["timing"] = json::parse(R"({"seed": 9})");
  const CaseFile plain = parse_case_file(doc, "/base");
  EXPECT_EQ(plain.cases[0].timing->stable_within, 0.0);
  EXPECT_FALSE(case_file_to_json(plain)["cases"][0]["timing"].contains("stable_within"));
  doc["cases"][0]["timing"]["stable_within"] = 0.01;
  doc["cases"][0]["timing"]["min_repetitions"] = 4;
  const CaseFile stable = parse_case_file(doc, "/base");
  EXPECT_DOUBLE_EQ(stable.cases[0].timing->stable_within, 0.01);
  EXPECT_EQ(stable.cases[0].timing->min_repetitions, 4);
  EXPECT_EQ(case_file_to_json(stable)["cases"][0]["timing"]["min_repetitions"], 4);
  doc["cases"][0]["timing"]["stable_within"] = 0.9;
  EXPECT_THROW(parse_case_file(doc, "/base"), CaseFileError);
}

}  // namespace
}  // namespace tilelab
