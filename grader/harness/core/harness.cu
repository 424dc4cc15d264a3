#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "case_file.h"
#include "counter_profile.h"
#include "device_ops.h"
#include "gpu_turn.h"
#include "guard.h"
#include "harness.h"
#include "json_io.h"
#include "launcher.h"
#include "launcher_server.h"
#include "process_guard.h"
#include "profiles_together.h"
#include "reference.h"
#include "tilelab/part.h"
#include "timing.h"

namespace tilelab {

using nlohmann::json;

const char* signature_name(Signature s) {
  switch (s) {
    case Signature::kSquare: return "square";
    case Signature::kRectangular: return "rectangular";
    case Signature::kRectangularProps: return "rectangular_props";
  }
  return "square";
}

[[noreturn]] void fail(ExitCode code, const std::string& message) {
  std::fprintf(stderr, "tilelab: %s [exit %d: %s]\n", message.c_str(), to_int(code), exit_code_info(code).name);
  throw HarnessExit{code};
}

namespace {

// The device facts a grader needs: name, compute capability, limits, caches.
json device_json(const cudaDeviceProp& p) {
  return {{"name", p.name},
          {"compute_capability", std::to_string(p.major) + "." + std::to_string(p.minor)},
          {"multiprocessors", p.multiProcessorCount},
          {"sharedMemPerBlock", p.sharedMemPerBlock},
          {"sharedMemPerBlockOptin", p.sharedMemPerBlockOptin},
          {"sharedMemPerMultiprocessor", p.sharedMemPerMultiprocessor},
          {"maxThreadsPerBlock", p.maxThreadsPerBlock},
          {"maxThreadsPerMultiProcessor", p.maxThreadsPerMultiProcessor},
          {"regsPerBlock", p.regsPerBlock},
          {"regsPerMultiprocessor", p.regsPerMultiprocessor},
          {"maxBlocksPerMultiProcessor", p.maxBlocksPerMultiProcessor},
          {"reservedSharedMemPerBlock", p.reservedSharedMemPerBlock},
          {"warpSize", p.warpSize},
          {"l2CacheSize", p.l2CacheSize},
          {"memoryBusWidth", p.memoryBusWidth},
          {"totalGlobalMem", p.totalGlobalMem},
          {"pageableMemoryAccess", p.pageableMemoryAccess},
          {"hostNativeAtomicSupported", p.hostNativeAtomicSupported}};
}

// The result document, rewritten after every case: if the process dies in
// case i, the file still holds cases 0..i-1 and names case i as current.
class ResultWriter {
 public:
  ResultWriter(std::filesystem::path path, json doc) : path_(std::move(path)), doc_(std::move(doc)) {}

  json& doc() { return doc_; }
  void write() {
    try {
      write_json_file(path_, doc_);
    } catch (const IoError& e) {
      fail(ExitCode::kIoError, std::string("cannot write the result file: ") + e.what());
    }
  }

 private:
  std::filesystem::path path_;
  json doc_;
};

// Checks, before any case runs, that every case fits this part's launcher.
void validate_cases(const CaseFile& file, const PartInfo& part) {
  if (file.part != part.part_id) {
    fail(ExitCode::kBadCaseFile,
         "the case file is for part \"" + file.part + "\" but this harness runs part \"" + part.part_id + "\"");
  }
  for (const CaseSpec& c : file.cases) {
    const std::string where = "case \"" + c.name + "\": ";
    if (part.signature == Signature::kSquare && !(c.j == c.k && c.k == c.l)) {
      fail(ExitCode::kBadCaseFile, where + part.launcher + " takes one Width, so j, k and l must be equal");
    }
    if (c.props.any() && part.signature != Signature::kRectangularProps) {
      fail(ExitCode::kBadCaseFile, where + "gives device properties, but " + part.launcher + " takes none");
    }
  }
}

// Checks that property overrides stay within what the device really has.
void validate_props(const CaseFile& file, const cudaDeviceProp& real) {
  for (const CaseSpec& c : file.cases) {
    const std::string where = "case \"" + c.name + "\": ";
    if (c.props.shared_mem_per_block && *c.props.shared_mem_per_block > real.sharedMemPerBlockOptin) {
      fail(ExitCode::kBadCaseFile, where + "sharedMemPerBlock exceeds what this device can give a block (" +
                                       std::to_string(real.sharedMemPerBlockOptin) + " bytes)");
    }
    if (c.props.max_threads_per_block && *c.props.max_threads_per_block > real.maxThreadsPerBlock) {
      fail(ExitCode::kBadCaseFile,
           where + "maxThreadsPerBlock exceeds the device's " + std::to_string(real.maxThreadsPerBlock));
    }
    for (int i = 0; c.props.max_threads_dim && i < 3; ++i) {
      if ((*c.props.max_threads_dim)[i] > real.maxThreadsDim[i]) {
        fail(ExitCode::kBadCaseFile, where + "maxThreadsDim[" + std::to_string(i) + "] exceeds the device's " +
                                         std::to_string(real.maxThreadsDim[i]));
      }
    }
  }
}

cudaDeviceProp given_props(const CaseSpec& c, const cudaDeviceProp& real) {
  cudaDeviceProp p = real;
  if (c.props.shared_mem_per_block_optin) p.sharedMemPerBlock = real.sharedMemPerBlockOptin;
  if (c.props.shared_mem_per_block) p.sharedMemPerBlock = *c.props.shared_mem_per_block;
  if (c.props.max_threads_per_block) p.maxThreadsPerBlock = *c.props.max_threads_per_block;
  for (int i = 0; c.props.max_threads_dim && i < 3; ++i) p.maxThreadsDim[i] = (*c.props.max_threads_dim)[i];
  return p;
}

struct CaseOutcome {
  json result;
  ExitCode code = ExitCode::kOk;
  bool fatal = false;          // the process cannot go on to the next case
  bool stopped_slow = false;   // its timing stopped as too slow to earn speed points (timing.h)
  bool profile_later = false;  // its counters are read with the run's other parts' (profiles_together.h)
};

CaseOutcome finish(CaseOutcome out, ExitCode code, const std::string& message, bool fatal) {
  out.code = code;
  out.fatal = fatal;
  out.result["status"] = exit_code_info(code).name;
  out.result["exit_code"] = to_int(code);
  out.result["message"] = message;
  return out;
}

// The counters of a case not read before its warm-up (timing.h): a case
// without timing, or one whose first profiled call was too slow, perhaps
// only while the clocks came up. A part stopped by the median of whole
// calls is profiled as any other, since its counters are the hint a slow
// kernel needs most (an uncoalesced one, say). One whose call was ended
// unfinished, or took far over the budget, is not. `timing`: the case's
// timing result, or for a case without timing its first call's wall time
// as "median_wall_ms". Returns why they are not read, or nothing where they are.
std::optional<json> profile_skipped(const json& timing, bool stopped_slow) {
  CounterProfile skipped;
  skipped.status = kProfileSkipped;
  const json stop = timing.value("stop", json::object());
  if (stopped_slow && stop.value("rule", std::string()) != "median") {
    skipped.message = "a call ran far past the time at which speed earns no points: not read";
    return to_json(skipped);
  }
  const double call_ms = timing.value("median_wall_ms", 0.0);
  if (call_ms > kProfileMaxCallMs) {
    skipped.message = "one call takes " + std::to_string(static_cast<int>(call_ms)) +
                      " ms, and the counters need several more calls: not read";
    return to_json(skipped);
  }
  return std::nullopt;
}

// Those counters read now, on `args`; `far_over`: only the far-over metrics.
json profile_after_timing(const CaseSpec& spec, Launcher& launcher, const LaunchArgs& args, bool far_over) {
  const auto t0 = std::chrono::steady_clock::now();
  json profile = launcher.profile(args, profile_metrics_for(spec, far_over));
  profile["far_over"] = far_over;
  profile["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return profile;
}

// `together`: the run reads its parts' counters together after their timing
// (profiles_together.h); the case's, where read, are then left to it (profile_later).
CaseOutcome run_case(const CaseFile& file, const CaseSpec& spec, Launcher& launcher, const cudaDeviceProp& real,
                     GpuTurn& turn, bool together) {
  const PartInfo& part = launcher.part();
  CaseOutcome out;
  out.result = {{"name", spec.name}, {"j", spec.j}, {"k", spec.k}, {"l", spec.l}};
  const uint64_t m_count = uint64_t(spec.j) * spec.k;
  const uint64_t n_count = uint64_t(spec.k) * spec.l;
  const uint64_t p_count = uint64_t(spec.j) * spec.l;
  const uint64_t guard = static_cast<uint64_t>(file.guard_elements);

  DeviceBuffer<float> M(m_count), N(n_count), m_before(m_count), n_before(n_count);
  const SharedWith share_m(launcher, M.get(), M.bytes()), share_n(launcher, N.get(), N.bytes());
  if (spec.inputs.from_files) {
    try {
      const std::vector<float> m = read_matrix_file(spec.inputs.m_path, m_count);
      const std::vector<float> n = read_matrix_file(spec.inputs.n_path, n_count);
      TILELAB_CUDA_CHECK(cudaMemcpy(M.get(), m.data(), M.bytes(), cudaMemcpyHostToDevice));
      TILELAB_CUDA_CHECK(cudaMemcpy(N.get(), n.data(), N.bytes(), cudaMemcpyHostToDevice));
    } catch (const IoError& e) {
      return finish(std::move(out), ExitCode::kIoError, e.what(), true);
    }
  } else {
    fill_generated(M.get(), m_count, spec.inputs.seed, MatrixId::kM, spec.inputs.distribution);
    fill_generated(N.get(), n_count, spec.inputs.seed, MatrixId::kN, spec.inputs.distribution);
  }
  // Copies to detect a part that writes to its inputs.
  TILELAB_CUDA_CHECK(cudaMemcpy(m_before.get(), M.get(), M.bytes(), cudaMemcpyDeviceToDevice));
  TILELAB_CUDA_CHECK(cudaMemcpy(n_before.get(), N.get(), N.bytes(), cudaMemcpyDeviceToDevice));

  // P sits between two guard regions; it starts as poison so that an element
  // the part never writes is told apart from any value it could compute.
  DeviceBuffer<uint32_t> region(p_count + 2 * guard);
  const SharedWith share_p(launcher, region.get(), region.bytes());
  uint32_t* p_words = region.get() + guard;
  fill_bits(region.get(), region.size(), file.guard_bits);
  fill_bits(p_words, p_count, file.poison_bits);

  const cudaDeviceProp given = given_props(spec, real);
  if (part.signature == Signature::kRectangularProps) {
    // Every limit the launch checks hold the part's launches to.
    out.result["props_given"] = {
        {"sharedMemPerBlock", given.sharedMemPerBlock},
        {"maxThreadsPerBlock", given.maxThreadsPerBlock},
        {"maxThreadsDim", {given.maxThreadsDim[0], given.maxThreadsDim[1], given.maxThreadsDim[2]}}};
  }
  TILELAB_CUDA_CHECK(cudaDeviceSynchronize());

  const LaunchArgs args{M.get(), N.get(), reinterpret_cast<float*>(p_words), spec.j, spec.k, spec.l, &given};
  // A timing case's first call is held to the budget's call limit: at the
  // timing sizes a product computed on the host takes minutes.
  const Invocation inv = launcher.invoke(args, true, spec.timing ? spec.timing->call_limit_ms() : 0.0);
  out.result["event_ms"] = inv.event_ms;
  out.result["wall_ms"] = inv.wall_ms;
  if (inv.abandoned) {
    out.result["timing"] = timing_stopped_at_first_call(spec, launcher, inv.wall_ms).result;
    out = finish(std::move(out), ExitCode::kOk, "", true);
    out.stopped_slow = true;
    return out;
  }

  std::string message;
  const ExitCode call_code = invocation_status(inv, &message);
  const WindowRecord& record = inv.record;
  json launches = json::array(), memory = json::array(), outside = json::array();
  for (const KernelLaunch& k : record.kernels) launches.push_back(to_json(k));
  for (const MemoryOperation& m : record.memory) memory.push_back(to_json(m));
  for (const KernelLaunch& k : inv.outside) outside.push_back(to_json(k));
  out.result["launches"] = launches;
  out.result["memory_operations"] = memory;
  out.result["launches_outside_call"] = outside;
  out.result["launches_recorded"] = launcher.records_launches();
  out.result["api_calls"] = inv.account.calls;
  out.result["api_calls_outside_call"] = inv.api_outside;
  out.result["host_cpu_ms"] = inv.account.host_cpu_ms;
  out.result["cuda_cpu_ms"] = inv.account.cuda_cpu_ms;
  out.result["printed_bytes"] = inv.account.written_bytes;
  out.result["print_calls"] = inv.account.write_calls;
  // A fault, or the launcher's process gone: nothing more can run.
  if (call_code == ExitCode::kKernelFault || inv.ended != ExitCode::kOk) {
    return finish(std::move(out), call_code, message, true);
  }

  // P comes back to the host only to be written out: a case without an
  // output file (a timing case's first call) needs only its guards here.
  std::vector<uint32_t> host_region;
  if (spec.output.empty()) {
    out.result["guard"] = to_json(check_guards_on_device(region.get(), guard, p_count, file.guard_bits));
  } else {
    host_region.resize(region.size());
    TILELAB_CUDA_CHECK(cudaMemcpy(host_region.data(), region.get(), region.bytes(), cudaMemcpyDeviceToHost));
    out.result["guard"] = to_json(check_guards(host_region.data(), guard, p_count, file.guard_bits));
  }
  out.result["inputs_modified"] = {{"M", count_different(reinterpret_cast<const uint32_t*>(M.get()),
                                                         reinterpret_cast<const uint32_t*>(m_before.get()), m_count)},
                                   {"N", count_different(reinterpret_cast<const uint32_t*>(N.get()),
                                                         reinterpret_cast<const uint32_t*>(n_before.get()), n_count)}};
  if (!spec.output.empty()) {
    try {
      write_matrix_file(spec.output, reinterpret_cast<const float*>(host_region.data() + guard), p_count);
      out.result["output"] = spec.output.string();
    } catch (const IoError& e) {
      return finish(std::move(out), ExitCode::kIoError, e.what(), true);
    }
  }
  if (call_code != ExitCode::kOk) return finish(std::move(out), call_code, message, false);
  if (launcher.records_launches() && record.kernels.empty()) {
    return finish(std::move(out), ExitCode::kNoKernel,
                  std::string(part.launcher) + " returned without launching a kernel", false);
  }
  bool far_over = reads_far_over(spec, inv.wall_ms);
  if (spec.timing) {
    // The far-over metrics are another list than the other parts': read on their own, before the warm-up.
    TimingOutcome timing = run_timing(file, spec, launcher, given, turn, far_over, !together || far_over);
    out.result["timing"] = std::move(timing.result);
    if (timing.profile) out.result["profile"] = std::move(*timing.profile);
    if (timing.code != ExitCode::kOk) return finish(std::move(out), timing.code, timing.message, true);
    out.stopped_slow = timing.stopped_slow;
  }
  // Fewer counters are read on the word of a first call that other runs may have slowed only where the timed
  // calls stopped as too slow: otherwise every metric is read after them (timing.h), whether or not the
  // far-over ones were read before the warm-up.
  if (far_over && !out.stopped_slow) {
    out.result.erase("profile");
    far_over = false;
  }
  if (spec.profile_metrics && !out.result.contains("profile")) {  // not read before the warm-up (timing.h)
    json timing = out.result.value("timing", json::object());
    if (!spec.timing) {
      // Counters read on their own (a grading that left them for later) need the GPU alone too: their
      // setup is made before the gate, as a timing run's is, and the passes after it.
      if (!turn.taken() && !file.counter_availability.empty()) {
        launcher.prepare_profile(*spec.profile_metrics, file.counter_availability);
      }
      turn.take();
      timing = {{"median_wall_ms", inv.wall_ms}};
    }
    if (std::optional<json> skipped = profile_skipped(timing, out.stopped_slow)) {
      out.result["profile"] = std::move(*skipped);
    } else if (together && !far_over) {
      out.result["profile"] = ProfilesTogether::waiting();
      out.profile_later = true;
    } else {
      out.result["profile"] = profile_after_timing(spec, launcher, args, far_over);
    }
  }
  return finish(std::move(out), ExitCode::kOk, "", false);
}

void print_usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s CASE_FILE    run the cases of a case file (see grader/harness/core/case_file.h)\n"
               "       %s --describe   print the part this harness runs, as JSON\n"
               "       %s --serve CONTROL_FD REQUEST_FD REPLY_FD [--record]\n"
               "                       run only the launcher, for tilelab-harness (launcher_server.h)\n",
               argv0, argv0, argv0);
}

bool parse_fd(const char* text, int* fd) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0 || v > 1 << 20) return false;
  *fd = static_cast<int>(v);
  return true;
}

// `--serve CONTROL_FD REQUESTS_FD REPLIES_FD [--record]`: serves `parts` and
// never returns. Returns where the command line asks for something else.
void serve_if_asked(int argc, char** argv, const std::vector<PartBinding>& parts) {
  int control = -1, requests = -1, replies = -1;
  if ((argc == 5 || argc == 6) && std::strcmp(argv[1], "--serve") == 0 && parse_fd(argv[2], &control) &&
      parse_fd(argv[3], &requests) && parse_fd(argv[4], &replies) &&
      (argc == 5 || std::strcmp(argv[5], "--record") == 0)) {
    serve_launcher(parts, control, requests, replies, argc == 6);
  }
}

}  // namespace

void serve_main(int argc, char** argv, const std::vector<PartBinding>& parts) {
  serve_if_asked(argc, argv, parts);
  print_usage(argv[0]);
  end_process(ExitCode::kUsage);
}

int harness_main(int argc, char** argv, const PartBinding& part) {
  if (argc == 2 && std::strcmp(argv[1], "--describe") == 0) {
    const json d = {{"part", part.part_id}, {"launcher", part.launcher}, {"signature", signature_name(part.signature)}};
    std::printf("%s\n", d.dump().c_str());
    end_process(ExitCode::kOk);
  }
  serve_if_asked(argc, argv, {part});
  if (argc != 2 || argv[1][0] == '-') {
    print_usage(argv[0]);
    end_process(ExitCode::kUsage);
  }
  install_signal_guards();
  end_process(run_in_this_process(argv[1], part));
}

ExitCode run_in_this_process(const char* case_file, const PartBinding& part) {
  try {
    CaseFile file;
    try {
      file = load_case_file(case_file);
    } catch (const CaseFileError& e) {
      fail(ExitCode::kBadCaseFile, e.what());
    }
    InProcessLauncher launcher(part, file.record_launches);
    install_exit_guard();
    return run_case_file(file, launcher);
  } catch (const HarnessExit& e) {
    return e.code;
  }
}

ExitCode run_case_file(const CaseFile& file, Launcher& launcher, ProfilesTogether* together, size_t index) {
  validate_cases(file, launcher.part());
  int devices = 0;
  const cudaError_t count_error = cudaGetDeviceCount(&devices);
  if (count_error != cudaSuccess || devices == 0) {
    fail(ExitCode::kNoDevice, std::string("no CUDA device: ") +
                                  (count_error != cudaSuccess ? cudaGetErrorString(count_error) : "none found"));
  }
  std::string startup_message;
  const ExitCode startup = launcher.startup_error(&startup_message);
  if (startup != ExitCode::kOk) fail(startup, startup_message);
  cudaDeviceProp real;
  TILELAB_CUDA_CHECK(cudaGetDeviceProperties(&real, 0));
  validate_props(file, real);

  const PartInfo& part = launcher.part();
  ResultWriter writer(file.result, {{"version", 1},
                                    {"part", part.part_id},
                                    {"launcher", part.launcher},
                                    {"signature", signature_name(part.signature)},
                                    {"device", device_json(real)},
                                    {"launcher_process", launcher.trusted_clock()},
                                    {"cuda_in_use_at_start", launcher.cuda_in_use_at_start()},
                                    {"state", "running"},
                                    {"current_case", nullptr},
                                    {"cases", json::array()}});
  ExitCode first_failure = ExitCode::kOk;
  const auto began = std::chrono::steady_clock::now();
  GpuTurn turn(file.gate);
  for (const CaseSpec& spec : file.cases) {
    writer.doc()["current_case"] = spec.name;
    writer.write();
    CaseOutcome out = run_case(file, spec, launcher, real, turn, together != nullptr);
    if (out.profile_later) {
      together->add({index, file.result, writer.doc()["cases"].size(), spec.j, spec.k, spec.l, given_props(spec, real),
                     *spec.profile_metrics, spec.timing ? spec.timing->seed : spec.inputs.seed});
    }
    if (first_failure == ExitCode::kOk) first_failure = out.code;
    if (out.code != ExitCode::kOk) {
      std::fprintf(stderr, "tilelab: case %s: %s [%s]\n", spec.name.c_str(),
                   out.result["message"].get<std::string>().c_str(), exit_code_info(out.code).name);
    }
    writer.doc()["cases"].push_back(std::move(out.result));
    if (out.stopped_slow) {
      // No later case can give the part speed points it did not earn here
      // (the grader combines the sizes by a geometric mean): none is run.
      writer.doc()["stopped_slow"] = spec.name;
      break;
    }
    if (out.fatal) break;
  }
  writer.doc()["current_case"] = nullptr;
  writer.doc()["state"] = "finished";
  // The file's own share of a run of several (tilelab-harness CASE_FILE...), its wait at a gate included.
  writer.doc()["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  writer.doc()["exit_code"] = to_int(first_failure);
  writer.write();
  return first_failure;
}

}  // namespace tilelab
