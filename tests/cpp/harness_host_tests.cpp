// Tests of the harness executables that need no GPU: the command line, bad
// case files, and the report when no device is present.
#include <gtest/gtest.h>

#include <fstream>

#include "json_io.h"
#include "support.h"
#include "tilelab/exit_codes.h"

namespace tilelab::test {
namespace {

using nlohmann::json;

std::filesystem::path naive_harness() {
  return build_dir() / "reference" / "naive";
}

ProcessResult run_with_case_text(const std::string& text, const TempDir& dir) {
  const auto path = dir.path() / "cases.json";
  std::ofstream(path) << text;
  return run_process({naive_harness().string(), path.string()}, 60);
}

TEST(HarnessCommandLine, DescribePrintsThePartItRuns) {
  const ProcessResult r = run_process({naive_harness().string(), "--describe"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json d = json::parse(r.out);
  EXPECT_EQ(d.at("part"), "naive");
  EXPECT_EQ(d.at("launcher"), "launchNaive");
  EXPECT_EQ(d.at("signature"), "square");
}

TEST(HarnessCommandLine, NoArgumentsIsAUsageError) {
  const ProcessResult r = run_process({naive_harness().string()}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(r.err.find("usage:"), std::string::npos);
}

TEST(HarnessCaseFile, MissingFileIsABadCaseFile) {
  const ProcessResult r = run_process({naive_harness().string(), "/nonexistent/cases.json"}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kBadCaseFile));
  EXPECT_NE(r.err.find("case file /nonexistent/cases.json: cannot open"), std::string::npos) << r.err;
}

struct BadCase {
  const char* name;
  const char* text;
  const char* message;  // part of the error the harness must print
};

class HarnessRejects : public testing::TestWithParam<BadCase> {};

TEST_P(HarnessRejects, WithExitCodeAndMessage) {
  TempDir dir;
  const ProcessResult r = run_with_case_text(GetParam().text, dir);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kBadCaseFile)) << r.err;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    BadCaseFiles, HarnessRejects,
    testing::Values(
        BadCase{"NotJson", "{ not json", "not valid JSON"},
        BadCase{
            "WrongPart",
            R"({"version":1,"part":"tiled","result":"r.json","cases":[{"name":"a","j":4,"k":4,"l":4,"inputs":{"seed":1}}]})",
            "this harness runs part \"naive\""},
        BadCase{
            "NotSquare",
            R"({"version":1,"part":"naive","result":"r.json","cases":[{"name":"a","j":4,"k":5,"l":4,"inputs":{"seed":1}}]})",
            "j, k and l must be equal"},
        BadCase{
            "PropsForAPartWithoutProps",
            R"({"version":1,"part":"naive","result":"r.json","cases":[{"name":"a","j":4,"k":4,"l":4,"inputs":{"seed":1},"props":{"sharedMemPerBlock":512}}]})",
            "takes none"},
        BadCase{
            "ZeroSize",
            R"({"version":1,"part":"naive","result":"r.json","cases":[{"name":"a","j":0,"k":4,"l":4,"inputs":{"seed":1}}]})",
            "cases[0].j: must be between 1"},
        BadCase{
            "MisspelledKey",
            R"({"version":1,"part":"naive","result":"r.json","cases":[{"name":"a","j":4,"k":4,"l":4,"inputs":{"seed":1},"timing":{"seed":1,"repetiions":3}}]})",
            "unknown key \"repetiions\""}),
    [](const testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(HarnessWithoutGpu, ReportsNoDevice) {
  if (gpu_available()) GTEST_SKIP() << "skipped: a GPU is present; this test is about machines without one";
  TempDir dir;
  const ProcessResult r = run_with_case_text(
      R"({"version":1,"part":"naive","result":"r.json","cases":[{"name":"a","j":4,"k":4,"l":4,"inputs":{"seed":1}}]})",
      dir);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kNoDevice)) << r.err;
  EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tilelab::test
