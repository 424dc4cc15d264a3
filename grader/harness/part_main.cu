// The entry point of one part's harness executable: the harness with the
// part file linked in (part_binding.h).
#include "part_binding.h"

int main(int argc, char** argv) {
  return tilelab::harness_main(argc, argv, kPartBinding);
}
