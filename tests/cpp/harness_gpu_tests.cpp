// GPU tests of the harness itself: exit codes of broken launchers, guard
// regions, file inputs, and what CUPTI records for the dynamic part. The
// trusted harness's processes: harness_processes_gpu_tests.cpp; timing,
// time budgets and counters: harness_timing_gpu_tests.cpp.
// Each test skips with "skipped: no CUDA device" when no GPU is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "device_buffer.h"
#include "json_io.h"
#include "reference.h"
#include "support.h"
#include "tilelab/exit_codes.h"
#include "verify.h"

namespace tilelab::test {
namespace {

using nlohmann::json;

struct ProbeExpectation {
  const char* probe;
  ExitCode code;
  bool reaches_second_case;  // non-fatal failures go on to the next case
  bool result_finished;      // the harness ended on its own terms and wrote "finished"
};

class ProbeExitCode : public testing::TestWithParam<ProbeExpectation> {};

TEST_P(ProbeExitCode, EndsWithItsDocumentedCode) {
  TILELAB_REQUIRE_GPU();
  const ProbeExpectation& e = GetParam();
  TempDir dir;
  const HarnessRun run = run_harness(probe(e.probe), two_cases("naive"), dir.path());
  ASSERT_FALSE(run.process.timed_out);
  EXPECT_EQ(run.process.exit_code, to_int(e.code)) << run.process.err;
  const std::string name = exit_code_info(e.code).name;
  EXPECT_NE(run.process.err.find(name), std::string::npos) << "stderr should name the status:\n" << run.process.err;

  ASSERT_TRUE(run.result.has_value()) << "the harness wrote no result file";
  const json& r = *run.result;
  EXPECT_EQ(r.at("state"), e.result_finished ? "finished" : "running");
  if (e.result_finished) {
    EXPECT_EQ(r.at("cases").at(0).at("status"), name);
    EXPECT_EQ(r.at("cases").size(), e.reaches_second_case ? 2u : 1u);
  } else {
    EXPECT_EQ(r.at("current_case"), "first");  // the case the process died in
  }
  const json verdict = verify_run(run.cases, r);
  EXPECT_EQ(verdict.at("cases_passed"), 0);
}

// The same launchers with tilelab-harness running the cases and the probe
// serving only its launcher: the same exit code and status. A crash or an
// exit() now ends the launcher's process, not the harness, so the result is
// finished and names the case.
TEST_P(ProbeExitCode, EndsWithTheSameCodeThroughTheTrustedHarness) {
  TILELAB_REQUIRE_GPU();
  const ProbeExpectation& e = GetParam();
  HarnessService service;
  for (const HarnessService* via : std::initializer_list<const HarnessService*>{nullptr, &service}) {
    SCOPED_TRACE(via != nullptr ? "through the service" : "one-shot");
    TempDir dir;
    const HarnessRun run = run_harness(probe(e.probe), two_cases("naive"), dir.path(), 300, true, via);
    ASSERT_FALSE(run.process.timed_out);
    EXPECT_EQ(run.process.exit_code, to_int(e.code)) << run.process.err;
    ASSERT_TRUE(run.result.has_value()) << "the trusted harness wrote no result file\n" << run.process.err;
    const json& r = *run.result;
    EXPECT_EQ(r.at("launcher_process"), true);
    EXPECT_EQ(r.at("state"), "finished");
    EXPECT_EQ(r.at("cases").at(0).at("status"), exit_code_info(e.code).name) << r.dump(2);
    EXPECT_EQ(r.at("cases").size(), e.reaches_second_case ? 2u : 1u);
    EXPECT_EQ(verify_run(run.cases, r).at("cases_passed"), 0);
  }
  // What the probe's process did (a fault, a crash, an exit) stayed in it:
  // the service runs the next part's cases as before.
  TempDir dir;
  const HarnessRun next = run_harness(reference("naive"), two_cases("naive"), dir.path(), 300, true, &service);
  ASSERT_EQ(next.process.exit_code, 0) << next.process.err;
  EXPECT_EQ(verify_run(next.cases, *next.result).at("cases_passed"), 2);
  EXPECT_EQ(service.stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Probes, ProbeExitCode,
                         testing::Values(ProbeExpectation{"no_kernel", ExitCode::kNoKernel, true, true},
                                         ProbeExpectation{"launch_error", ExitCode::kLaunchError, true, true},
                                         ProbeExpectation{"kernel_fault", ExitCode::kKernelFault, false, true},
                                         ProbeExpectation{"host_crash", ExitCode::kCrash, false, false},
                                         ProbeExpectation{"early_exit", ExitCode::kEarlyExit, false, false}),
                         [](const testing::TestParamInfo<ProbeExpectation>& info) {
                           return std::string(info.param.probe);
                         });

TEST(GuardRegions, CatchAWriteJustPastP) {
  TILELAB_REQUIRE_GPU();
  TempDir dir;
  const HarnessRun run = run_harness(probe("out_of_bounds"), two_cases("naive"), dir.path());
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  const json& first = run.result->at("cases").at(0);
  EXPECT_FALSE(first.at("guard").at("intact").get<bool>());
  EXPECT_EQ(first.at("guard").at("modified_after"), 1);
  EXPECT_EQ(first.at("guard").at("first_offsets").at(0), 17 * 17 + 3);
  const json verdict = verify_run(run.cases, *run.result);
  EXPECT_FALSE(verdict.at("cases").at(0).at("passed").get<bool>());
  // The values themselves are right: only the guard region gives it away.
  EXPECT_TRUE(verdict.at("cases").at(0).at("comparison").at("passed").get<bool>());
}

// A timing case writes no output: its first call and its timed calls read
// back only the guards (check_guards_on_device), which must still catch the
// same write.
TEST(GuardRegions, CatchAWriteJustPastPInATimingCase) {
  TILELAB_REQUIRE_GPU();
  TempDir dir;
  CaseFile f = one_case("naive", timed_case("timed", 33, 3, 11));
  f.cases[0].timing->repetitions = 2;
  f.cases[0].timing->warmup_ms = 0;
  const HarnessRun run = run_harness(probe("out_of_bounds"), f, dir.path());
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  const json& timed = run.result->at("cases").at(0);
  for (const json& guard : {timed.at("guard"), timed.at("timing").at("guard")}) {
    EXPECT_FALSE(guard.at("intact").get<bool>()) << guard.dump();
    EXPECT_EQ(guard.at("modified_before"), 0);
    EXPECT_EQ(guard.at("modified_after"), 1);
    EXPECT_EQ(guard.at("first_offsets").at(0), 33 * 33 + 3);
  }
  const json verdict = verify_run(run.cases, *run.result);
  EXPECT_FALSE(verdict.at("cases").at(0).at("passed").get<bool>());
}

TEST(FileInputs, AreReadAndVerifiedExactly) {
  TILELAB_REQUIRE_GPU();
  TempDir dir;
  const int w = 45;
  const std::vector<float> m = generate_matrix(7, MatrixId::kM, w * w, Distribution::kSmallInt);
  const std::vector<float> n = generate_matrix(7, MatrixId::kN, w * w, Distribution::kSmallInt);
  write_matrix_file(dir.path() / "M.f32", m.data(), m.size());
  write_matrix_file(dir.path() / "N.f32", n.data(), n.size());
  CaseFile f;
  f.part = "boundary";
  CaseSpec c = make_case("files", w, w, w, 0);
  c.inputs.from_files = true;
  c.inputs.m_path = dir.path() / "M.f32";
  c.inputs.n_path = dir.path() / "N.f32";
  f.cases.push_back(c);
  const HarnessRun run = run_harness(reference("boundary"), f, dir.path());
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  const json verdict = verify_run(run.cases, *run.result);
  const json& v = verdict.at("cases").at(0);
  EXPECT_TRUE(v.at("passed").get<bool>()) << v.dump(2);
  EXPECT_TRUE(v.at("exact").get<bool>());
  // Exact cases allow no error at all; a right output has none.
  EXPECT_EQ(v.at("comparison").at("worst_error_ratio"), 0.0);
}

// The dynamic part may use dynamic shared memory only, and never more than
// the sharedMemPerBlock it was given, however low.
TEST(DynamicSmem, UsesOnlyDynamicSharedMemoryWithinTheGivenLimit) {
  TILELAB_REQUIRE_GPU();
  TempDir dir;
  CaseFile f;
  f.part = "dynamic_smem";
  struct Limit {
    const char* name;
    std::optional<uint64_t> smem;
    bool optin;
    std::optional<int> threads;
    std::optional<std::array<int, 3>> dims;
  };
  const Limit limits[] = {{"device", {}, false, {}, {}},
                          {"smem2048", 2048, false, {}, {}},
                          {"smem512", 512, false, {}, {}},
                          {"smem128", 128, false, {}, {}},
                          {"threads256", {}, false, 256, {}},
                          {"optin", {}, true, {}, {}},
                          {"dims8x8", {}, false, {}, std::array<int, 3>{8, 8, 64}},
                          {"dims16x4", {}, false, {}, std::array<int, 3>{16, 4, 64}}};
  uint64_t seed = 100;
  for (const Limit& lim : limits) {
    CaseSpec c = make_case(lim.name, 65, 300, 47, seed++);
    c.props.shared_mem_per_block = lim.smem;
    c.props.shared_mem_per_block_optin = lim.optin;
    c.props.max_threads_per_block = lim.threads;
    c.props.max_threads_dim = lim.dims;
    f.cases.push_back(c);
  }
  const HarnessRun run = run_harness(reference("dynamic_smem"), f, dir.path());
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  const json verdict = verify_run(run.cases, *run.result);
  for (size_t i = 0; i < f.cases.size(); ++i) {
    const json& r = run.result->at("cases").at(i);
    const json& v = verdict.at("cases").at(i);
    EXPECT_TRUE(v.at("passed").get<bool>()) << v.dump(2);
    const uint64_t given = r.at("props_given").at("sharedMemPerBlock").get<uint64_t>();
    ASSERT_FALSE(r.at("launches").empty()) << r.dump(2);
    for (const json& k : r.at("launches")) {
      std::cout << "dynamic_smem " << r.at("name").get<std::string>() << ": sharedMemPerBlock given " << given
                << ", block " << k.at("block").dump() << ", static " << k.at("static_shared_bytes") << " B, dynamic "
                << k.at("dynamic_shared_bytes") << " B\n";
      EXPECT_EQ(k.at("static_shared_bytes"), 0);
      EXPECT_GT(k.at("dynamic_shared_bytes").get<int>(), 0);
      EXPECT_LE(k.at("dynamic_shared_bytes").get<uint64_t>(), given);
      const json& block = k.at("block");
      EXPECT_LE(block[0].get<int>() * block[1].get<int>() * block[2].get<int>(),
                r.at("props_given").at("maxThreadsPerBlock").get<int>());
      for (int axis = 0; axis < 3; ++axis) {
        EXPECT_LE(block[axis].get<int>(), r.at("props_given").at("maxThreadsDim")[axis].get<int>());
      }
    }
  }
}

}  // namespace
}  // namespace tilelab::test
