#include "generator.h"

namespace tilelab {

const char* distribution_name(Distribution dist) {
  return dist == Distribution::kSmallInt ? "small_int" : "uniform";
}

bool parse_distribution(const std::string& name, Distribution* out) {
  if (name == "uniform") {
    *out = Distribution::kUniform;
    return true;
  }
  if (name == "small_int") {
    *out = Distribution::kSmallInt;
    return true;
  }
  return false;
}

}  // namespace tilelab
