// tilelab_part_tests: one part's harness on that part's cases from assignment.yaml.
//
//   tilelab_part_tests --part tiled --harness build/reference/tiled --expect pass
//       --assignment build/assignment.json
//   tilelab_part_tests --part tiled --harness build/bin/tilelab-part-host
//       --library build/reference/libtiled.so --expect pass --assignment build/assignment.json
//
// --expect pass             every public and hidden case must pass, verified
//                           by the trusted verifier code (one test per case);
// --expect not_implemented  the harness must stop with the TODO exit code and
//                           pass no case (the generated starter).
// Without a GPU every test is skipped and says so.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include "json_io.h"
#include "support.h"
#include "tilelab/exit_codes.h"
#include "verify.h"

namespace tilelab::test {
namespace {

using nlohmann::json;

struct Options {
  std::string part;
  std::string harness;
  std::string library;  // for tilelab-part-host: the part built as a shared object
  std::string expect;
  std::string assignment;
};

Options g_options;

// The whole case list runs in one harness process (one CUDA context, not one
// per case); the per-case tests share its verdict.
class SharedRun {
 public:
  static SharedRun& get() {
    static SharedRun run;
    return run;
  }
  const json& verdict() {
    if (!done_) run();
    return verdict_;
  }
  const HarnessRun& harness() {
    if (!done_) run();
    return harness_run_;
  }

 private:
  void run() {
    done_ = true;
    const json doc = read_json_file(g_options.assignment);
    CaseFile file;
    file.part = g_options.part;
    uint64_t seed = 20261121;
    for (const json& part : doc.at("parts")) {
      if (part.at("id") != g_options.part) continue;
      for (const char* set : {"public", "hidden"}) {
        for (const json& c : part.at("cases").at(set)) {
          Distribution dist;
          parse_distribution(c.at("distribution").get<std::string>(), &dist);
          CaseSpec spec = make_case(std::string(set) + "." + c.at("name").get<std::string>(), c.at("j"), c.at("k"),
                                    c.at("l"), seed++, dist);
          spec.tolerance.sqrt_k_factor = part.at("tolerance").at("sqrt_k_factor");
          if (c.contains("props")) {
            const json& p = c["props"];
            if (p.contains("sharedMemPerBlock")) {
              if (p["sharedMemPerBlock"].is_string()) {
                spec.props.shared_mem_per_block_optin = true;
              } else {
                spec.props.shared_mem_per_block = p["sharedMemPerBlock"].get<uint64_t>();
              }
            }
            if (p.contains("maxThreadsPerBlock")) spec.props.max_threads_per_block = p["maxThreadsPerBlock"].get<int>();
            if (p.contains("maxThreadsDim")) spec.props.max_threads_dim = p["maxThreadsDim"].get<std::array<int, 3>>();
          }
          file.cases.push_back(std::move(spec));
        }
      }
    }
    std::vector<std::string> args;
    if (!g_options.library.empty()) args.push_back(g_options.library);
    harness_run_ = run_harness(g_options.harness, std::move(file), dir_.path(), 300, false, nullptr, args);
    verdict_ = verify_run(harness_run_.cases, harness_run_.result.value_or(json()));
  }

  bool done_ = false;
  TempDir dir_;
  HarnessRun harness_run_;
  json verdict_;
};

std::string describe(const json& verdict_case) {
  std::string text;
  for (const json& r : verdict_case.at("reasons")) text += "\n  - " + r.get<std::string>();
  if (verdict_case.contains("comparison")) text += "\n  comparison: " + verdict_case["comparison"].dump();
  return text;
}

class FunctionTest : public testing::Test {
 public:
  explicit FunctionTest(std::function<void()> body) : body_(std::move(body)) {}
  void TestBody() override { body_(); }

 private:
  std::function<void()> body_;
};

void register_test(const std::string& suite, const std::string& name, std::function<void()> body) {
  testing::RegisterTest(suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                        [body]() -> testing::Test* { return new FunctionTest(body); });
}

void register_pass_tests(const json& part) {
  const std::string suite = "Solution_" + g_options.part;
  for (const char* set : {"public", "hidden"}) {
    for (const json& c : part.at("cases").at(set)) {
      const std::string name = std::string(set) + "." + c.at("name").get<std::string>();
      register_test(suite, name, [name]() {
        TILELAB_REQUIRE_GPU();
        const json& verdict = SharedRun::get().verdict();
        const json* found = nullptr;
        for (const json& v : verdict.at("cases")) {
          if (v.at("name") == name) found = &v;
        }
        ASSERT_NE(found, nullptr) << "no verdict for " << name;
        EXPECT_TRUE(found->at("passed").get<bool>()) << name << " failed:" << describe(*found) << "\nharness stderr:\n"
                                                     << SharedRun::get().harness().process.err;
      });
    }
  }
  register_test(suite, "HarnessExitsZero", []() {
    TILELAB_REQUIRE_GPU();
    const HarnessRun& run = SharedRun::get().harness();
    EXPECT_FALSE(run.process.timed_out);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
  });
}

void register_not_implemented_test() {
  register_test("Starter_" + g_options.part, "FailsLoudlyWithTodo", []() {
    TILELAB_REQUIRE_GPU();
    const HarnessRun& run = SharedRun::get().harness();
    const json& verdict = SharedRun::get().verdict();
    EXPECT_EQ(run.process.exit_code, to_int(ExitCode::kNotImplemented)) << run.process.err;
    EXPECT_NE(run.process.err.find("TODO(student)"), std::string::npos) << run.process.err;
    EXPECT_EQ(verdict.at("cases_passed").get<int>(), 0);
  });
}

}  // namespace
}  // namespace tilelab::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  using tilelab::test::g_options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--part")
      g_options.part = value;
    else if (key == "--harness")
      g_options.harness = value;
    else if (key == "--library")
      g_options.library = value;
    else if (key == "--expect")
      g_options.expect = value;
    else if (key == "--assignment")
      g_options.assignment = value;
    else {
      std::fprintf(stderr, "unknown option %s\n", key.c_str());
      return 2;
    }
  }
  if (g_options.part.empty() || g_options.harness.empty() || g_options.assignment.empty() ||
      (g_options.expect != "pass" && g_options.expect != "not_implemented")) {
    std::fprintf(stderr, "usage: %s --part ID --harness PATH [--library PART.so] --expect pass|not_implemented --assignment JSON\n",
                 argv[0]);
    return 2;
  }
  const nlohmann::json doc = tilelab::read_json_file(g_options.assignment);
  bool found = false;
  for (const nlohmann::json& part : doc.at("parts")) {
    if (part.at("id") != g_options.part) continue;
    found = true;
    if (g_options.expect == "pass") {
      tilelab::test::register_pass_tests(part);
    } else {
      tilelab::test::register_not_implemented_test();
    }
  }
  if (!found) {
    std::fprintf(stderr, "no part %s in %s\n", g_options.part.c_str(), g_options.assignment.c_str());
    return 2;
  }
  return RUN_ALL_TESTS();
}
