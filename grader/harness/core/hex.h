// Bytes as lowercase hex text, two digits a byte, and back: how a CUDA IPC
// handle crosses the launcher's pipe and a counter availability image a case file.
#pragma once

#include <cstddef>
#include <string>

namespace tilelab {

std::string to_hex(const void* bytes, size_t size);
// False unless `hex` holds exactly `size` bytes.
bool from_hex(const std::string& hex, void* bytes, size_t size);

}  // namespace tilelab
