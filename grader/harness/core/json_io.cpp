#include "json_io.h"

#include <cmath>
#include <fstream>

#include "reference.h"

namespace tilelab {

using nlohmann::json;

json to_json(const KernelLaunch& k) {
  return {{"name", k.name},
          {"grid", k.grid},
          {"block", k.block},
          {"static_shared_bytes", k.static_shared_bytes},
          {"dynamic_shared_bytes", k.dynamic_shared_bytes},
          {"registers_per_thread", k.registers_per_thread},
          {"duration_ms", k.duration_ms()},
          {"stream", k.stream}};
}

json to_json(const MemoryOperation& m) {
  return {{"kind", m.kind}, {"api", m.api}, {"bytes", m.bytes}, {"duration_ms", (m.end_ns - m.start_ns) * 1e-6}};
}

json to_json(const GuardReport& g) {
  return {{"intact", g.intact()},
          {"modified_before", g.modified_before},
          {"modified_after", g.modified_after},
          {"first_offsets", g.first_offsets}};
}

json to_json(const ElementReport& e) {
  json j = {{"row", e.row},           {"col", e.col},         {"expected", e.expected},
            {"got_bits", e.got_bits}, {"allowed", e.allowed}, {"fault", element_fault_name(e.fault)}};
  // JSON has no NaN or infinity; the bits above are exact, this is for reading.
  j["got"] = std::isfinite(e.got) ? json(e.got) : json(std::isnan(e.got) ? "nan" : (e.got > 0 ? "inf" : "-inf"));
  return j;
}

json to_json(const Comparison& c) {
  json first = json::array();
  for (const ElementReport& e : c.first) first.push_back(to_json(e));
  return {{"passed", c.passed()},
          {"checked", c.checked},
          {"wrong", c.wrong},
          {"nan", c.not_a_number},
          {"unwritten", c.unwritten},
          {"worst_error_ratio", std::isfinite(c.worst_ratio) ? json(c.worst_ratio) : json("inf")},
          {"first", first}};
}

void write_json_file(const std::filesystem::path& path, const json& doc) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw IoError(tmp.string() + ": cannot open for writing");
    out << doc.dump(2) << '\n';
    if (!out) throw IoError(tmp.string() + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw IoError(path.string() + ": cannot replace (" + ec.message() + ")");
}

json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw IoError(path.string() + ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::parse_error& e) {
    throw IoError(path.string() + ": not valid JSON: " + e.what());
  }
}

}  // namespace tilelab
