// GPU tests of the trusted harness's processes: the references timed with
// their launchers in a child, tilelab-part-host serving parts in turn, and
// the API recorder's view of a launcher.
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

// A case at 64 that is checked, then one at 4096 that is timed.
CaseFile checked_then_timed(const std::string& part) {
  CaseFile f;
  f.part = part;
  f.cases.push_back(make_case("w64", 64, 64, 64, 3));
  CaseSpec c = timed_case("w4096", 4096, 5, 79);
  f.cases.push_back(c);
  return f;
}

// Whether a call's recorded API calls name `name` (CUPTI's names carry a version suffix).
bool made_call(const json& record, const std::string& name) {
  for (const auto& [called, count] : record.at("api_calls").items()) {
    if (called.rfind(name, 0) == 0 && count.get<int>() > 0) return true;
  }
  return false;
}

// tilelab-harness times the references with their launchers in a child
// process: the outputs are right, the records come back, and the trusted
// clock costs little over the events of the in-process harness on the same
// calls. Figures are printed for docs/measurements.md; the bound is loose
// (2 %, or 0.1 ms: the relay costs a fixed time per call, which the
// challenge's short call feels most): the 1 % is judged from
// gpu-suite's graded GFLOP/s.
TEST(TrustedHarness, TimesTheReferencesWithTheirLaunchersInAChild) {
  TILELAB_REQUIRE_GPU();
  for (const std::string part : {"tiled", "challenge"}) {
    TempDir dir;
    const CaseFile f = checked_then_timed(part);
    HarnessService service;  // as a grading runs it: the trusted harness's context made beforehand
    const HarnessRun run = run_harness(reference(part), f, dir.path() / "trusted", 300, true, &service);
    ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
    const json& result = *run.result;
    EXPECT_EQ(result.at("launcher_process"), true);
    const json verdict = verify_run(run.cases, result);
    EXPECT_EQ(verdict.at("cases_passed"), 2) << verdict.dump(2);
    ASSERT_FALSE(result.at("cases").at(0).at("launches").empty());
    const json& t = verdict.at("cases").at(1).at("timing");
    EXPECT_EQ(t.at("clock"), "trusted");

    const HarnessRun alone = run_harness(reference(part), f, dir.path() / "in-process");
    ASSERT_EQ(alone.process.exit_code, 0) << alone.process.err;
    const json alone_verdict = verify_run(alone.cases, *alone.result);
    const json& a = alone_verdict.at("cases").at(1).at("timing");

    const double wall = t.at("median_wall_ms"), events = t.at("median_event_ms"), cupti = t.at("median_cupti_span_ms");
    const double in_process = a.at("median_event_ms");
    std::cout << "trusted harness, " << part << " 4096: wall " << wall << " ms, child's events " << events
              << " ms, CUPTI " << cupti << " ms; in-process events " << in_process << " ms, wall "
              << a.at("median_wall_ms").get<double>() << " ms (trusted wall / in-process events " << wall / in_process
              << ")\n";
    EXPECT_GE(wall, cupti);
    EXPECT_LE(wall - in_process, std::max(0.02 * in_process, 0.1));
  }
}

// A part built as a shared object and loaded by tilelab-part-host serves the
// trusted harness as the part's executable does: the same verdicts, its
// launches recorded, its timed calls as fast (within 2 %, or 0.1 ms).
TEST(TrustedHarness, TimesAPartLoadedByThePartHostAsItsExecutable) {
  TILELAB_REQUIRE_GPU();
  const std::string host = (build_dir() / "bin" / "tilelab-part-host").string();
  for (const std::string part : {"tiled", "challenge"}) {
    TempDir dir;
    const CaseFile f = checked_then_timed(part);
    HarnessService service;
    const std::string library = (build_dir() / "reference" / ("lib" + part + ".so")).string();
    const HarnessRun loaded = run_harness(host, f, dir.path() / "loaded", 300, true, &service, {library});
    ASSERT_EQ(loaded.process.exit_code, 0) << loaded.process.err;
    const json verdict = verify_run(loaded.cases, *loaded.result);
    EXPECT_EQ(verdict.at("cases_passed"), 2) << verdict.dump(2);
    ASSERT_FALSE(loaded.result->at("cases").at(0).at("launches").empty());
    EXPECT_EQ(loaded.result->at("part"), part);
    // The part shares the harness's CUDA runtime: none of its set-up (functions looked up by name, which
    // the launch checks refuse) falls in the launcher's first call.
    EXPECT_FALSE(made_call(loaded.result->at("cases").at(0), "cuGetProcAddress"));
    EXPECT_TRUE(made_call(loaded.result->at("cases").at(0), "cudaLaunchKernel"));
    const HarnessRun linked = run_harness(reference(part), f, dir.path() / "linked", 300, true, &service);
    ASSERT_EQ(linked.process.exit_code, 0) << linked.process.err;
    const json linked_verdict = verify_run(linked.cases, *linked.result);
    EXPECT_EQ(linked_verdict.at("cases_passed"), 2) << linked_verdict.dump(2);
    const double wall = verdict.at("cases").at(1).at("timing").at("median_wall_ms");
    const double linked_wall = linked_verdict.at("cases").at(1).at("timing").at("median_wall_ms");
    std::cout << part << " 4096 through the trusted harness: loaded " << wall << " ms, linked " << linked_wall
              << " ms a call\n";
    EXPECT_LE(std::fabs(wall - linked_wall), std::max(0.02 * linked_wall, 0.1));
  }
}

// tilelab-part-host --parts serves several parts to one trusted-harness run
// of their case files in turn: each part's verdicts, counters and timed
// calls as in a process of its own. The counters of all are read in one
// profile after the last part's timed calls, a user range each in every
// pass (core/profiles_together.h): each part's as its own profile reads
// them, in as many passes. Its timed calls must be as fast as alone (within
// 2 %, or 0.1 ms). Figures printed for docs/measurements.md.
TEST(TrustedHarness, TimesSeveralPartsOnOneLauncherAndReadsTheirCountersInOneProfile) {
  TILELAB_REQUIRE_GPU();
  const std::string host = (build_dir() / "bin" / "tilelab-part-host").string();
  const std::string tool = (build_dir() / "bin" / "tilelab-harness").string();
  const std::vector<std::string>& metrics = kSeveralPassMetrics;
  const std::vector<std::string> parts = {"tiled", "naive", "challenge"};
  TempDir dir;
  auto timed_file = [&](const std::string& part, const std::string& run) {
    CaseFile f = one_case(part, timed_case("w2048", 2048, 5, 97));
    f.cases[0].profile_metrics = metrics;
    return write_case_file(f, dir.path() / run / part);
  };
  auto library = [&](const std::string& part) { return (build_dir() / "reference" / ("lib" + part + ".so")).string(); };
  HarnessService service;
  std::vector<std::string> command = {tool, "--via", service.socket().string()};
  std::vector<CaseFile> together;
  for (const std::string& part : parts) {
    together.push_back(timed_file(part, "together"));
    command.push_back(together.back().path.string());
  }
  command.insert(command.end(), {"--", host, "--parts"});
  for (const std::string& part : parts) command.push_back(library(part));
  const ProcessResult r = run_process(command, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (size_t i = 0; i < parts.size(); ++i) {
    const json result = read_json_file(together[i].result);
    EXPECT_EQ(result.at("part"), parts[i]);
    EXPECT_EQ(verify_run(together[i], result).at("cases_passed"), 1) << parts[i];
    const json& t = result.at("cases").at(0);
    ASSERT_EQ(t.at("profile").at("status"), "measured") << parts[i] << ": " << t.at("profile").dump();
    EXPECT_EQ(t.at("profile").at("ranges"), parts.size());
    EXPECT_EQ(t.at("timing").at("warmup_profile_passes"), 0);  // read after the timed calls, not before

    // The same part in a launcher process of its own.
    const CaseFile alone_file = timed_file(parts[i], "alone");
    const ProcessResult a = run_process(
        {tool, "--via", service.socket().string(), alone_file.path.string(), "--", host, library(parts[i])}, 300);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    const json alone = read_json_file(alone_file.result).at("cases").at(0);
    ASSERT_EQ(alone.at("profile").at("status"), "measured") << alone.at("profile").dump();
    EXPECT_EQ(alone.at("profile").at("ranges"), 1);
    EXPECT_EQ(t.at("profile").at("passes"), alone.at("profile").at("passes"));
    EXPECT_EQ(t.at("profile").at("metrics").at(metrics[0]), alone.at("profile").at("metrics").at(metrics[0]));
    EXPECT_NEAR(t.at("profile").at("metrics").at(metrics[1]).get<double>() /
                    alone.at("profile").at("metrics").at(metrics[1]).get<double>(),
                1.0, 0.05);
    const double wall = t.at("timing").at("median_wall_ms"), alone_wall = alone.at("timing").at("median_wall_ms");
    std::cout << parts[i] << " 2048, " << (i == 0 ? "first" : "after another")
              << " on one launcher: its share of the counters' passes " << t.at("profile").at("passes_seconds")
              << " s (alone " << alone.at("profile").at("passes_seconds") << " s), timed calls " << wall
              << " ms (alone " << alone_wall << " ms)\n";
    EXPECT_LE(std::fabs(wall - alone_wall), std::max(0.02 * alone_wall, 0.1)) << parts[i];
  }
}

// tilelab-part-host --wait makes its context before its library exists: the
// trusted harness's run starts while the part is still being built and goes
// on once the library is in place, with the same verdicts, and nothing of
// the part ran CUDA before its launcher was called. Figures printed for
// docs/measurements.md: how long the run took after the library appeared,
// against a run of the host that starts once it is there.
TEST(PartHost, WaitsForItsLibraryWithItsContextMade) {
  TILELAB_REQUIRE_GPU();
  const std::string host = (build_dir() / "bin" / "tilelab-part-host").string();
  const auto built = build_dir() / "reference" / "libnaive.so";
  TempDir dir;
  CaseFile f;
  f.part = "naive";
  f.cases.push_back(make_case("w64", 64, 64, 64, 3));
  f.cases.push_back(make_case("w100", 100, 100, 100, 4));
  HarnessService service;
  const auto library = dir.path() / "libnaive.so";
  const auto delay = std::chrono::milliseconds(1500);
  std::thread build = put_in_place_after(built, library, delay);
  const auto t0 = std::chrono::steady_clock::now();
  const HarnessRun waited =
      run_harness(host, f, dir.path() / "waited", 300, true, &service, {"--wait", library.string()});
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0 - delay).count();
  build.join();
  ASSERT_EQ(waited.process.exit_code, 0) << waited.process.err;
  EXPECT_EQ(waited.result->at("launcher_process"), true);
  EXPECT_EQ(waited.result->at("cuda_in_use_at_start"), false);
  EXPECT_EQ(verify_run(waited.cases, *waited.result).at("cases_passed"), 2);
  EXPECT_FALSE(waited.result->at("cases").at(0).at("launches").empty());
  EXPECT_FALSE(made_call(waited.result->at("cases").at(0), "cuGetProcAddress"));

  const auto t1 = std::chrono::steady_clock::now();
  const HarnessRun plain = run_harness(host, f, dir.path() / "plain", 300, true, &service, {built.string()});
  const double whole = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  ASSERT_EQ(plain.process.exit_code, 0) << plain.process.err;
  std::cout << "naive's cases through the trusted harness: " << after << " s after its library appeared (--wait), "
            << whole << " s from the start of a run whose library was there\n";
}

// A part whose global constructor calls CUDA is told apart both ways: run as
// its executable (a context before main()) and loaded by a host that made
// the context itself (CUDA calls while the library was loaded).
TEST(PartHost, TellsCudaUsedWhileThePartWasLoaded) {
  TILELAB_REQUIRE_GPU();
  const std::string host = (build_dir() / "bin" / "tilelab-part-host").string();
  const auto probe = build_dir() / "probe_cuda_before_main";
  TempDir dir;
  CaseFile f;
  f.part = "naive";
  f.cases.push_back(make_case("w64", 64, 64, 64, 3));
  HarnessService service;
  const HarnessRun loaded =
      run_harness(host, f, dir.path() / "loaded", 300, true, &service, {"--wait", (probe / "libnaive.so").string()});
  ASSERT_EQ(loaded.process.exit_code, 0) << loaded.process.err;
  EXPECT_EQ(loaded.result->at("cuda_in_use_at_start"), true);
  const HarnessRun linked = run_harness(probe / "naive", f, dir.path() / "linked", 300, true, &service);
  ASSERT_EQ(linked.process.exit_code, 0) << linked.process.err;
  EXPECT_EQ(linked.result->at("cuda_in_use_at_start"), true);
}

// tilelab-part-host --each runs several parts' case files in one process, one
// after another, with the verdicts each part's own executable gets. Under
// compute-sanitizer that is one run for a hand-in's parts, and memcheck still
// finds a bad access in a part loaded after another. A part whose run ends
// badly ends the run there: the parts after it are not run.
TEST(PartHost, RunsEachPartInTurnInOneProcess) {
  TILELAB_REQUIRE_GPU();
  const std::string host = (build_dir() / "bin" / "tilelab-part-host").string();
  TempDir dir;
  // The command that runs `parts` (a library and the part it serves) in turn, and their case files.
  auto each = [&](const std::vector<std::pair<std::filesystem::path, std::string>>& parts, const std::string& run) {
    std::vector<std::string> command{host, "--each"};
    std::vector<CaseFile> files;
    for (const auto& [library, part] : parts) {
      CaseFile f;  // sizes every part takes: the tiled part's kernel covers whole tiles only
      f.part = part;
      f.record_launches = false;
      f.cases.push_back(make_case("first", 64, 64, 64, 1));
      f.cases.push_back(make_case("second", 128, 128, 128, 2));
      files.push_back(write_case_file(f, dir.path() / run / std::to_string(files.size())));
      command.push_back(library.string());
      command.push_back(files.back().path.string());
    }
    return std::make_pair(command, files);
  };
  const auto naive = build_dir() / "reference" / "libnaive.so";
  const auto tiled = build_dir() / "reference" / "libtiled.so";

  const auto [command, files] = each({{naive, "naive"}, {tiled, "tiled"}}, "good");
  const ProcessResult r = run_process(command, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const CaseFile& f : files) {
    const json result = read_json_file(f.result);
    EXPECT_EQ(result.at("part"), f.part);
    EXPECT_EQ(result.at("state"), "finished");
    EXPECT_EQ(verify_run(f, result).at("cases_passed"), 2) << f.part;
  }

  const auto [faulting, faulted] =
      each({{build_dir() / "probe_kernel_fault" / "libnaive.so", "naive"}, {tiled, "tiled"}}, "fault");
  const ProcessResult stopped = run_process(faulting, 300);
  EXPECT_EQ(stopped.exit_code, to_int(ExitCode::kKernelFault)) << stopped.err;
  EXPECT_FALSE(std::filesystem::exists(faulted.at(1).result));  // not begun after the fault

  const std::filesystem::path sanitizer = "/usr/local/cuda/bin/compute-sanitizer";
  if (!std::filesystem::exists(sanitizer)) GTEST_SKIP() << "skipped: no compute-sanitizer here";
  const std::vector<std::string> memcheck{sanitizer.string(),   "--tool",          "memcheck", "--error-exitcode", "86",
                                          "--target-processes", "application-only"};
  std::vector<std::string> clean = memcheck;
  clean.insert(clean.end(), command.begin(), command.end());
  const ProcessResult checked = run_process(clean, 300);
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  auto [bad, bad_files] =
      each({{naive, "naive"}, {build_dir() / "probe_kernel_fault" / "libnaive.so", "naive"}}, "fault-checked");
  bad.insert(bad.begin(), memcheck.begin(), memcheck.end());
  const ProcessResult found = run_process(bad, 300);
  EXPECT_EQ(found.exit_code, 86) << found.out << found.err;
  EXPECT_NE((found.out + found.err).find("Invalid __global__ write"), std::string::npos) << found.out << found.err;
}

// The API recorder names the launcher's own calls, not the harness's, and a
// launcher that only launches spends well under the grader's floor of host
// CPU time outside CUDA calls (HOST_CPU_FLOOR_MS in launch_checks.py, 2 ms),
// on its correctness call and on every timed call.
TEST(ApiRecorder, NamesTheLaunchersCallsAndFindsLittleHostTime) {
  TILELAB_REQUIRE_GPU();
  TempDir dir;
  const CaseFile f = one_case("dynamic_smem", timed_case("w1024", 1024, 5, 78));
  const HarnessRun run = run_harness(reference("dynamic_smem"), f, dir.path());
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  const json& result = *run.result;
  EXPECT_EQ(result.at("cuda_in_use_at_start"), false);
  const json& raw = result.at("cases").at(0);
  ASSERT_EQ(raw.at("launches_recorded"), true);
  bool launched = false;
  for (const auto& [name, count] : raw.at("api_calls").items()) {
    std::cout << "dynamic_smem call: " << name << " x" << count << "\n";
    launched = launched || name.rfind("cudaLaunchKernel", 0) == 0;
    EXPECT_EQ(name.rfind("cudaEventRecord", 0), std::string::npos) << "the harness's own event was counted";
  }
  EXPECT_TRUE(launched) << raw.at("api_calls").dump();
  EXPECT_TRUE(raw.at("api_calls_outside_call").empty()) << raw.at("api_calls_outside_call").dump();
  EXPECT_LT(raw.at("host_cpu_ms").get<double>(), 2.0);
  // A quiet launcher writes nothing during its call (the count is the whole process's).
  EXPECT_EQ(raw.at("printed_bytes"), 0) << raw.dump();
  double most = 0;
  for (const json& call : raw.at("timing").at("calls")) most = std::max(most, call.at("host_cpu_ms").get<double>());
  std::cout << "dynamic_smem 1024: host CPU " << raw.at("host_cpu_ms") << " ms on the correctness call, at most "
            << most << " ms on a timed call\n";
  EXPECT_LT(most, 2.0);
}

}  // namespace
}  // namespace tilelab::test
