#include "launcher_protocol.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "counter_profile.h"

namespace tilelab {

using nlohmann::json;

namespace {

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

template <typename T>
T field(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) throw ProtocolError(std::string("missing \"") + key + "\"");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw ProtocolError(std::string("\"") + key + "\" has the wrong type");
  }
}

json kernel_to_wire(const KernelLaunch& k) {
  return {{"name", k.name},
          {"grid", k.grid},
          {"block", k.block},
          {"static_shared_bytes", k.static_shared_bytes},
          {"dynamic_shared_bytes", k.dynamic_shared_bytes},
          {"registers_per_thread", k.registers_per_thread},
          {"start_ns", k.start_ns},
          {"end_ns", k.end_ns},
          {"stream", k.stream}};
}

KernelLaunch kernel_from_wire(const json& j) {
  KernelLaunch k;
  k.name = field<std::string>(j, "name");
  k.grid = field<std::array<int, 3>>(j, "grid");
  k.block = field<std::array<int, 3>>(j, "block");
  k.static_shared_bytes = field<int>(j, "static_shared_bytes");
  k.dynamic_shared_bytes = field<int>(j, "dynamic_shared_bytes");
  k.registers_per_thread = field<int>(j, "registers_per_thread");
  k.start_ns = field<uint64_t>(j, "start_ns");
  k.end_ns = field<uint64_t>(j, "end_ns");
  k.stream = field<uint32_t>(j, "stream");
  if (k.end_ns < k.start_ns) throw ProtocolError("a kernel ended before it started");
  return k;
}

template <typename T, typename F>
std::vector<T> list_from_wire(const json& j, const char* key, F each) {
  std::vector<T> out;
  for (const json& item : field<json>(j, key)) out.push_back(each(item));
  return out;
}

}  // namespace

bool send_message(int fd, const json& message) {
  const std::string text = message.dump();
  if (text.size() > kMaxMessageBytes) return false;
  const uint32_t size = static_cast<uint32_t>(text.size());
  char header[4];
  std::memcpy(header, &size, 4);
  return write_all(fd, header, 4) && write_all(fd, text.data(), text.size());
}

json receive_message(int fd) {
  char header[4];
  if (!read_all(fd, header, 4)) throw ProtocolError("the other side is gone");
  uint32_t size = 0;
  std::memcpy(&size, header, 4);
  if (size > kMaxMessageBytes) throw ProtocolError("a message of " + std::to_string(size) + " bytes");
  std::string text(size, '\0');
  if (!read_all(fd, text.data(), size)) throw ProtocolError("the other side is gone");
  try {
    json message = json::parse(text);
    if (!message.is_object()) throw ProtocolError("a message that is not a JSON object");
    return message;
  } catch (const json::parse_error&) {
    throw ProtocolError("a message that is not JSON");
  }
}

json record_to_wire(const WindowRecord& record) {
  json kernels = json::array(), memory = json::array();
  for (const KernelLaunch& k : record.kernels) kernels.push_back(kernel_to_wire(k));
  for (const MemoryOperation& m : record.memory) {
    memory.push_back(
        {{"kind", m.kind}, {"api", m.api}, {"bytes", m.bytes}, {"start_ns", m.start_ns}, {"end_ns", m.end_ns}});
  }
  return {{"kernels", kernels}, {"memory", memory}};
}

WindowRecord record_from_wire(const json& wire) {
  WindowRecord record;
  record.kernels = list_from_wire<KernelLaunch>(wire, "kernels", kernel_from_wire);
  record.memory = list_from_wire<MemoryOperation>(wire, "memory", [](const json& m) {
    MemoryOperation op;
    op.kind = field<std::string>(m, "kind");
    op.api = field<std::string>(m, "api");
    op.bytes = field<uint64_t>(m, "bytes");
    op.start_ns = field<uint64_t>(m, "start_ns");
    op.end_ns = field<uint64_t>(m, "end_ns");
    if (op.end_ns < op.start_ns) throw ProtocolError("a copy ended before it started");
    return op;
  });
  return record;
}

json invocation_to_wire(const Invocation& call) {
  json outside = json::array();
  for (const KernelLaunch& k : call.outside) outside.push_back(kernel_to_wire(k));
  json wire = record_to_wire(call.record);
  wire.update({{"window", call.window},
               {"launch_error", static_cast<int>(call.launch_error)},
               {"run_error", static_cast<int>(call.run_error)},
               {"event_ms", call.event_ms},
               {"wall_ms", call.wall_ms},
               {"api_calls", call.account.calls},
               {"host_cpu_ms", call.account.host_cpu_ms},
               {"cuda_cpu_ms", call.account.cuda_cpu_ms},
               {"written_bytes", call.account.written_bytes},
               {"write_calls", call.account.write_calls},
               {"outside", outside},
               {"api_outside", call.api_outside}});
  return wire;
}

Invocation invocation_from_wire(const json& wire) {
  Invocation call;
  call.window = field<uint64_t>(wire, "window");
  call.launch_error = static_cast<cudaError_t>(field<int>(wire, "launch_error"));
  call.run_error = static_cast<cudaError_t>(field<int>(wire, "run_error"));
  call.event_ms = field<double>(wire, "event_ms");
  call.wall_ms = field<double>(wire, "wall_ms");
  call.account.calls = field<ApiCounts>(wire, "api_calls");
  call.account.host_cpu_ms = field<double>(wire, "host_cpu_ms");
  call.account.cuda_cpu_ms = field<double>(wire, "cuda_cpu_ms");
  call.account.written_bytes = field<int64_t>(wire, "written_bytes");
  call.account.write_calls = field<int64_t>(wire, "write_calls");
  call.record = record_from_wire(wire);
  call.outside = list_from_wire<KernelLaunch>(wire, "outside", kernel_from_wire);
  call.api_outside = field<ApiCounts>(wire, "api_outside");
  return call;
}

int connect_to(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return -1;
  if (connect(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    close(sock);
    errno = e;
    return -1;
  }
  return sock;
}

json profile_from_wire(json reply, const std::vector<std::string>& metrics) {
  CounterProfile out;
  if (!reply.is_object()) reply = json::object();
  const std::string status = reply.value("status", json()).is_string() ? reply["status"].get<std::string>() : "";
  for (const char* known : {kProfileMeasured, kProfileNotAllowed, kProfileUnsupported, kProfileSkipped}) {
    if (status == known) out.status = status;
  }
  if (reply.contains("message") && reply["message"].is_string())
    out.message = reply["message"].get<std::string>().substr(0, 300);
  if (out.status == kProfileFailed && out.message.empty()) out.message = "the launcher's process gave no profile";
  const json values = reply.value("metrics", json::object());
  for (const std::string& name : metrics) {
    const auto it = values.is_object() ? values.find(name) : values.end();
    if (it != values.end() && it->is_number() && std::isfinite(it->get<double>())) out.values[name] = it->get<double>();
  }
  const json unavailable = reply.value("unavailable", json::array());
  for (const std::string& name : metrics) {
    if (unavailable.is_array() && std::find(unavailable.begin(), unavailable.end(), name) != unavailable.end()) {
      out.unavailable.push_back(name);
    }
  }
  // Counts read wide, then clamped: a forged 2^32 + 1 must not read as 1.
  const json passes = reply.value("passes", json(0));
  if (passes.is_number_integer()) {
    out.passes = static_cast<int>(std::clamp<int64_t>(passes.get<int64_t>(), 0, kMaxProfilePasses));
  }
  const json ranges = reply.value("ranges", json(1));
  if (ranges.is_number_integer()) {
    out.ranges = static_cast<int>(std::clamp<int64_t>(ranges.get<int64_t>(), 1, kMaxProfileRanges));
  }
  for (auto [name, field] :
       {std::pair{"setup_seconds", &out.setup_seconds}, std::pair{"passes_seconds", &out.passes_seconds},
        std::pair{"prepared_seconds", &out.prepared_seconds}}) {
    const json seconds = reply.value(name, json(0.0));
    if (seconds.is_number() && std::isfinite(seconds.get<double>())) *field = std::max(0.0, seconds.get<double>());
  }
  if (out.status != kProfileMeasured) out.values.clear();
  return to_json(out);
}

}  // namespace tilelab
