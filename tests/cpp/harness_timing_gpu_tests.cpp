// GPU tests of a timing case: CUPTI against the events, the time budget, the
// timing rule's tolerance, and the counters read before the warm-up.
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

// CUPTI's kernel time and the CUDA events around the launcher measure the
// same call; for a single-kernel part they must agree closely.
TEST(Timing, TiledCuptiDurationAgreesWithEvents) {
  TILELAB_REQUIRE_GPU();
  TempDir dir;
  // A timing case writes no output file: the verifier checks the samples
  // read back after every timed call instead of a 64 MB matrix.
  const CaseFile f = one_case("tiled", timed_case("w4096", 4096, 5, 77));
  const HarnessRun run = run_harness(reference("tiled"), f, dir.path());
  ASSERT_EQ(run.process.exit_code, 0) << run.process.err;
  const json verdict = verify_run(run.cases, *run.result);
  const json& t = verdict.at("cases").at(0).at("timing");
  EXPECT_TRUE(verdict.at("cases").at(0).at("passed").get<bool>()) << verdict.dump(2);
  const double events = t.at("median_event_ms"), cupti = t.at("median_cupti_span_ms"), wall = t.at("median_wall_ms");
  std::cout << "tiled 4096: median event " << events << " ms, CUPTI " << cupti << " ms, wall " << wall << " ms, "
            << t.at("gflops").get<double>() << " GFLOP/s\n";
  EXPECT_GT(cupti, 0.0);
  EXPECT_LE(std::fabs(cupti - events) / events, 0.10);
  EXPECT_GE(wall, events);
  EXPECT_EQ(t.at("failed_calls"), 0);
}

// One timing case of the naive part at width^3 (inputs seed 5), its counters read where `metrics` are given.
CaseFile naive_timing_case(int width, const TimingSpec& timing, std::optional<std::vector<std::string>> metrics = {}) {
  CaseFile f;
  f.part = "naive";
  CaseSpec c = make_case("w" + std::to_string(width), width, width, width, 5);
  c.timing = timing;
  c.profile_metrics = std::move(metrics);
  f.cases.push_back(c);
  return f;
}

// The naive reference timed by the trusted harness on naive_timing_case(width,
// timing), in `dir`: (its result, the verdict on it), both checked to have run and passed.
std::pair<json, json> time_naive(const std::filesystem::path& dir, int width, const TimingSpec& timing) {
  const HarnessRun run = run_harness(reference("naive"), naive_timing_case(width, timing), dir, 300, true);
  EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
  const json verdict = verify_run(run.cases, run.result.value_or(json()));
  EXPECT_EQ(verdict.at("cases_passed"), 1) << verdict.dump(2);
  return {run.result.value_or(json()), verdict};
}

// A timing case with a time budget (core/timing.h) is timed only while
// more calls could earn speed points. The budgets here are set from the
// naive reference's own calls: ten times them is never reached and changes
// nothing; two thirds of them stops the timing at the median of the first
// three timed calls, and two fifths at the first two (each over twice the
// budget); the values of the calls made are still checked.
TEST(TimeBudget, StopsTimingOnlyOnceTheCallsAreOverIt) {
  TILELAB_REQUIRE_GPU();
  TempDir dir;
  auto timed = [&](double give_up_ms, const std::string& name) {
    TimingSpec t;
    t.seed = 81;
    t.give_up_ms = give_up_ms;
    return time_naive(dir.path() / name, 2048, t);
  };
  const auto [free_result, free_verdict] = timed(0, "no-budget");
  const json& free_timing = free_result.at("cases").at(0).at("timing");
  EXPECT_FALSE(free_timing.at("stopped_slow").get<bool>());
  EXPECT_FALSE(free_timing.contains("give_up_ms"));
  const double call_ms = free_timing.at("median_wall_ms");
  ASSERT_GT(call_ms, 0.0);

  const auto [generous, generous_verdict] = timed(10 * call_ms, "generous");
  const json& g = generous.at("cases").at(0).at("timing");
  EXPECT_FALSE(g.at("stopped_slow").get<bool>()) << g.dump();
  EXPECT_EQ(g.at("calls").size(), 10u);
  EXPECT_FALSE(generous.contains("stopped_slow"));

  for (const auto& [share, calls] : {std::pair{1.5, 3}, std::pair{2.5, 2}}) {
    const double budget = call_ms / share;
    const auto [tight, tight_verdict] = timed(budget, "tight-" + std::to_string(calls));
    const json& t = tight.at("cases").at(0).at("timing");
    std::cout << "naive 2048: " << call_ms << " ms a call; with a budget of " << budget << " ms timing stopped by "
              << t.at("stop").dump() << "\n";
    ASSERT_TRUE(t.at("stopped_slow").get<bool>()) << t.dump();
    EXPECT_EQ(t.at("stop").at("rule"), "median");
    EXPECT_EQ(t.at("calls").size(), static_cast<size_t>(calls)) << t.dump();
    EXPECT_EQ(t.at("stop").at("calls"), 1 + t.at("warmup_calls").get<int>() + calls);
    EXPECT_GT(t.at("stop").at("ms").get<double>(), budget);
    EXPECT_EQ(tight.at("stopped_slow"), "w2048");
    const json& v = tight_verdict.at("cases").at(0);
    EXPECT_TRUE(v.at("timing").at("stopped_slow").get<bool>());
    EXPECT_EQ(v.at("timing").at("calls"), calls);
    EXPECT_EQ(v.at("timing").at("failed_calls"), 0);
  }
}

// Timing stops before `repetitions` once at least `min_repetitions` timed
// calls agree within `stable_within` of their median (core/timing.h), at the
// first call where they do, read from the calls' own wall times: a stray call
// (the clocks still rising) may put that later than the least; with no
// tolerance it makes them all.
TEST(Timing, StopsOnceTheCallsAgreeWithinTheTolerance) {
  TILELAB_REQUIRE_GPU();
  TempDir dir;
  constexpr double kWithin = 0.5;
  constexpr size_t kLeast = 4, kAll = 12;
  auto timed = [&](double stable_within, const std::string& name) {
    TimingSpec t;
    t.seed = 83;
    t.repetitions = static_cast<int>(kAll);
    t.min_repetitions = static_cast<int>(kLeast);
    t.stable_within = stable_within;
    return time_naive(dir.path() / name, 1024, t).first.at("cases").at(0).at("timing");
  };
  auto agree = [](const std::vector<double>& ms) {
    const auto [low, high] = std::minmax_element(ms.begin(), ms.end());
    return *high - *low <= kWithin * median(ms);
  };
  const json loose = timed(kWithin, "loose");
  std::vector<double> wall_ms;
  for (const json& call : loose.at("calls")) wall_ms.push_back(call.at("wall_ms").get<double>());
  std::cout << "naive 1024, calls within " << kWithin << " of their median: " << json(wall_ms).dump() << "\n";
  ASSERT_TRUE(loose.at("stopped_stable").get<bool>()) << loose.dump();
  ASSERT_GE(wall_ms.size(), kLeast);
  ASSERT_LT(wall_ms.size(), kAll);
  EXPECT_TRUE(agree(wall_ms));
  for (size_t n = kLeast; n < wall_ms.size(); ++n) {
    EXPECT_FALSE(agree({wall_ms.begin(), wall_ms.begin() + static_cast<long>(n)})) << "they agreed after " << n;
  }
  const json fixed = timed(0, "fixed");
  EXPECT_FALSE(fixed.at("stopped_stable").get<bool>());
  EXPECT_EQ(fixed.at("calls").size(), kAll);
}

// The counters' setup made before the GPU turn from the image
// `tilelab-harness --counter-availability` gives (core/counter_profile.h)
// reads what the setup made in the turn reads: the same passes, the same
// instructions, DRAM bytes within a few percent; and it leaves less of the
// setup in the turn. (CUPTI does not check an image: the grader gives only
// the harness's own, kept with its checksum, grading/counter_availability.py.)
TEST(Counters, APreparedSetupReadsWhatASetupInTheTurnReads) {
  TILELAB_REQUIRE_GPU();
  const std::string harness = (build_dir() / "bin" / "tilelab-harness").string();
  const ProcessResult asked = run_process({harness, "--counter-availability"}, 60);
  ASSERT_EQ(asked.exit_code, 0) << asked.out << asked.err;
  const json said = json::parse(asked.out);
  ASSERT_EQ(said.at("status"), "measured") << said.dump();
  const std::string image = said.at("image");
  ASSERT_GT(image.size(), 2u);
  const std::vector<std::string> metrics = {"smsp__inst_executed.sum", "dram__bytes_read.sum", "lts__t_bytes.sum"};
  TempDir dir;
  auto profiled = [&](const std::string& hex, const std::string& name) {
    CaseFile f = one_case("naive", timed_case("w2048", 2048, 5, 89));
    f.cases[0].profile_metrics = metrics;
    f.counter_availability.clear();
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      f.counter_availability.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    const HarnessRun run = run_harness(reference("naive"), f, dir.path() / name, 300, true);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result.value_or(json()).at("cases").at(0).at("profile");
  };
  const json in_turn = profiled("", "in-turn");
  const json prepared = profiled(image, "prepared");
  for (const json* p : {&in_turn, &prepared}) {
    ASSERT_EQ(p->at("status"), "measured") << p->dump();
    EXPECT_EQ(p->at("passes"), in_turn.at("passes"));
    EXPECT_EQ(p->at("metrics").at(metrics[0]), in_turn.at("metrics").at(metrics[0]));
    EXPECT_NEAR(p->at("metrics").at(metrics[1]).get<double>() / in_turn.at("metrics").at(metrics[1]).get<double>(), 1.0,
                0.05);
  }
  std::cout << "counters' setup in the turn: " << in_turn.at("setup_seconds") << " s without an image, "
            << prepared.at("setup_seconds") << " s prepared (" << prepared.at("prepared_seconds")
            << " s made before)\n";
  EXPECT_EQ(in_turn.at("prepared_seconds"), 0.0);
  EXPECT_GT(prepared.at("prepared_seconds").get<double>(), 0.0);
  EXPECT_LT(prepared.at("setup_seconds").get<double>(), in_turn.at("setup_seconds").get<double>());
}

// The counters are read as soon as the run has the GPU alone, and their
// passes count as warm-up calls (core/timing.h): with two warm-up calls
// asked for and no warm-up time, a profile of two passes or more leaves
// none to make. A profile whose first call takes longer than a call that
// stops timing is not read: that call ends the timing at once, and the
// counters say why they were not read.
TEST(Counters, AreReadBeforeTheWarmUpAndCountAsIt) {
  TILELAB_REQUIRE_GPU();
  const std::vector<std::string>& metrics = kSeveralPassMetrics;
  TempDir dir;
  auto profiled = [&](double give_up_ms, const std::string& name) {
    TimingSpec t;
    t.seed = 91;
    t.warmup_calls = 2;
    t.warmup_ms = 0;
    t.give_up_ms = give_up_ms;
    const HarnessRun run =
        run_harness(reference("naive"), naive_timing_case(2048, t, metrics), dir.path() / name, 300, true);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result.value_or(json()).at("cases").at(0);
  };
  const json read = profiled(0, "read");
  const json& profile = read.at("profile");
  ASSERT_EQ(profile.at("status"), "measured") << profile.dump();
  const int passes = profile.at("passes");
  ASSERT_GE(passes, 2) << "the premise: these counters take several passes";
  const json& timing = read.at("timing");
  EXPECT_EQ(timing.at("warmup_profile_passes"), passes);
  EXPECT_EQ(timing.at("warmup_calls"), 0) << timing.dump();
  EXPECT_GT(profile.at("metrics").at(metrics[0]).get<double>(), 0.0);
  std::cout << "counters before the warm-up: " << passes << " passes in " << profile.at("seconds")
            << " s; timed calls at 2048: " << timing.at("median_wall_ms") << " ms\n";

  const json slow = profiled(timing.at("median_wall_ms").get<double>() / 10, "slow");  // one call is far over
  const json& stopped = slow.at("timing");
  EXPECT_EQ(stopped.at("warmup_profile_passes"), 1) << stopped.dump();
  EXPECT_EQ(stopped.at("stop").at("rule"), "one_call") << stopped.dump();
  EXPECT_EQ(slow.at("profile").at("status"), "skipped") << slow.at("profile").dump();
  EXPECT_NE(slow.at("profile").at("message").get<std::string>().find("far past"), std::string::npos);
}

// A case whose first call took over twice its budget earns no speed points
// however it is timed, so its profile reads the far-over metrics instead of
// its own (core/timing.h, reads_far_over): fewer counters, fewer
// passes, each of them one more such call with the GPU alone. Its timing
// stops after two timed calls, as it would have with every counter read.
TEST(Counters, AFirstCallFarOverItsBudgetReadsTheFarOverMetrics) {
  TILELAB_REQUIRE_GPU();
  // The grader's lists (grading/traffic.py): the nine traffic counters take fewer passes than all of them.
  const std::vector<std::string> far_over = {"smsp__inst_executed_op_global_ld.sum",
                                             "smsp__inst_executed_op_global_st.sum",
                                             "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
                                             "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                                             "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",
                                             "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
                                             "lts__t_bytes.sum",
                                             "dram__bytes_read.sum",
                                             "dram__bytes_write.sum"};
  std::vector<std::string> all = far_over;
  for (const char* name :
       {"smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_st.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
        "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "smsp__inst_executed_pipe_fma.sum", "smsp__inst_executed.sum", "smsp__warps_active.sum",
        "smsp__warps_issue_stalled_long_scoreboard.sum", "smsp__warps_issue_stalled_barrier.sum",
        "smsp__warps_issue_stalled_mio_throttle.sum", "smsp__warps_issue_stalled_lg_throttle.sum",
        "smsp__warps_issue_stalled_short_scoreboard.sum", "smsp__warps_issue_stalled_math_pipe_throttle.sum"}) {
    all.push_back(name);
  }
  TempDir dir;
  auto profiled = [&](double give_up_ms, const std::string& name) {
    TimingSpec t;
    t.seed = 93;
    t.give_up_ms = give_up_ms;
    CaseFile f = naive_timing_case(2048, t, all);
    f.cases[0].profile_far_over_metrics = far_over;
    const HarnessRun run = run_harness(reference("naive"), f, dir.path() / name, 300, true);
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    return run.result.value_or(json()).at("cases").at(0);
  };
  const json read = profiled(0, "every-counter");
  ASSERT_EQ(read.at("profile").at("status"), "measured") << read.at("profile").dump();
  EXPECT_FALSE(read.at("profile").at("far_over").get<bool>());
  EXPECT_EQ(read.at("profile").at("metrics").size(), all.size());
  const double call_ms = read.at("timing").at("median_wall_ms");

  // A budget of a third of a call: its first call is three budgets or more, no single call is four.
  const json slow = profiled(call_ms / 3, "far-over");
  const json& profile = slow.at("profile");
  ASSERT_EQ(profile.at("status"), "measured") << profile.dump();
  EXPECT_TRUE(profile.at("far_over").get<bool>());
  std::vector<std::string> names;
  for (const auto& [metric, value] : profile.at("metrics").items()) names.push_back(metric);
  std::sort(names.begin(), names.end());
  std::vector<std::string> expected = far_over;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(names, expected);
  EXPECT_LT(profile.at("passes").get<int>(), read.at("profile").at("passes").get<int>());
  EXPECT_NEAR(
      profile.at("metrics").at(all[3]).get<double>() / read.at("profile").at("metrics").at(all[3]).get<double>(), 1.0,
      0.01)
      << "the same sectors, whichever list read them";
  EXPECT_EQ(slow.at("timing").at("stop").at("rule"), "median") << slow.at("timing").dump();
  EXPECT_EQ(slow.at("timing").at("calls").size(), 2u);
  std::cout << "naive 2048: every counter in " << read.at("profile").at("passes") << " passes, the far-over ones in "
            << profile.at("passes") << " (" << profile.at("seconds") << " s)\n";

  // A first call slowed by something else (here 300 ms on the host, once): the timed calls are not far over,
  // so every counter is read after them.
  TimingSpec t;
  t.seed = 95;
  t.give_up_ms = call_ms * 3;
  CaseFile f = naive_timing_case(2048, t, all);
  f.cases[0].profile_far_over_metrics = far_over;
  const HarnessRun late = run_harness(probe("slow_first_call"), f, dir.path() / "late-first-call", 300, true);
  ASSERT_EQ(late.process.exit_code, 0) << late.process.err;
  const json again = late.result.value_or(json()).at("cases").at(0);  // a copy: value_or returns a temporary
  EXPECT_GT(again.at("wall_ms").get<double>(), 2 * t.give_up_ms) << "the premise: its first call is far over";
  EXPECT_FALSE(again.at("timing").at("stopped_slow").get<bool>()) << again.at("timing").dump();
  ASSERT_EQ(again.at("profile").at("status"), "measured") << again.at("profile").dump();
  EXPECT_FALSE(again.at("profile").at("far_over").get<bool>());
  EXPECT_EQ(again.at("profile").at("metrics").size(), all.size());
}

// A call still running at the budget's call limit is not waited for: the
// trusted harness ends the launcher's process (its calls at 512 spend a
// minute on the host), reports the case stopped as slow with no call timed,
// runs no case after it, and the service goes on to the next run.
TEST(TimeBudget, EndsALauncherProcessWhoseCallRunsPastTheLimit) {
  TILELAB_REQUIRE_GPU();
  HarnessService service;
  for (const HarnessService* via : std::initializer_list<const HarnessService*>{nullptr, &service}) {
    SCOPED_TRACE(via != nullptr ? "through the service" : "one-shot");
    TempDir dir;
    CaseFile f;
    f.part = "naive";
    f.cases.push_back(make_case("small", 17, 17, 17, 1));
    for (const char* name : {"timed", "after"}) {
      CaseSpec c = timed_case(name, 512, 2, 3);
      c.timing->give_up_ms = 1.0;  // a call limit of kMinCallLimitMs
      f.cases.push_back(c);
    }
    const auto t0 = std::chrono::steady_clock::now();
    const HarnessRun run = run_harness(probe("slow_call"), f, dir.path(), 50, true, via);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "slow_call: the run ended after " << seconds << " s\n";
    ASSERT_FALSE(run.process.timed_out) << "the harness waited for the call";
    EXPECT_EQ(run.process.exit_code, 0) << run.process.err;
    EXPECT_LT(seconds, 20.0);
    ASSERT_TRUE(run.result.has_value()) << run.process.err;
    const json& r = *run.result;
    EXPECT_EQ(r.at("state"), "finished");
    EXPECT_EQ(r.at("stopped_slow"), "timed");
    ASSERT_EQ(r.at("cases").size(), 2u) << r.dump(2);
    const json& timing = r.at("cases").at(1).at("timing");
    EXPECT_TRUE(timing.at("stopped_slow").get<bool>());
    EXPECT_EQ(timing.at("stop").at("rule"), "call_limit");
    EXPECT_EQ(timing.at("stop").at("calls"), 1);
    EXPECT_GE(timing.at("stop").at("ms").get<double>(), kMinCallLimitMs);
    EXPECT_TRUE(timing.at("calls").empty());
    const json verdict = verify_run(run.cases, r);
    EXPECT_TRUE(verdict.at("cases").at(0).at("passed").get<bool>());
    EXPECT_TRUE(verdict.at("cases").at(1).at("passed").get<bool>()) << verdict.dump(2);  // a stop is no wrong value
    EXPECT_EQ(verdict.at("cases").at(2).at("not_timed_after"), "timed");
  }
  TempDir dir;
  const HarnessRun next = run_harness(reference("naive"), two_cases("naive"), dir.path(), 300, true, &service);
  ASSERT_EQ(next.process.exit_code, 0) << next.process.err;
  EXPECT_EQ(verify_run(next.cases, *next.result).at("cases_passed"), 2);
  EXPECT_EQ(service.stop(), 0);
}

}  // namespace
}  // namespace tilelab::test
