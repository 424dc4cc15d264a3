// JSON forms of the records the harness and the verifier exchange.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

#include "compare.h"
#include "guard.h"
#include "launch_recorder.h"

namespace tilelab {

nlohmann::json to_json(const KernelLaunch& k);
nlohmann::json to_json(const MemoryOperation& m);
nlohmann::json to_json(const GuardReport& g);
nlohmann::json to_json(const ElementReport& e);
nlohmann::json to_json(const Comparison& c);

// Writes through a temporary file and a rename, so a reader never sees half a
// document even if the process dies mid-write. Throws IoError.
void write_json_file(const std::filesystem::path& path, const nlohmann::json& doc);
nlohmann::json read_json_file(const std::filesystem::path& path);

}  // namespace tilelab
