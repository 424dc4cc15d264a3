// Turning the ways a part can take the process down into documented exit codes.
//
// A part file runs inside the harness process, so a segfault, abort() or
// exit() in it would otherwise end the process with a status nobody can
// interpret. These guards map each to its ExitCode with a one-line message.
#pragma once

namespace tilelab {

// Installs handlers for fatal signals (-> kCrash).
void install_signal_guards();

// Registers an atexit hook (-> kEarlyExit). The harness itself always ends
// through end_process(), which skips atexit hooks, so the hook only fires
// when other code calls exit(). Call it after CUDA and CUPTI are set up:
// hooks run in reverse order, so this one then runs before their teardown.
void install_exit_guard();

}  // namespace tilelab
