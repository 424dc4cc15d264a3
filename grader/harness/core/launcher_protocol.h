// What the trusted harness (launcher_process.h) and a launcher process
// (launcher_server.h) say to each other.
//
// Two pipes carry JSON messages, each a 4-byte length and its text:
// requests one way, replies the other. The call itself is started and ended
// by two counters in shared memory (a memfd both map), spun on by both
// sides, so the trusted clock sees no pipe wake-up: with the child's context
// brought onto the GPU before the clock starts, the split costs under 0.5 %
// of a timed call at the timing sizes (docs/measurements-archive.md,
// "Grading nobody can game").
//
// Requests and their replies:
//   {"op": "describe"}                  -> the part, and why it cannot run, if so
//   {"op": "share", "id", "handle"}     -> {"ok": true} | {"error": ...}  (CUDA IPC handle, hex)
//   {"op": "unshare", "id"}             -> {"ok": true}
//   {"op": "call", "seq", "records", "m", "n", "p", "j", "k", "l", "props"?}
//                                       -> {"ready": true}, then the call when go == seq,
//                                          then done = seq, then the Invocation (wire form);
//                                          "records": false leaves its kernels and copies for
//   {"op": "records", "windows": [...]} -> {"records": [{"kernels", "memory"}, ...]}
//   {"op": "profile", "metrics", "m", "n", "p", "j", "k", "l", "props"?}
//                                       -> the counters of untimed calls (counter_profile.h)
//   {"op": "profile_parts", "metrics", "calls": [{"part", "m", "n", "p", "j", "k", "l", "props"?}, ...]}
//                                       -> {"profiles": [...]}: one call of each part served, their
//                                          counters read in the same passes (profile_calls)
//   {"op": "prepare_profile", "metrics", "availability"}
//                                       -> {"ok": true}: the host's part of the next profile's setup, made now
//                                          from the GPU's counter availability image (hex)
//   {"op": "quit"}                      -> the process ends
// "m", "n" and "p" are [id, byte offset] into shared allocations.
//
// Everything the child sends is untrusted: it is parsed with limits, and
// what does not parse ends the exchange (ProtocolError).
#pragma once

#include <atomic>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "hex.h"
#include "invoke.h"

namespace tilelab {

struct ControlBlock {
  std::atomic<uint64_t> go{0};    // the trusted side: make call `seq` now
  std::atomic<uint64_t> done{0};  // the launcher's side: call `seq` returned and its device work is done
};

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The largest message either side accepts (a call's records included).
inline constexpr uint32_t kMaxMessageBytes = 64u << 20;

// False if the other side is gone.
bool send_message(int fd, const nlohmann::json& message);
// Throws ProtocolError at the end of the stream or on anything malformed.
nlohmann::json receive_message(int fd);

// An Invocation as the launcher process sends it (records with raw
// timestamps), and back. invocation_from_wire throws ProtocolError.
nlohmann::json invocation_to_wire(const Invocation& call);
Invocation invocation_from_wire(const nlohmann::json& wire);
nlohmann::json record_to_wire(const WindowRecord& record);
WindowRecord record_from_wire(const nlohmann::json& wire);

// What a launcher process says a profile's counters were (a "profile"
// reply, or one of "profile_parts"'), as counter_profile.h's to_json gives
// them: kept only in that shape, for `metrics` (those asked for), as finite
// numbers; anything else says it gave no profile.
nlohmann::json profile_from_wire(nlohmann::json reply, const std::vector<std::string>& metrics);

// A Unix socket connected to `path` (the service a relay hands its run to,
// a timing run's gate), or -1 with errno set.
int connect_to(const std::string& path);

}  // namespace tilelab
