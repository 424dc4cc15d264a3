#include "case_file.h"

#include "hex.h"
#include "json_io.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace tilelab {
namespace {

using nlohmann::json;

// Largest matrix the harness accepts, in elements (4 GiB of floats): far above
// any case we grade, low enough that a typo cannot ask for terabytes.
constexpr uint64_t kMaxElements = uint64_t{1} << 30;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw CaseFileError(where + ": " + what);
}

// Rejects keys the schema does not know, so a typo ("repetiions") is an error
// instead of a silently ignored setting.
void check_keys(const json& obj, const std::string& where, std::initializer_list<const char*> known) {
  if (!obj.is_object()) fail(where, "must be an object");
  for (const auto& item : obj.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || item.key() == k;
    if (!ok) fail(where, "unknown key \"" + item.key() + "\"");
  }
}

const json& require(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(where, std::string("missing required key \"") + key + "\"");
  return *it;
}

int64_t get_int(const json& v, const std::string& where, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() && !v.is_number_unsigned()) fail(where, "must be an integer");
  // Unsigned values above int64 range cannot be in [lo, hi] for our fields.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    fail(where, "is out of range");
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    fail(where, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " + std::to_string(x));
  }
  return x;
}

uint64_t get_u64(const json& v, const std::string& where) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  fail(where, "must be a non-negative integer");
}

uint32_t get_u32(const json& v, const std::string& where) {
  const uint64_t x = get_u64(v, where);
  if (x > 0xFFFFFFFFull) fail(where, "must fit in 32 bits");
  return static_cast<uint32_t>(x);
}

double get_number(const json& v, const std::string& where, double lo, double hi) {
  if (!v.is_number()) fail(where, "must be a number");
  const double x = v.get<double>();
  if (!(x >= lo && x <= hi)) {
    std::ostringstream msg;
    msg << "must be between " << lo << " and " << hi << ", got " << x;
    fail(where, msg.str());
  }
  return x;
}

std::string get_string(const json& v, const std::string& where) {
  if (!v.is_string()) fail(where, "must be a string");
  return v.get<std::string>();
}

bool get_bool(const json& v, const std::string& where) {
  if (!v.is_boolean()) fail(where, "must be true or false");
  return v.get<bool>();
}

std::filesystem::path get_path(const json& v, const std::string& where, const std::filesystem::path& base) {
  const std::string s = get_string(v, where);
  if (s.empty()) fail(where, "must not be empty");
  std::filesystem::path p(s);
  return p.is_absolute() ? p : base / p;
}

bool valid_case_name(const std::string& name) {
  if (name.empty() || name.size() > 100) return false;
  for (char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

InputSpec parse_inputs(const json& v, const std::string& where, const std::filesystem::path& base) {
  InputSpec in;
  if (v.contains("M") || v.contains("N")) {
    check_keys(v, where, {"M", "N"});
    in.from_files = true;
    in.m_path = get_path(require(v, "M", where), where + ".M", base);
    in.n_path = get_path(require(v, "N", where), where + ".N", base);
    return in;
  }
  check_keys(v, where, {"seed", "distribution"});
  in.seed = get_u64(require(v, "seed", where), where + ".seed");
  if (v.contains("distribution")) {
    const std::string name = get_string(v["distribution"], where + ".distribution");
    if (!parse_distribution(name, &in.distribution)) {
      fail(where + ".distribution", "unknown distribution \"" + name + "\" (uniform or small_int)");
    }
  }
  return in;
}

PropOverrides parse_props(const json& v, const std::string& where) {
  check_keys(v, where, {"sharedMemPerBlock", "maxThreadsPerBlock", "maxThreadsDim"});
  PropOverrides p;
  if (v.contains("sharedMemPerBlock")) {
    const json& s = v["sharedMemPerBlock"];
    if (s.is_string()) {
      if (s.get<std::string>() != "optin") fail(where + ".sharedMemPerBlock", "must be bytes or \"optin\"");
      p.shared_mem_per_block_optin = true;
    } else {
      p.shared_mem_per_block = static_cast<uint64_t>(get_int(s, where + ".sharedMemPerBlock", 1, 1 << 30));
    }
  }
  if (v.contains("maxThreadsPerBlock")) {
    p.max_threads_per_block =
        static_cast<int>(get_int(v["maxThreadsPerBlock"], where + ".maxThreadsPerBlock", 1, 1 << 20));
  }
  if (v.contains("maxThreadsDim")) {
    const json& d = v["maxThreadsDim"];
    if (!d.is_array() || d.size() != 3) fail(where + ".maxThreadsDim", "must be [x, y, z]");
    std::array<int, 3> dims{};
    for (size_t i = 0; i < 3; ++i) {
      dims[i] = static_cast<int>(get_int(d[i], where + ".maxThreadsDim[" + std::to_string(i) + "]", 1, 1 << 20));
    }
    p.max_threads_dim = dims;
  }
  return p;
}

TimingSpec parse_timing(const json& v, const std::string& where) {
  check_keys(v, where,
             {"seed", "repetitions", "min_repetitions", "stable_within", "warmup_calls", "warmup_ms", "input_sets",
              "samples", "flush_l2", "give_up_ms"});
  TimingSpec t;
  t.seed = get_u64(require(v, "seed", where), where + ".seed");
  if (v.contains("repetitions"))
    t.repetitions = static_cast<int>(get_int(v["repetitions"], where + ".repetitions", 1, 10000));
  if (v.contains("min_repetitions"))
    t.min_repetitions = static_cast<int>(get_int(v["min_repetitions"], where + ".min_repetitions", 1, 10000));
  if (v.contains("stable_within")) t.stable_within = get_number(v["stable_within"], where + ".stable_within", 0.0, 0.5);
  if (v.contains("warmup_calls"))
    t.warmup_calls = static_cast<int>(get_int(v["warmup_calls"], where + ".warmup_calls", 0, 10000));
  if (v.contains("warmup_ms")) t.warmup_ms = get_number(v["warmup_ms"], where + ".warmup_ms", 0.0, 60000.0);
  if (v.contains("input_sets")) t.input_sets = static_cast<int>(get_int(v["input_sets"], where + ".input_sets", 1, 64));
  if (v.contains("samples")) t.samples = static_cast<int>(get_int(v["samples"], where + ".samples", 4, 1 << 16));
  if (v.contains("flush_l2")) t.flush_l2 = get_bool(v["flush_l2"], where + ".flush_l2");
  // An hour: far above any budget the grader writes, and a call limit that still fits the clock's arithmetic.
  if (v.contains("give_up_ms")) t.give_up_ms = get_number(v["give_up_ms"], where + ".give_up_ms", 0.0, 3600000.0);
  return t;
}

// A counter availability image is some kilobytes; a megabyte is far above any GPU's.
constexpr size_t kMaxHexChars = 2u << 20;

std::vector<uint8_t> parse_hex(const json& v, const std::string& where) {
  const std::string text = get_string(v, where);
  std::vector<uint8_t> bytes(text.size() / 2);
  if (text.empty() || text.size() > kMaxHexChars || !from_hex(text, bytes.data(), bytes.size())) {
    fail(where, "must be 2 to " + std::to_string(kMaxHexChars) + " lowercase hex digits, two a byte");
  }
  return bytes;
}

std::vector<std::string> parse_metrics(const json& list, const std::string& where) {
  if (!list.is_array() || list.empty() || list.size() > 256) fail(where, "must be 1-256 metric names");
  std::vector<std::string> metrics;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = get_string(list[i], where + "[" + std::to_string(i) + "]");
    if (name.empty() || name.size() > 200) fail(where + "[" + std::to_string(i) + "]", "must be a metric name");
    metrics.push_back(name);
  }
  return metrics;
}

void parse_profile(const json& v, const std::string& where, CaseSpec* c) {
  check_keys(v, where, {"metrics", "far_over_metrics"});
  c->profile_metrics = parse_metrics(require(v, "metrics", where), where + ".metrics");
  if (v.contains("far_over_metrics")) {
    c->profile_far_over_metrics = parse_metrics(v["far_over_metrics"], where + ".far_over_metrics");
  }
}

CaseSpec parse_case(const json& v, const std::string& where, const std::filesystem::path& base) {
  check_keys(v, where, {"name", "j", "k", "l", "inputs", "output", "tolerance", "props", "timing", "profile"});
  CaseSpec c;
  c.name = get_string(require(v, "name", where), where + ".name");
  if (!valid_case_name(c.name)) {
    fail(where + ".name", "\"" + c.name + "\" must be 1-100 characters of letters, digits, '_', '-', '.'");
  }
  constexpr int64_t kMaxDim = 1 << 20;
  c.j = static_cast<int>(get_int(require(v, "j", where), where + ".j", 1, kMaxDim));
  c.k = static_cast<int>(get_int(require(v, "k", where), where + ".k", 1, kMaxDim));
  c.l = static_cast<int>(get_int(require(v, "l", where), where + ".l", 1, kMaxDim));
  for (uint64_t elements : {uint64_t(c.j) * c.k, uint64_t(c.k) * c.l, uint64_t(c.j) * c.l}) {
    if (elements > kMaxElements) fail(where, "a matrix of this case has more than 2^30 elements");
  }
  c.inputs = parse_inputs(require(v, "inputs", where), where + ".inputs", base);
  if (v.contains("output")) c.output = get_path(v["output"], where + ".output", base);
  if (v.contains("tolerance")) {
    const json& t = v["tolerance"];
    check_keys(t, where + ".tolerance", {"sqrt_k_factor"});
    c.tolerance.sqrt_k_factor =
        get_number(require(t, "sqrt_k_factor", where + ".tolerance"), where + ".tolerance.sqrt_k_factor", 0.0, 1e6);
  }
  if (v.contains("props")) c.props = parse_props(v["props"], where + ".props");
  if (v.contains("timing")) c.timing = parse_timing(v["timing"], where + ".timing");
  if (v.contains("profile")) parse_profile(v["profile"], where + ".profile", &c);
  return c;
}

}  // namespace

double TimingSpec::call_limit_ms() const {
  return give_up_ms > 0 ? std::max(kCallLimitFactor * give_up_ms, kMinCallLimitMs) : 0.0;
}

CaseFile parse_case_file(const json& doc, const std::filesystem::path& base_dir) {
  const std::string where = "case file";
  check_keys(doc, where,
             {"version", "part", "result", "record_launches", "poison_bits", "guard_bits", "guard_elements", "gate",
              "counter_availability", "cases"});
  CaseFile f;
  const int64_t version = get_int(require(doc, "version", where), "version", 1, 1000);
  if (version != 1) fail("version", "this harness reads version 1, got " + std::to_string(version));
  f.part = get_string(require(doc, "part", where), "part");
  f.result = get_path(require(doc, "result", where), "result", base_dir);
  if (doc.contains("record_launches")) f.record_launches = get_bool(doc["record_launches"], "record_launches");
  if (doc.contains("poison_bits")) f.poison_bits = get_u32(doc["poison_bits"], "poison_bits");
  if (doc.contains("guard_bits")) f.guard_bits = get_u32(doc["guard_bits"], "guard_bits");
  if (f.poison_bits == f.guard_bits) fail("guard_bits", "must differ from poison_bits");
  if (doc.contains("guard_elements")) {
    f.guard_elements = static_cast<int>(get_int(doc["guard_elements"], "guard_elements", 64, 1 << 24));
    // P starts guard_elements floats into its allocation; a multiple of 64
    // keeps it 256-byte aligned, as a plain cudaMalloc would be.
    if (f.guard_elements % 64 != 0) fail("guard_elements", "must be a multiple of 64");
  }
  if (doc.contains("gate")) f.gate = get_path(doc["gate"], "gate", base_dir);
  if (doc.contains("counter_availability")) {
    f.counter_availability = parse_hex(doc["counter_availability"], "counter_availability");
  }
  const json& cases = require(doc, "cases", where);
  if (!cases.is_array() || cases.empty()) fail("cases", "must be a non-empty list");
  std::set<std::string> names;
  for (size_t i = 0; i < cases.size(); ++i) {
    CaseSpec c = parse_case(cases[i], "cases[" + std::to_string(i) + "]", base_dir);
    if (!names.insert(c.name).second)
      fail("cases[" + std::to_string(i) + "].name", "duplicate name \"" + c.name + "\"");
    f.cases.push_back(std::move(c));
  }
  return f;
}

CaseFile load_case_file(const std::filesystem::path& path) {
  json doc;
  try {
    doc = read_json_file(path);
  } catch (const IoError& e) {
    // The harness reports a bad case file with its own exit code.
    throw CaseFileError(std::string("case file ") + e.what());
  }
  CaseFile f = parse_case_file(doc, path.parent_path());
  f.path = path;
  return f;
}

json case_file_to_json(const CaseFile& f) {
  json cases = json::array();
  for (const CaseSpec& c : f.cases) {
    json jc = {{"name", c.name}, {"j", c.j}, {"k", c.k}, {"l", c.l}};
    if (c.inputs.from_files) {
      jc["inputs"] = {{"M", c.inputs.m_path.string()}, {"N", c.inputs.n_path.string()}};
    } else {
      jc["inputs"] = {{"seed", c.inputs.seed}, {"distribution", distribution_name(c.inputs.distribution)}};
    }
    if (!c.output.empty()) jc["output"] = c.output.string();
    jc["tolerance"] = {{"sqrt_k_factor", c.tolerance.sqrt_k_factor}};
    if (c.props.any()) {
      json p = json::object();
      if (c.props.shared_mem_per_block_optin) p["sharedMemPerBlock"] = "optin";
      if (c.props.shared_mem_per_block) p["sharedMemPerBlock"] = *c.props.shared_mem_per_block;
      if (c.props.max_threads_per_block) p["maxThreadsPerBlock"] = *c.props.max_threads_per_block;
      if (c.props.max_threads_dim) p["maxThreadsDim"] = *c.props.max_threads_dim;
      jc["props"] = p;
    }
    if (c.timing) {
      const TimingSpec& t = *c.timing;
      jc["timing"] = {{"seed", t.seed},           {"repetitions", t.repetitions}, {"warmup_calls", t.warmup_calls},
                      {"warmup_ms", t.warmup_ms}, {"input_sets", t.input_sets},   {"samples", t.samples},
                      {"flush_l2", t.flush_l2}};
      if (t.give_up_ms > 0) jc["timing"]["give_up_ms"] = t.give_up_ms;
      if (t.stable_within > 0) {
        jc["timing"]["min_repetitions"] = t.min_repetitions;
        jc["timing"]["stable_within"] = t.stable_within;
      }
    }
    if (c.profile_metrics) jc["profile"] = {{"metrics", *c.profile_metrics}};
    if (c.profile_metrics && c.profile_far_over_metrics) jc["profile"]["far_over_metrics"] = *c.profile_far_over_metrics;
    cases.push_back(std::move(jc));
  }
  json doc = {{"version", 1},
              {"part", f.part},
              {"result", f.result.string()},
              {"record_launches", f.record_launches},
              {"poison_bits", f.poison_bits},
              {"guard_bits", f.guard_bits},
              {"guard_elements", f.guard_elements},
              {"cases", cases}};
  if (!f.gate.empty()) doc["gate"] = f.gate.string();
  if (!f.counter_availability.empty()) {
    doc["counter_availability"] = to_hex(f.counter_availability.data(), f.counter_availability.size());
  }
  return doc;
}

}  // namespace tilelab
