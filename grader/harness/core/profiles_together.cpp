#include "profiles_together.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "counter_profile.h"
#include "device_ops.h"
#include "json_io.h"
#include "launcher_process.h"
#include "reference.h"

namespace tilelab {

using nlohmann::json;

json ProfilesTogether::waiting() {
  CounterProfile out;
  out.message = "to be read with the run's other parts once all were timed: the run ended first";
  return to_json(out);
}

namespace {

// Writes `profile` as the counters of the case `case_index` of the result
// document `path`, and its seconds into the file's own share of the run.
void write_profile(const std::filesystem::path& path, size_t case_index, const json& profile) {
  try {
    json doc = read_json_file(path);
    json& cases = doc.at("cases");
    if (case_index >= cases.size()) return;
    cases[case_index]["profile"] = profile;
    if (doc.value("seconds", json()).is_number())
      doc["seconds"] = doc["seconds"].get<double>() + profile.at("seconds").get<double>();
    write_json_file(path, doc);
  } catch (const IoError& e) {
    fail(ExitCode::kIoError, std::string("cannot write the counters into the result file: ") + e.what());
  } catch (const json::exception& e) {
    fail(ExitCode::kIoError, std::string("cannot read the result file back: ") + e.what());
  }
}

// The counters of `batch` (one metric list) in one profile, on inputs big enough for each.
void read_batch(const std::vector<const ProfilesTogether::Request*>& batch, LauncherProcess& launcher) {
  uint64_t m = 1, n = 1, p = 1;
  for (const auto* r : batch) {
    m = std::max<uint64_t>(m, uint64_t(r->j) * r->k);
    n = std::max<uint64_t>(n, uint64_t(r->k) * r->l);
    p = std::max<uint64_t>(p, uint64_t(r->j) * r->l);
  }
  // One set of buffers for every call: each reads the leading part of M and N it needs, and writes P's.
  DeviceBuffer<float> M(m), N(n), P(p);
  fill_generated(M.get(), m, batch.front()->seed, MatrixId::kM, Distribution::kUniform);
  fill_generated(N.get(), n, batch.front()->seed, MatrixId::kN, Distribution::kUniform);
  const SharedWith share_m(launcher, M.get(), M.bytes()), share_n(launcher, N.get(), N.bytes()),
      share_p(launcher, P.get(), P.bytes());
  std::vector<LauncherProcess::PartCall> calls;
  for (const auto* r : batch) calls.push_back({r->part, {M.get(), N.get(), P.get(), r->j, r->k, r->l, &r->given}});
  TILELAB_CUDA_CHECK(cudaDeviceSynchronize());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<json> profiles = launcher.profile_parts(calls, batch.front()->metrics);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < batch.size(); ++i) {
    profiles[i]["far_over"] = false;
    profiles[i]["seconds"] = seconds / static_cast<double>(batch.size());  // its share
    write_profile(batch[i]->result, batch[i]->case_index, profiles[i]);
  }
}

}  // namespace

void ProfilesTogether::read(LauncherProcess& launcher) {
  const std::vector<Request> requests = std::move(requests_);  // read once, whatever comes of it
  requests_.clear();
  std::vector<const Request*> left;
  for (const Request& r : requests) left.push_back(&r);
  while (!left.empty()) {
    std::vector<const Request*> batch, rest;
    for (const Request* r : left) {
      (r->metrics == left.front()->metrics && batch.size() < kMaxProfileRanges ? batch : rest).push_back(r);
    }
    read_batch(batch, launcher);
    left = std::move(rest);
  }
}

}  // namespace tilelab
