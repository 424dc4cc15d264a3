#include "hex.h"

namespace tilelab {

std::string to_hex(const void* bytes, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  const auto* b = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < size; ++i) {
    out.push_back(digits[b[i] >> 4]);
    out.push_back(digits[b[i] & 15]);
  }
  return out;
}

bool from_hex(const std::string& hex, void* bytes, size_t size) {
  if (hex.size() != 2 * size) return false;
  auto value = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  auto* b = static_cast<unsigned char*>(bytes);
  for (size_t i = 0; i < size; ++i) {
    const int hi = value(hex[2 * i]), lo = value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    b[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

}  // namespace tilelab
