// Probe: a launcher that returns without launching any kernel.
void launchNaive(const float*, const float*, float*, int) {}
