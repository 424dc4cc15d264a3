// tilelab-part-host: the harness of a part built as a shared object
// (part_library.cu), which it loads before it runs anything of the part.
//
// Usage:  tilelab-part-host [--wait] LIBRARY CASE_FILE | --describe | --serve ...
//         tilelab-part-host --each LIBRARY CASE_FILE [LIBRARY CASE_FILE ...]
//         tilelab-part-host --parts LIBRARY... --serve CONTROL_FD REQUESTS_FD REPLIES_FD [--record]
// Everything after LIBRARY is the part executable's command line
// (core/harness.h); the run is the same, its launcher loaded instead of
// linked in. A library that cannot be loaded, or that names no part, ends
// the run with kUsage and says why.
//
// With --each the host runs several parts' case files in this one process,
// in turn, as each part's executable would run its own: one
// compute-sanitizer run checks a hand-in's parts instead of one run a part.
// It stops at the first part whose run does not end well (a CUDA error may
// leave the context unusable for the next) and ends with that run's status;
// every part's result file says how far it got. Launches are not recorded
// there (CUPTI and the sanitizers do not share a process well): a case file
// that asks for it ends the run with kUsage.
//
// With --parts the host serves the launchers of several parts to one
// tilelab-harness run of their case files, in turn (trusted_main.cu): a
// hand-in's parts are timed by one process, which makes one CUDA context and
// reads their counters in one profile (core/profiles_together.h).
//
// With --wait the host makes its CUDA context first, then waits for LIBRARY
// to appear (the build renames it into place once it is linked): a run can
// start, and pay for its context, while its part still compiles. Its
// recorders start before the context, as the harness's do where it records
// launches; "CUDA in use at start" is then whether the part made CUDA calls
// while it was loaded (its global constructors), which they see.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "core/api_recorder.h"
#include "core/case_file.h"
#include "core/harness.h"
#include "core/launch_recorder.h"
#include "core/process_guard.h"
#include "tilelab/part.h"

namespace {

using BindingOf = const tilelab::PartBinding* (*)();

constexpr useconds_t kLookEveryUs = 2000;

int usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--wait] LIBRARY CASE_FILE | --describe | --serve CONTROL_FD REQUESTS_FD REPLIES_FD "
               "[--record]\n"
               "       %s --each LIBRARY CASE_FILE [LIBRARY CASE_FILE ...]\n"
               "       %s --parts LIBRARY... --serve CONTROL_FD REQUESTS_FD REPLIES_FD [--record]\n",
               program, program, program);
  return static_cast<int>(tilelab::ExitCode::kUsage);
}

int refuse(const char* library, const char* why) {
  std::fprintf(stderr, "tilelab-part-host: %s: %s\n", library, why);
  return static_cast<int>(tilelab::ExitCode::kUsage);
}

// Whether the run after LIBRARY records launches: `--serve ... --record`, or
// a case file that asks for it (one that cannot be read is the harness's to report).
bool records(int argc, char** argv) {
  if (std::strcmp(argv[0], "--serve") == 0) return std::strcmp(argv[argc - 1], "--record") == 0;
  if (argc != 1 || argv[0][0] == '-') return false;
  try {
    return tilelab::load_case_file(argv[0]).record_launches;
  } catch (...) {
    return false;
  }
}

// The context made, then LIBRARY awaited and loaded, with the CUDA calls it
// made while loading told to the harness. Null where it cannot be loaded.
void* load_when_there(const char* library, bool record) {
  if (record) {
    tilelab::LaunchRecorder::start();  // a failure is the harness's to report: it starts them again
    tilelab::ApiRecorder::start();
  }
  cudaFree(nullptr);  // no device: the harness says so once it runs
  while (access(library, F_OK) != 0) usleep(kLookEveryUs);
  const bool counting = record && tilelab::ApiRecorder::active();
  if (counting) {
    tilelab::ApiRecorder::begin_call();
    tilelab::ApiRecorder::launcher_starts();
  }
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  bool used_cuda = false;
  if (counting) {
    tilelab::ApiRecorder::launcher_returned();
    used_cuda = !tilelab::ApiRecorder::end_call().calls.empty();
  }
  tilelab::host_made_the_context(used_cuda);
  return handle;
}

// The part's binding in the loaded `handle`, or null with why said.
const tilelab::PartBinding* binding_in(void* handle, const char* library) {
  if (handle == nullptr) {
    std::fprintf(stderr, "tilelab-part-host: cannot load the part: %s\n", dlerror());  // dlerror names the file
    return nullptr;
  }
  auto binding_of = reinterpret_cast<BindingOf>(dlsym(handle, "tilelab_part_binding"));
  if (binding_of == nullptr) {
    refuse(library, "not a part built by tilelab (no tilelab_part_binding)");
    return nullptr;
  }
  const tilelab::PartBinding* binding = binding_of();
  if (binding == nullptr || binding->call == nullptr) {
    refuse(library, "its part binding is empty");
    return nullptr;
  }
  return binding;
}

// LIBRARY loaded, and its part's binding; null with why said. RTLD_LOCAL: a
// part's own symbols (its kernels, helpers) stay its own.
const tilelab::PartBinding* load_part(const char* library) {
  return binding_in(dlopen(library, RTLD_NOW | RTLD_LOCAL), library);
}

// --each: the parts' case files in turn, in this process, until one does not end well.
int run_each(int count, char** pairs) {
  if (count == 0 || count % 2 != 0) return usage("tilelab-part-host");
  tilelab::install_signal_guards();
  for (int i = 0; i < count; i += 2) {
    const char* library = pairs[i];
    const char* case_file = pairs[i + 1];
    if (records(1, pairs + i + 1)) return refuse(case_file, "parts run with --each record no launches");
    const tilelab::PartBinding* binding = load_part(library);
    if (binding == nullptr) return static_cast<int>(tilelab::ExitCode::kUsage);
    const tilelab::ExitCode code = tilelab::run_in_this_process(case_file, *binding);
    if (code != tilelab::ExitCode::kOk) return static_cast<int>(code);
  }
  return static_cast<int>(tilelab::ExitCode::kOk);
}

// --parts: the libraries before "--serve", each loaded, then the first
// part's executable's command line from "--serve" on with all of them served.
int serve_parts(int argc, char** argv) {
  int serve = 2;
  while (serve < argc && std::strcmp(argv[serve], "--serve") != 0) ++serve;
  if (serve == 2 || serve == argc) return usage(argv[0]);
  std::vector<tilelab::PartBinding> parts;
  for (int i = 2; i < serve; ++i) {
    const tilelab::PartBinding* binding = load_part(argv[i]);
    if (binding == nullptr) return static_cast<int>(tilelab::ExitCode::kUsage);
    parts.push_back(*binding);
  }
  // The program's name takes the last library's place: the harness reads the arguments from "--serve" on.
  argv[serve - 1] = argv[0];
  tilelab::serve_main(argc - serve + 1, argv + serve - 1, parts);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--each") == 0)
    tilelab::end_process(static_cast<tilelab::ExitCode>(run_each(argc - 2, argv + 2)));
  if (argc > 1 && std::strcmp(argv[1], "--parts") == 0) return serve_parts(argc, argv);
  const bool wait = argc > 1 && std::strcmp(argv[1], "--wait") == 0;
  const int first = wait ? 2 : 1;  // LIBRARY
  if (argc < first + 2) return usage(argv[0]);
  const char* library = argv[first];
  const tilelab::PartBinding* binding =
      wait ? binding_in(load_when_there(library, records(argc - first - 1, argv + first + 1)), library)
           : load_part(library);
  if (binding == nullptr) return static_cast<int>(tilelab::ExitCode::kUsage);
  // The program's name takes LIBRARY's place: the harness reads its arguments after it.
  argv[first] = argv[0];
  return tilelab::harness_main(argc - first, argv + first, *binding);
}
