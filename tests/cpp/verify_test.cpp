// The verifier on harness results built here from known outputs: a right
// output passes, and each kind of wrong or missing result fails with a
// reason a student can read.
#include "verify.h"

#include <gtest/gtest.h>

#include "compare.h"
#include "json_io.h"
#include "reference.h"
#include "support.h"
#include "tilelab/exit_codes.h"

namespace tilelab::test {
namespace {

using nlohmann::json;

class Verify : public testing::Test {
 protected:
  void SetUp() override {
    file_.part = "rectangular";
    file_.result = dir_.path() / "result.json";
    CaseSpec c = make_case("r", 5, 7, 3, 42, Distribution::kSmallInt);
    c.output = dir_.path() / "r.P.f32";
    file_.cases.push_back(c);
    CaseSpec d = make_case("s", 9, 2, 4, 43);
    d.output = dir_.path() / "s.P.f32";
    file_.cases.push_back(d);
  }

  // Writes the exact product (rounded to float) as the case's output.
  std::vector<float> write_right_output(const CaseSpec& c) {
    const ReferenceProduct ref = reference_product(host_inputs(c), 1);
    std::vector<float> p(ref.value.begin(), ref.value.end());
    write_matrix_file(c.output, p.data(), p.size());
    return p;
  }

  static json ok_case(const CaseSpec& c) {
    return {
        {"name", c.name},
        {"status", "ok"},
        {"output", c.output.string()},
        {"guard", {{"intact", true}, {"modified_before", 0}, {"modified_after", 0}, {"first_offsets", json::array()}}},
        {"inputs_modified", {{"M", 0}, {"N", 0}}}};
  }

  json finished(json cases) { return {{"state", "finished"}, {"current_case", nullptr}, {"cases", cases}}; }

  TempDir dir_;
  CaseFile file_;
};

TEST_F(Verify, RightOutputsPass) {
  write_right_output(file_.cases[0]);
  write_right_output(file_.cases[1]);
  const json v = verify_run(file_, finished({ok_case(file_.cases[0]), ok_case(file_.cases[1])}));
  EXPECT_EQ(v.at("cases_passed"), 2);
  EXPECT_TRUE(v.at("cases").at(0).at("exact").get<bool>());   // small integers
  EXPECT_FALSE(v.at("cases").at(1).at("exact").get<bool>());  // uniform floats
}

TEST_F(Verify, AWrongElementFailsWithItsPositionAndValues) {
  std::vector<float> p = write_right_output(file_.cases[0]);
  const float expected = p[2 * 3 + 1];
  p[2 * 3 + 1] += 1.0f;  // row 2, column 1
  write_matrix_file(file_.cases[0].output, p.data(), p.size());
  const json v = verify_case(file_, file_.cases[0], ok_case(file_.cases[0]));
  EXPECT_FALSE(v.at("passed").get<bool>());
  EXPECT_EQ(v.at("reasons").at(0), "1 elements of P are wrong");
  const json& first = v.at("comparison").at("first").at(0);
  EXPECT_EQ(first.at("row"), 2);
  EXPECT_EQ(first.at("col"), 1);
  EXPECT_EQ(first.at("expected").get<double>(), expected);
  EXPECT_EQ(first.at("got").get<double>(), expected + 1.0f);
}

TEST_F(Verify, GuardDamageAndChangedInputsFailEvenWithRightValues) {
  write_right_output(file_.cases[0]);
  json r = ok_case(file_.cases[0]);
  r["guard"] = {{"intact", false}, {"modified_before", 0}, {"modified_after", 2}, {"first_offsets", {15, 16}}};
  r["inputs_modified"]["N"] = 3;
  const json v = verify_case(file_, file_.cases[0], r);
  EXPECT_FALSE(v.at("passed").get<bool>());
  EXPECT_TRUE(v.at("comparison").at("passed").get<bool>());
  EXPECT_EQ(v.at("reasons"),
            json({"the part wrote outside P (guard region changed)", "the part changed its input matrices M or N"}));
}

TEST_F(Verify, HarnessStatusIsExplainedAndTheOutputStillChecked) {
  write_right_output(file_.cases[0]);
  json r = ok_case(file_.cases[0]);
  r["status"] = "no_kernel";
  r["message"] = "launchRectangular returned without launching a kernel";
  const json v = verify_case(file_, file_.cases[0], r);
  EXPECT_FALSE(v.at("passed").get<bool>());
  EXPECT_EQ(v.at("reasons").at(0).get<std::string>(), std::string(exit_code_info(ExitCode::kNoKernel).meaning) +
                                                          ": launchRectangular returned without launching a kernel");
  EXPECT_TRUE(v.at("comparison").at("passed").get<bool>());  // computed on the host, but right
}

TEST_F(Verify, CasesAfterACrashAreNotRunAndTheCrashedOneIsNamed) {
  write_right_output(file_.cases[0]);
  const json partial = {{"state", "running"}, {"current_case", "s"}, {"cases", {ok_case(file_.cases[0])}}};
  const json v = verify_run(file_, partial);
  EXPECT_EQ(v.at("cases_passed"), 1);
  const json& s = v.at("cases").at(1);
  EXPECT_FALSE(s.at("ran").get<bool>());
  EXPECT_TRUE(s.at("stopped_here").get<bool>());
  EXPECT_EQ(s.at("reasons").at(0), "the harness process ended while running this case");
}

TEST_F(Verify, NoResultAtAllMeansNothingRan) {
  const json v = verify_run(file_, json());
  EXPECT_EQ(v.at("harness_state"), "missing");
  EXPECT_EQ(v.at("cases_passed"), 0);
  EXPECT_EQ(v.at("cases").at(0).at("reasons").at(0), "not run: the harness stopped before this case");
}

TEST_F(Verify, MalformedResultEntriesFailWithoutCrashingTheVerifier) {
  json bad = ok_case(file_.cases[0]);
  bad["guard"] = "intact";  // a string where an object belongs
  const json v = verify_run(file_, finished({bad, {{"name", 7}}}));
  EXPECT_FALSE(v.at("cases").at(0).at("passed").get<bool>());
  EXPECT_NE(v.at("cases").at(0).at("reasons").at(0).get<std::string>().find("malformed"), std::string::npos);
  EXPECT_FALSE(v.at("cases").at(1).at("ran").get<bool>());  // {"name": 7} names no case
}

TEST_F(Verify, TimedCallsAreCheckedThroughTheirSamples) {
  CaseSpec t = make_case("t", 6, 40, 5, 1);
  t.timing = TimingSpec{};
  t.timing->seed = 99;
  t.timing->samples = 8;
  file_.cases = {t};
  json calls = json::array();
  for (int call = 0; call < 3; ++call) {
    const uint64_t seed = derive_seed(99, call);
    std::vector<uint32_t> bits;
    for (int s = 0; s < 8; ++s) {
      // The harness samples call c's output at positions drawn from call c's
      // seed. Call 2 replays call 1's answer: values right for other inputs.
      const Position pos = sample_position(seed, s, 6, 5);
      const uint64_t answered = call == 2 ? derive_seed(99, 1) : seed;
      const double v = generated_reference_element(answered, Distribution::kUniform, 40, 5, pos.row, pos.col).value;
      bits.push_back(float_bits(static_cast<float>(v)));
    }
    calls.push_back({{"call", call}, {"seed", seed}, {"unwritten", 0}, {"kernels", 1}, {"sample_bits", bits}});
  }
  json r = {
      {"name", "t"},
      {"status", "ok"},
      {"timing", {{"calls", calls}, {"median_event_ms", 0.5}, {"median_wall_ms", 0.6}, {"median_cupti_span_ms", 0.5}}}};
  const json v = verify_case(file_, t, r);
  EXPECT_FALSE(v.at("passed").get<bool>());
  EXPECT_EQ(v.at("timing").at("failed_calls"), 1);
  EXPECT_EQ(v.at("timing").at("first_failure").at("call"), 2);
  EXPECT_DOUBLE_EQ(v.at("timing").at("gflops").get<double>(), 2.0 * 6 * 40 * 5 / 0.5e6);
}

// A timing case the harness stopped as too slow to earn speed points
// (core/timing.h): the calls it made are checked as any others, the stop
// itself fails nothing, and the cases after it were not run on purpose.
TEST_F(Verify, AStoppedTimingIsJudgedByItsCallsAndTheCasesAfterItAreNotTimed) {
  file_.cases.clear();
  for (const char* name : {"slow", "later"}) {
    CaseSpec t = make_case(name, 6, 40, 5, 1);
    t.timing = TimingSpec{};
    t.timing->seed = 99;
    t.timing->samples = 8;
    t.timing->give_up_ms = 2.5;
    file_.cases.push_back(t);
  }
  auto call = [](int index, bool right) {
    const uint64_t seed = derive_seed(99, index);
    std::vector<uint32_t> bits;
    for (int s = 0; s < 8; ++s) {
      const Position pos = sample_position(seed, s, 6, 5);
      const double v = generated_reference_element(seed, Distribution::kUniform, 40, 5, pos.row, pos.col).value;
      bits.push_back(float_bits(static_cast<float>(right ? v : v + 1.0)));
    }
    return json{{"call", index}, {"seed", seed}, {"unwritten", 0}, {"kernels", 1}, {"sample_bits", bits}};
  };
  auto stopped = [&](json calls) {
    return json{{"name", "slow"},
                {"status", "ok"},
                {"timing",
                 {{"calls", calls},
                  {"median_event_ms", 30.0},
                  {"median_wall_ms", 31.0},
                  {"median_cupti_span_ms", 30.0},
                  {"give_up_ms", 2.5},
                  {"stopped_slow", true},
                  {"stop", {{"rule", "median"}, {"ms", 31.0}, {"calls", 6}, {"call_limit_ms", 2000.0}}}}}};
  };
  const json run = {{"state", "finished"},
                    {"current_case", nullptr},
                    {"stopped_slow", "slow"},
                    {"cases", {stopped({call(2, true), call(3, true), call(4, true)})}}};
  const json v = verify_run(file_, run);
  const json& slow = v.at("cases").at(0);
  EXPECT_TRUE(slow.at("passed").get<bool>()) << slow.dump(2);
  EXPECT_TRUE(slow.at("timing").at("stopped_slow").get<bool>());
  EXPECT_EQ(slow.at("timing").at("stop").at("rule"), "median");
  EXPECT_EQ(slow.at("timing").at("give_up_ms"), 2.5);
  const json& later = v.at("cases").at(1);
  EXPECT_FALSE(later.at("ran").get<bool>());
  EXPECT_FALSE(later.at("passed").get<bool>());
  EXPECT_EQ(later.at("not_timed_after"), "slow");
  EXPECT_EQ(later.at("reasons").at(0),
            "not timed: timing stopped at slow, whose calls were too slow to earn speed points");

  // A wrong answer among the calls made still fails the case.
  const json wrong = verify_case(file_, file_.cases[0], stopped({call(2, true), call(3, false), call(4, true)}));
  EXPECT_FALSE(wrong.at("passed").get<bool>());
  EXPECT_EQ(wrong.at("timing").at("failed_calls"), 1);

  // A run that names no stopped case leaves a missing case "not run", as before.
  json unstopped = run;
  unstopped.erase("stopped_slow");
  EXPECT_FALSE(verify_run(file_, unstopped).at("cases").at(1).contains("not_timed_after"));
}

}  // namespace
}  // namespace tilelab::test
