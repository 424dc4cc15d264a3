// tilelab-part-host: the harness of a part built as a shared object
// (part_library.cu), which it loads before it does anything else.
//
// Usage:  tilelab-part-host LIBRARY CASE_FILE | --describe | --serve ...
// Everything after LIBRARY is the part executable's command line
// (core/harness.h); the run is the same, its launcher loaded instead of
// linked in. A library that cannot be loaded, or that names no part, ends
// the run with kUsage and says why.
#include <dlfcn.h>

#include <cstdio>

#include "core/harness.h"

namespace {

using BindingOf = const tilelab::PartBinding* (*)();

int refuse(const char* library, const char* why) {
  std::fprintf(stderr, "tilelab-part-host: %s: %s\n", library, why);
  return static_cast<int>(tilelab::ExitCode::kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LIBRARY CASE_FILE | --describe | --serve CONTROL_FD REQUESTS_FD REPLIES_FD [--record]\n",
                 argv[0]);
    return static_cast<int>(tilelab::ExitCode::kUsage);
  }
  const char* library = argv[1];
  // RTLD_LOCAL: a part's own symbols (its kernels, helpers, its CUDA runtime) stay its own.
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "tilelab-part-host: cannot load the part: %s\n", dlerror());  // dlerror names the file
    return static_cast<int>(tilelab::ExitCode::kUsage);
  }
  auto binding_of = reinterpret_cast<BindingOf>(dlsym(handle, "tilelab_part_binding"));
  if (binding_of == nullptr) return refuse(library, "not a part built by tilelab (no tilelab_part_binding)");
  const tilelab::PartBinding* binding = binding_of();
  if (binding == nullptr || binding->call == nullptr) return refuse(library, "its part binding is empty");
  // The library's name takes the place of the program's: the harness reads its arguments after it.
  argv[1] = argv[0];
  return tilelab::harness_main(argc - 1, argv + 1, *binding);
}
