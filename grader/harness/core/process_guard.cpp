#include "process_guard.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "tilelab/exit_codes.h"

namespace tilelab {
namespace {

// Suffixes naming the exit code, formatted once at install time because
// a signal handler may not call printf.
char g_crash_suffix[96];
char g_early_exit_suffix[96];

// Only async-signal-safe calls below: write() and _exit().
void write_stderr(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

const char* signal_message(int sig) {
  switch (sig) {
    case SIGSEGV: return "tilelab: the process crashed with SIGSEGV (invalid host memory access)";
    case SIGBUS: return "tilelab: the process crashed with SIGBUS (bad host memory access)";
    case SIGFPE: return "tilelab: the process crashed with SIGFPE (arithmetic error, e.g. integer division by zero)";
    case SIGILL: return "tilelab: the process crashed with SIGILL (illegal instruction)";
    case SIGABRT: return "tilelab: the process crashed with SIGABRT (abort(), failed assert or uncaught exception)";
    default: return "tilelab: the process crashed with a fatal signal";
  }
}

extern "C" void on_fatal_signal(int sig) {
  write_stderr(signal_message(sig));
  write_stderr(g_crash_suffix);
  ::_exit(to_int(ExitCode::kCrash));
}

extern "C" void on_exit_called() {
  write_stderr("tilelab: exit() was called before the harness finished; the part must return from its launcher");
  write_stderr(g_early_exit_suffix);
  ::_exit(to_int(ExitCode::kEarlyExit));
}

}  // namespace

void install_signal_guards() {
  std::snprintf(g_crash_suffix, sizeof g_crash_suffix, " [exit %d: %s]\n", to_int(ExitCode::kCrash),
                exit_code_info(ExitCode::kCrash).name);
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_fatal_signal;
  sigemptyset(&action.sa_mask);
  // SA_RESETHAND: a fault inside the handler itself falls back to the default action.
  action.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &action, nullptr);
}

void install_exit_guard() {
  static bool installed = false;  // a host that runs several parts installs it once
  if (installed) return;
  installed = true;
  std::snprintf(g_early_exit_suffix, sizeof g_early_exit_suffix, " [exit %d: %s]\n", to_int(ExitCode::kEarlyExit),
                exit_code_info(ExitCode::kEarlyExit).name);
  std::atexit(on_exit_called);
}

}  // namespace tilelab
