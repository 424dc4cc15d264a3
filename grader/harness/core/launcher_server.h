// The launcher's side of a launcher process (launcher_process.h): the part's
// own executable, started by tilelab-harness with `--serve`, runs nothing
// but the part's launcher, on buffers the trusted harness shares with it.
// It records what the launcher does (kernels, copies, API calls, CPU time)
// as the in-process harness does, and sends it back; the trusted side
// decides what to believe. See launcher_protocol.h for the exchange.
#pragma once

#include <vector>

#include "harness.h"

namespace tilelab {

// Serves requests on `requests` until told to quit or the trusted side is
// gone, then ends the process. `control_fd`: the shared ControlBlock.
// `parts`: the launchers it may serve, the first at start; {"op": "use",
// "part": i} turns to the i-th (tilelab-part-host --parts: one process for a
// hand-in's timed parts, and one profile of their counters: "profile_parts").
[[noreturn]] void serve_launcher(const std::vector<PartBinding>& parts, int control_fd, int requests, int replies,
                                 bool record);

}  // namespace tilelab
