// A part built as a shared object, for a harness that loads it after it
// started (part_host_main.cu): its binding (part_binding.h) is all it exports
// to the harness, under one name. It is linked with every symbol defined
// (-z defs), so a launcher with another name or signature fails its link as
// the part's executable does.
#include "part_binding.h"

extern "C" __attribute__((visibility("default"))) const tilelab::PartBinding* tilelab_part_binding() {
  return &kPartBinding;
}
