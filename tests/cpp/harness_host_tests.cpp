// Tests of the harness executables that need no GPU: the command line, bad
// case files, the report when no device is present, and what the trusted
// harness and a launcher process say to each other.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "counter_profile.h"
#include "json_io.h"
#include "launcher_protocol.h"
#include "support.h"
#include "tilelab/exit_codes.h"

namespace tilelab::test {
namespace {

using nlohmann::json;

std::filesystem::path naive_harness() {
  return build_dir() / "reference" / "naive";
}

// One small case of naive: enough for a harness to need a GPU.
constexpr const char* kOneSmallCase =
    R"({"version":1,"part":"naive","result":"r.json","cases":[{"name":"a","j":4,"k":4,"l":4,"inputs":{"seed":1}}]})";

// kOneSmallCase, written to a case file in `dir`.
std::filesystem::path one_small_case(const TempDir& dir) {
  const auto path = dir.path() / "cases.json";
  std::ofstream(path) << kOneSmallCase;
  return path;
}

// A harness that ended as one without a GPU must: no_device, and saying so.
void expect_no_device(const ProcessResult& r) {
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kNoDevice)) << r.err;
  EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << r.err;
}

ProcessResult run_with_case_text(const std::string& text, const TempDir& dir) {
  const auto path = dir.path() / "cases.json";
  std::ofstream(path) << text;
  return run_process({naive_harness().string(), path.string()}, 60);
}

// tilelab-part-host runs a part built as a shared object as the part's own
// executable runs it: the same command line after the library.
std::string part_host() {
  return (build_dir() / "bin" / "tilelab-part-host").string();
}
std::string naive_library() {
  return (build_dir() / "reference" / "libnaive.so").string();
}

TEST(HarnessCommandLine, DescribePrintsThePartItRuns) {
  const std::vector<std::vector<std::string>> commands = {{naive_harness().string(), "--describe"},
                                                          {part_host(), naive_library(), "--describe"}};
  for (const std::vector<std::string>& command : commands) {
    const ProcessResult r = run_process(command, 60);
    ASSERT_EQ(r.exit_code, 0) << command[0] << ": " << r.err;
    const json d = json::parse(r.out);
    EXPECT_EQ(d.at("part"), "naive");
    EXPECT_EQ(d.at("launcher"), "launchNaive");
    EXPECT_EQ(d.at("signature"), "square");
  }
}

TEST(HarnessCommandLine, NoArgumentsIsAUsageError) {
  const ProcessResult r = run_process({naive_harness().string()}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage));
  EXPECT_NE(r.err.find("usage:"), std::string::npos);
}

TEST(PartHost, ALibraryItCannotLoadOrThatIsNoPartIsAUsageError) {
  TempDir dir;
  ProcessResult r = run_process({part_host(), (dir.path() / "libnothing.so").string(), "--describe"}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_NE(r.err.find("libnothing.so"), std::string::npos) << r.err;
  // A shared object that loads but was not built as a part.
  const std::string not_a_part = (build_dir() / "bin" / "libtilelab_not_a_part.so").string();
  r = run_process({part_host(), not_a_part, "--describe"}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_NE(r.err.find("not a part built by tilelab"), std::string::npos) << r.err;
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {part_host(), naive_library()}, {part_host(), "--wait", naive_library()}}) {  // no case file
    r = run_process(command, 60);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
    EXPECT_NE(r.err.find("usage:"), std::string::npos) << r.err;
  }
}

// --each takes pairs of a library and a case file, runs no part that would
// record its launches, and refuses a library that is no part.
TEST(PartHost, EachTakesPartsInPairsThatRecordNoLaunches) {
  TempDir dir;
  const auto path = one_small_case(dir);  // records launches: the schema's default
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {part_host(), "--each"},
           {part_host(), "--each", naive_library()},
           {part_host(), "--each", naive_library(), path.string(), naive_library()}}) {
    const ProcessResult r = run_process(command, 60);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
    EXPECT_NE(r.err.find("usage:"), std::string::npos) << r.err;
  }
  ProcessResult r = run_process({part_host(), "--each", naive_library(), path.string()}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_NE(r.err.find("record no launches"), std::string::npos) << r.err;
  const auto quiet = dir.path() / "quiet.json";
  std::ofstream(quiet) << R"({"version":1,"part":"naive","result":"r.json","record_launches":false,)"
                          R"("cases":[{"name":"a","j":4,"k":4,"l":4,"inputs":{"seed":1}}]})";
  r = run_process({part_host(), "--each", (dir.path() / "libnothing.so").string(), quiet.string()}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_NE(r.err.find("libnothing.so"), std::string::npos) << r.err;
  if (gpu_available()) return;
  // Without a GPU the first part's run says so, and the run ends there.
  r = run_process({part_host(), "--each", naive_library(), quiet.string(), naive_library(), quiet.string()}, 60);
  expect_no_device(r);
  EXPECT_EQ(r.err.find("no CUDA device"), r.err.rfind("no CUDA device")) << r.err;
}

// With --wait the host starts before its library exists and loads it once it
// is renamed into place, as a build puts it: without a GPU it then says so.
TEST(PartHostWithoutGpu, WaitsForItsLibraryThenReportsNoDevice) {
  if (gpu_available()) GTEST_SKIP() << "skipped: a GPU is present; this test is about machines without one";
  TempDir dir;
  const auto path = one_small_case(dir);
  const auto library = dir.path() / "libnaive.so";
  std::thread build = put_in_place_after(naive_library(), library, std::chrono::milliseconds(500));
  const auto t0 = std::chrono::steady_clock::now();
  const ProcessResult r = run_process({part_host(), "--wait", library.string(), path.string()}, 60);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  build.join();
  expect_no_device(r);
  EXPECT_GE(waited, 0.5);
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

// The part's executable, and tilelab-part-host with the part's library, both say it.
TEST(HarnessWithoutGpu, ReportsNoDevice) {
  if (gpu_available()) GTEST_SKIP() << "skipped: a GPU is present; this test is about machines without one";
  TempDir dir;
  expect_no_device(run_with_case_text(kOneSmallCase, dir));
  expect_no_device(run_process({part_host(), naive_library(), one_small_case(dir).string()}, 60));
}

TEST(TrustedHarnessWithoutGpu, ReportsNoDeviceFromTheLaunchersProcess) {
  if (gpu_available()) GTEST_SKIP() << "skipped: a GPU is present; this test is about machines without one";
  TempDir dir;
  const auto path = one_small_case(dir);
  const ProcessResult r = run_process(
      {(build_dir() / "bin" / "tilelab-harness").string(), path.string(), "--", naive_harness().string()}, 60);
  expect_no_device(r);
}

TEST(TrustedHarness, ALauncherThatCannotStartIsAUsageError) {
  TempDir dir;
  const auto path = one_small_case(dir);
  const auto trusted = (build_dir() / "bin" / "tilelab-harness").string();
  ProcessResult r = run_process({trusted, path.string(), "--", (dir.path() / "no-such-launcher").string()}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_NE(r.err.find("the launcher did not start"), std::string::npos) << r.err;
  r = run_process({trusted, path.string()}, 60);  // no launcher command at all
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
}

// The service (core/harness_service.h) runs one relay's case file after
// another with one CUDA context, answers each relay with the run's exit
// status and what it printed, and ends when its standard input closes.
// Without a GPU each run ends with no_device, as the one-shot harness does.
TEST(HarnessService, ServesRunAfterRunThroughRelays) {
  TempDir dir;
  const auto path = dir.path() / "cases.json";
  std::ofstream(path) << R"({"version":1,"part":"naive","result":")" << (dir.path() / "r.json").string()
                      << R"(","cases":[{"name":"a","j":4,"k":4,"l":4,"inputs":{"seed":1}}]})";
  const auto tool = (build_dir() / "bin" / "tilelab-harness").string();
  const ExitCode expected = gpu_available() ? ExitCode::kOk : ExitCode::kNoDevice;
  HarnessService service;
  for (int run = 0; run < 2; ++run) {
    const ProcessResult r =
        run_process({tool, "--via", service.socket().string(), path.string(), "--", naive_harness().string()}, 60);
    EXPECT_EQ(r.exit_code, to_int(expected)) << r.err;
    if (expected == ExitCode::kNoDevice) EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << r.err;
  }
  ProcessResult r =
      run_process({tool, "--via", service.socket().string(), path.string(), "--", (dir.path() / "none").string()}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_NE(r.err.find("the launcher did not start"), std::string::npos) << r.err;
  r = run_process({tool, "--via", service.socket().string(), (dir.path() / "missing.json").string(), "--",
                   naive_harness().string()},
                  60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kBadCaseFile)) << r.err;
  // Still serving after those.
  r = run_process({tool, "--via", service.socket().string(), path.string(), "--", naive_harness().string()}, 60);
  EXPECT_EQ(r.exit_code, to_int(expected)) << r.err;
  EXPECT_EQ(service.stop(), 0);
  EXPECT_FALSE(std::filesystem::exists(service.socket()));
}

TEST(HarnessService, ARelayWithNoServiceIsAUsageError) {
  TempDir dir;
  const auto path = one_small_case(dir);
  const ProcessResult r =
      run_process({(build_dir() / "bin" / "tilelab-harness").string(), "--via", (dir.path() / "no-socket").string(),
                   path.string(), "--", naive_harness().string()},
                  60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_NE(r.err.find("cannot reach the harness service"), std::string::npos) << r.err;
}

// A relay stopped from outside (the grader's time limit kills its process
// group) takes the service down with it: the service may not write anything
// of that run after whoever stopped it has read the result.
// A stand-in launcher (python3, as the README requires) that answers the
// relay's "describe" in the protocol's framing, as a part's executable does
// once its CUDA context is made, and then never answers again.
std::vector<std::string> answers_once_then_hangs() {
  return {"python3", "-c",
          "import json, os, struct, sys, time\n"
          "requests, replies = int(sys.argv[3]), int(sys.argv[4])\n"
          "size = struct.unpack('=I', os.read(requests, 4))[0]\n"
          "os.read(requests, size)\n"
          "body = json.dumps({'part': 'naive', 'launcher': 'launchNaive', 'signature': 'square'}).encode()\n"
          "os.write(replies, struct.pack('=I', len(body)) + body)\n"
          "time.sleep(30)\n"};
}

std::filesystem::path one_case_file(const TempDir& dir) {
  const auto path = dir.path() / "cases.json";
  std::ofstream(path) << R"({"version":1,"part":"naive","result":")" << (dir.path() / "r.json").string()
                      << R"(","cases":[{"name":"a","j":4,"k":4,"l":4,"inputs":{"seed":1}}]})";
  return path;
}

// The service has the run once the launcher serves: if the relay is then
// stopped from outside (a time limit), the service ends too, so nothing of
// that run is written after the grader reads the result.
TEST(HarnessService, EndsWhenARunItHasIsStoppedFromOutside) {
  TempDir dir;
  const auto path = one_case_file(dir);
  HarnessService service;
  std::vector<std::string> command = {(build_dir() / "bin" / "tilelab-harness").string(), "--via",
                                      service.socket().string(), path.string(), "--"};
  for (const std::string& a : answers_once_then_hangs()) command.push_back(a);
  const ProcessResult r = run_process(command, 2.0);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(service.stop(), to_int(ExitCode::kEarlyExit));
}

// A launcher that never starts serving (stuck before main, say) holds only
// its relay: the service never had the run, and serves the next one.
TEST(HarnessService, ALauncherThatNeverServesDoesNotHoldTheService) {
  TempDir dir;
  const auto path = one_case_file(dir);
  HarnessService service;
  // sh runs `sleep 30` with the serve arguments as $0...: it never answers.
  const ProcessResult stuck = run_process({(build_dir() / "bin" / "tilelab-harness").string(), "--via",
                                           service.socket().string(), path.string(), "--", "/bin/sh", "-c", "sleep 30"},
                                          1.0);
  EXPECT_TRUE(stuck.timed_out);
  const ProcessResult next = run_process({(build_dir() / "bin" / "tilelab-harness").string(), "--via",
                                          service.socket().string(), path.string(), "--", naive_harness().string()},
                                         60.0);
  EXPECT_EQ(next.exit_code, to_int(gpu_available() ? ExitCode::kOk : ExitCode::kNoDevice)) << next.err;
  EXPECT_EQ(service.stop(), to_int(ExitCode::kOk));
}

std::string tiled_library() {
  return (build_dir() / "reference" / "libtiled.so").string();
}

// A case file of `part`'s, its result beside it, that records launches or not: one case
// whose size every part takes (the tiled part's kernel covers whole tiles only).
std::filesystem::path small_case_of(const TempDir& dir, const std::string& part, const std::string& name,
                                    bool record = true) {
  const auto path = dir.path() / (name + ".json");
  std::ofstream(path) << R"({"version":1,"part":")" << part << R"(","result":")"
                      << (dir.path() / (name + ".result.json")).string() << R"(","record_launches":)"
                      << (record ? "true" : "false")
                      << R"(,"cases":[{"name":"a","j":64,"k":64,"l":64,"inputs":{"seed":1}}]})";
  return path;
}

// Several case files on one launcher process of several parts
// (tilelab-part-host --parts), one-shot and through a service: each file's
// part in turn, each writing its own result, until one does not end well.
// Without a GPU the first says so and the second is never run.
TEST(HarnessService, RunsSeveralCaseFilesOnOneLauncherOfSeveralParts) {
  TempDir dir;
  const auto naive = small_case_of(dir, "naive", "naive");
  const auto tiled = small_case_of(dir, "tiled", "tiled");
  const auto tool = (build_dir() / "bin" / "tilelab-harness").string();
  const bool gpu = gpu_available();
  HarnessService service;
  for (bool via : {false, true}) {
    std::filesystem::remove(dir.path() / "naive.result.json");
    std::filesystem::remove(dir.path() / "tiled.result.json");
    std::vector<std::string> command = {tool};
    if (via) command.insert(command.end(), {"--via", service.socket().string()});
    command.insert(command.end(),
                   {naive.string(), tiled.string(), "--", part_host(), "--parts", naive_library(), tiled_library()});
    const ProcessResult r = run_process(command, 60);
    if (!gpu) {
      expect_no_device(r);
      EXPECT_FALSE(std::filesystem::exists(dir.path() / "tiled.result.json")) << "the second part ran";
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* part : {"naive", "tiled"}) {
      const json result = read_json_file(dir.path() / (std::string(part) + ".result.json"));
      EXPECT_EQ(result.at("part"), part);
      EXPECT_EQ(result.at("exit_code"), 0);
      EXPECT_EQ(result.at("launcher_process"), true);
      EXPECT_EQ(result.at("cases").size(), 1u);
    }
  }
  // More case files than parts served: the third finds none to serve it.
  if (gpu) {
    const ProcessResult r = run_process({tool, naive.string(), tiled.string(), naive.string(), "--", part_host(),
                                         "--parts", naive_library(), tiled_library()},
                                        60);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
    EXPECT_NE(r.err.find("cannot serve the part of"), std::string::npos) << r.err;
  }
  // A case file of another part than the one served is refused as any mismatch is.
  const ProcessResult swapped = run_process(
      {tool, naive.string(), naive.string(), "--", part_host(), "--parts", naive_library(), tiled_library()}, 60);
  EXPECT_NE(swapped.exit_code, 0) << swapped.err;
  // One launcher records launches for every file or for none.
  const auto quiet = small_case_of(dir, "tiled", "quiet", false);
  for (bool via : {false, true}) {
    std::vector<std::string> command = {tool};
    if (via) command.insert(command.end(), {"--via", service.socket().string()});
    command.insert(command.end(),
                   {naive.string(), quiet.string(), "--", part_host(), "--parts", naive_library(), tiled_library()});
    const ProcessResult r = run_process(command, 60);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
    EXPECT_NE(r.err.find("cannot run these case files on one launcher"), std::string::npos) << r.err;
  }
  EXPECT_EQ(service.stop(), 0);
}

// --parts takes one library or more, then the serve arguments; a library it
// cannot load is a usage error that names it.
TEST(PartHost, PartsTakesLibrariesThenServes) {
  TempDir dir;
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{part_host(), "--parts"},
                                             {part_host(), "--parts", naive_library()},
                                             {part_host(), "--parts", "--serve", "3", "4", "5"},
                                             {part_host(), "--parts", naive_library(), "x.json"}}) {
    const ProcessResult r = run_process(command, 60);
    EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
    EXPECT_NE(r.err.find("usage:"), std::string::npos) << r.err;
  }
  const ProcessResult r = run_process(
      {part_host(), "--parts", naive_library(), (dir.path() / "libnothing.so").string(), "--serve", "3", "4", "5"}, 60);
  EXPECT_EQ(r.exit_code, to_int(ExitCode::kUsage)) << r.err;
  EXPECT_NE(r.err.find("libnothing.so"), std::string::npos) << r.err;
}

// Messages: a 4-byte length and JSON. What the launcher's process sends is
// untrusted: too long, not JSON, not an object, or cut short is refused.
TEST(LauncherProtocol, MessagesCrossAPipeAndAnythingElseIsRefused) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ASSERT_TRUE(send_message(fds[1], {{"op", "describe"}, {"n", 3}}));
  EXPECT_EQ(receive_message(fds[0]), json({{"op", "describe"}, {"n", 3}}));

  const uint32_t huge = kMaxMessageBytes + 1;
  ASSERT_EQ(write(fds[1], &huge, 4), 4);
  EXPECT_THROW(receive_message(fds[0]), ProtocolError);
  for (const std::string text : {std::string("not json"), std::string("[1, 2]")}) {
    const uint32_t size = static_cast<uint32_t>(text.size());
    ASSERT_EQ(write(fds[1], &size, 4), 4);
    ASSERT_EQ(write(fds[1], text.data(), size), static_cast<ssize_t>(size));
    EXPECT_THROW(receive_message(fds[0]), ProtocolError) << text;
  }
  const uint32_t promised = 100;
  ASSERT_EQ(write(fds[1], &promised, 4), 4);
  ASSERT_EQ(write(fds[1], "{}", 2), 2);
  close(fds[1]);  // the sender is gone after 2 of 100 bytes
  EXPECT_THROW(receive_message(fds[0]), ProtocolError);
  close(fds[0]);
}

TEST(LauncherProtocol, AnInvocationCrossesTheWireAndAForgedOneDoesNot) {
  Invocation call;
  call.window = 7;
  call.launch_error = cudaErrorInvalidConfiguration;
  call.event_ms = 14.95;
  call.account.calls = {{"cudaLaunchKernel_v7000", 1}};
  call.account.host_cpu_ms = 0.02;
  call.account.written_bytes = 120000000;
  call.account.write_calls = 29297;
  KernelLaunch k;
  k.name = "tiledKernel(float const*, float const*, float*, int)";
  k.grid = {128, 128, 1};
  k.block = {32, 32, 1};
  k.static_shared_bytes = 8192;
  k.start_ns = 1000;
  k.end_ns = 14951000;
  call.record.kernels = {k};
  call.record.memory = {MemoryOperation{"DtoH", 4096, 10, 20, "cudaMemcpy2DAsync_v3020"}};
  call.api_outside = {{"cuMemHostRegister_v2", 1}};

  const json wire = invocation_to_wire(call);
  const Invocation back = invocation_from_wire(wire);
  EXPECT_EQ(back.window, 7u);
  EXPECT_EQ(back.launch_error, cudaErrorInvalidConfiguration);
  EXPECT_EQ(back.account.calls, call.account.calls);
  EXPECT_EQ(back.account.written_bytes, 120000000);
  EXPECT_EQ(back.account.write_calls, 29297);
  EXPECT_EQ(back.api_outside, call.api_outside);
  ASSERT_EQ(back.record.kernels.size(), 1u);
  EXPECT_EQ(back.record.kernels[0].name, k.name);
  EXPECT_EQ(back.record.kernels[0].block, k.block);
  EXPECT_DOUBLE_EQ(back.record.kernels[0].duration_ms(), 14.95);
  EXPECT_EQ(back.record.memory.at(0).api, "cudaMemcpy2DAsync_v3020");

  json ends_first = wire;
  ends_first["kernels"][0]["end_ns"] = 0;
  EXPECT_THROW(invocation_from_wire(ends_first), ProtocolError);
  json wrong_type = wire;
  wrong_type["kernels"][0]["grid"] = "big";
  EXPECT_THROW(invocation_from_wire(wrong_type), ProtocolError);
  json missing = wire;
  missing.erase("api_calls");
  EXPECT_THROW(invocation_from_wire(missing), ProtocolError);
}

// A profile's reply is untrusted too: only the metrics asked for, as finite
// numbers, with counts and seconds in their bounds; anything else is no profile.
TEST(LauncherProtocol, AProfileCrossesTheWireAndAForgedOneIsCutDown) {
  const std::vector<std::string> asked = {"dram__bytes_read.sum", "lts__t_bytes.sum"};
  CounterProfile measured;
  measured.status = kProfileMeasured;
  measured.values = {{"dram__bytes_read.sum", 1.5e10}, {"lts__t_bytes.sum", 4.2e10}};
  measured.passes = 4;
  measured.ranges = 6;
  measured.passes_seconds = 0.08;
  EXPECT_EQ(profile_from_wire(to_json(measured), asked), to_json(measured));

  json forged = to_json(measured);
  forged["metrics"]["dram__bytes_read.sum"] = "15000000000";  // not a number
  forged["metrics"]["smsp__inst_executed.sum"] = 7;           // not asked for
  forged["passes"] = (int64_t(1) << 32) + 1;                  // wraps to 1 if read narrow
  forged["ranges"] = -3;
  forged["passes_seconds"] = -1.0;
  forged["message"] = std::string(1000, 'x');
  const json read = profile_from_wire(forged, asked);
  EXPECT_EQ(read.at("metrics"), json({{"lts__t_bytes.sum", 4.2e10}}));
  EXPECT_EQ(read.at("passes"), kMaxProfilePasses);
  EXPECT_EQ(read.at("ranges"), 1);
  EXPECT_EQ(read.at("passes_seconds"), 0.0);
  EXPECT_EQ(read.at("message").get<std::string>().size(), 300u);
  forged["ranges"] = 1 << 20;
  EXPECT_EQ(profile_from_wire(forged, asked).at("ranges"), static_cast<int>(kMaxProfileRanges));

  for (const json& not_one :
       {json("measured"), json::array(), json({{"status", "great"}, {"metrics", {{"lts__t_bytes.sum", 1}}}})}) {
    const json none = profile_from_wire(not_one, asked);
    EXPECT_EQ(none.at("status"), kProfileFailed) << not_one.dump();
    EXPECT_EQ(none.at("metrics"), json::object()) << not_one.dump();
    EXPECT_EQ(none.at("message"), "the launcher's process gave no profile") << not_one.dump();
  }
}

TEST(LauncherProtocol, IpcHandlesTravelAsHex) {
  unsigned char handle[64], back[64];
  for (int i = 0; i < 64; ++i) handle[i] = static_cast<unsigned char>(i * 37);
  const std::string hex = to_hex(handle, sizeof handle);
  ASSERT_EQ(hex.size(), 128u);
  ASSERT_TRUE(from_hex(hex, back, sizeof back));
  EXPECT_EQ(std::memcmp(handle, back, 64), 0);
  EXPECT_FALSE(from_hex(hex.substr(2), back, sizeof back));
  EXPECT_FALSE(from_hex(std::string(128, 'g'), back, sizeof back));
}

}  // namespace
}  // namespace tilelab::test
