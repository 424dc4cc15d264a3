#include <sys/mman.h>

#include <functional>
#include <map>
#include <string>

#include "counter_profile.h"
#include "launcher.h"
#include "launcher_protocol.h"
#include "launcher_server.h"
#include "process_guard.h"
#include "tilelab/part.h"

namespace tilelab {

using nlohmann::json;

namespace {

// Brings this process's context onto the GPU before the trusted clock
// starts. Named as the harness's, so the launch records leave it out.
__global__ void tilelab_harness_bring_context_on() {}

json describe(const PartBinding& part, const Launcher& launcher) {
  json d = {{"part", part.part_id},
            {"launcher", part.launcher},
            {"signature", signature_name(part.signature)},
            {"cuda_in_use_at_start", launcher.cuda_in_use_at_start()}};
  std::string message;
  const ExitCode error = launcher.startup_error(&message);
  if (error == ExitCode::kNoDevice) d["no_device"] = message;
  if (error == ExitCode::kProfilerError) d["profiler_error"] = message;
  return d;
}

// A call's arguments as a "call", "profile" or "profile_parts" request gives
// them: its buffers found by `pointer`, its sizes, and the device properties
// it is told, `given` (the device's own, but for what the request lowers).
template <typename Pointer>
LaunchArgs args_of(const json& req, const Pointer& pointer, cudaDeviceProp* given) {
  if (req.contains("props")) {
    const json& p = req["props"];
    given->sharedMemPerBlock = p.at("sharedMemPerBlock").get<size_t>();
    given->maxThreadsPerBlock = p.at("maxThreadsPerBlock").get<int>();
    for (int i = 0; i < 3; ++i) given->maxThreadsDim[i] = p.at("maxThreadsDim").at(i).get<int>();
  }
  return LaunchArgs{static_cast<const float*>(pointer(req.at("m"))),
                    static_cast<const float*>(pointer(req.at("n"))),
                    static_cast<float*>(pointer(req.at("p"))),
                    req.at("j").get<int>(),
                    req.at("k").get<int>(),
                    req.at("l").get<int>(),
                    given};
}

[[noreturn]] void quit() {
  end_process(ExitCode::kOk);
}

void reply(int fd, const json& message) {
  if (!send_message(fd, message)) quit();  // the trusted side is gone
}

}  // namespace

void serve_launcher(const std::vector<PartBinding>& parts, int control_fd, int requests, int replies, bool record) {
  install_signal_guards();
  void* mem = mmap(nullptr, sizeof(ControlBlock), PROT_READ | PROT_WRITE, MAP_SHARED, control_fd, 0);
  if (mem == MAP_FAILED) end_process(ExitCode::kUsage);
  auto* control = static_cast<ControlBlock*>(mem);
  // The first part's launcher starts the recorders and finds the device, for all of them.
  InProcessLauncher launcher(parts.at(0), record);
  const PartBinding* binding = &parts[0];
  if (parts.size() > 1) keep_counter_session();
  std::string startup_message;
  const bool usable = launcher.startup_error(&startup_message) == ExitCode::kOk;
  cudaDeviceProp real{};
  if (usable) {
    TILELAB_CUDA_CHECK(cudaGetDeviceProperties(&real, 0));
    // The context is made now, before the first answer: the relay waits for
    // that answer before it hands the run to the service, which runs one job
    // at a time and would otherwise wait here (about 0.15 s alone, a second
    // or more while other processes make theirs: contexts are made one at a
    // time on a GPU). Made lazily, by the first shared buffer, it held the
    // service for all of that.
    TILELAB_CUDA_CHECK(cudaFree(nullptr));
  }
  install_exit_guard();

  std::map<int64_t, void*> shared;  // the trusted side's allocations, by id
  auto pointer = [&](const json& where) -> void* {
    const auto it = shared.find(where.at(0).get<int64_t>());
    if (it == shared.end()) return nullptr;
    return static_cast<char*>(it->second) + where.at(1).get<uint64_t>();
  };
  for (;;) {
    json req;
    try {
      req = receive_message(requests);
    } catch (const ProtocolError&) {
      quit();
    }
    const std::string op = req.value("op", "");
    if (op == "describe") {
      reply(replies, describe(*binding, launcher));
    } else if (op == "use") {
      const json which = req.value("part", json());
      if (!which.is_number_unsigned() || which.get<size_t>() >= parts.size()) {
        reply(replies, {{"error", "no such part here"}});
        continue;
      }
      binding = &parts[which.get<size_t>()];
      reply(replies, describe(*binding, launcher));
    } else if (op == "share" && usable) {
      cudaIpcMemHandle_t handle;
      void* ptr = nullptr;
      if (!from_hex(req.value("handle", ""), &handle, sizeof handle)) {
        reply(replies, {{"error", "a malformed IPC handle"}});
        continue;
      }
      const cudaError_t e = cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess) {
        reply(replies, {{"error", std::string("cudaIpcOpenMemHandle: ") + cudaGetErrorString(e)}});
        continue;
      }
      shared[req.at("id").get<int64_t>()] = ptr;
      reply(replies, {{"ok", true}});
    } else if (op == "unshare") {
      const auto it = shared.find(req.at("id").get<int64_t>());
      if (it != shared.end()) {
        cudaIpcCloseMemHandle(it->second);
        shared.erase(it);
      }
      reply(replies, {{"ok", true}});
    } else if ((op == "call" || op == "profile") && usable) {
      cudaDeviceProp given = real;
      const LaunchArgs args = args_of(req, pointer, &given);
      if (op == "profile") {
        const std::vector<std::string> metrics = req.at("metrics").get<std::vector<std::string>>();
        const double call_limit_ms = req.value("call_limit_ms", 0.0);
        reply(replies, to_json(profile_call(
                           metrics, [&] { return call_failure(*binding, args); }, call_limit_ms)));
        continue;
      }
      const uint64_t seq = req.at("seq").get<uint64_t>();
      const bool take_records = req.value("records", true) == true;
      make_call_events();
      tilelab_harness_bring_context_on<<<1, 1>>>();
      TILELAB_CUDA_CHECK(cudaDeviceSynchronize());
      if (take_records) prepare_call();  // CUPTI's flush, before the trusted clock starts
      reply(replies, {{"ready", true}});
      while (control->go.load(std::memory_order_acquire) != seq) {
      }
      // "done" as soon as the device is idle: taking the records comes after the trusted clock stopped.
      const Invocation call = invoke_launcher(
          *binding, args, [&] { control->done.store(seq, std::memory_order_release); }, take_records);
      reply(replies, invocation_to_wire(call));
    } else if (op == "profile_parts" && usable) {
      // One call of each part named, their counters read in the same passes (profile_calls).
      const json& wanted = req.at("calls");
      const size_t n = wanted.is_array() ? wanted.size() : 0;
      std::vector<cudaDeviceProp> given(n, real);  // each call's, where its args point
      std::vector<LaunchArgs> args;
      std::vector<const PartBinding*> bindings;
      for (size_t i = 0; i < n; ++i) {
        const json which = wanted[i].value("part", json());
        if (!which.is_number_unsigned() || which.get<size_t>() >= parts.size()) break;
        bindings.push_back(&parts[which.get<size_t>()]);
        args.push_back(args_of(wanted[i], pointer, &given[i]));
      }
      if (n == 0 || args.size() != n) {
        reply(replies, {{"error", "no such part here"}});
        continue;
      }
      std::vector<std::function<std::string()>> calls;
      for (size_t i = 0; i < n; ++i) calls.push_back([&, i] { return call_failure(*bindings[i], args[i]); });
      json profiles = json::array();
      for (const CounterProfile& p : profile_calls(req.at("metrics").get<std::vector<std::string>>(), calls)) {
        profiles.push_back(to_json(p));
      }
      reply(replies, {{"profiles", profiles}});
    } else if (op == "prepare_profile" && usable) {
      const std::string hex = req.value("availability", "");
      std::vector<uint8_t> availability(hex.size() / 2);
      if (!from_hex(hex, availability.data(), availability.size())) availability.clear();
      prepare_counters(req.at("metrics").get<std::vector<std::string>>(), availability);
      reply(replies, {{"ok", true}});
    } else if (op == "records" && usable) {
      json records = json::array();
      for (const WindowRecord& r : take_window_records(req.at("windows").get<std::vector<uint64_t>>())) {
        records.push_back(record_to_wire(r));
      }
      reply(replies, {{"records", records}});
    } else if (op == "quit") {
      quit();
    } else {
      reply(replies, {{"error", "cannot do \"" + op + "\" here"}});
    }
  }
}

}  // namespace tilelab
