// Probe: a launcher that ends the process with exit(0) half-way through a run.
#include <cstdlib>

void launchNaive(const float*, const float*, float*, int) { std::exit(0); }
