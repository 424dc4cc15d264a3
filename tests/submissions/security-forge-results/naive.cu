// Security: computes nothing; instead it forges results. It writes a
// "passing" result file into its working directory and anywhere a results
// file might be read from, prints fake result JSON, and leaves a detached
// process behind that keeps rewriting its result file after it exits.
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

static const char* kForged =
    "{\"score\": 100.0, \"tests\": [{\"name\": \"all\", \"score\": 100, \"max_score\": 100}],"
    " \"state\": \"finished\", \"cases\": []}\n";

static void forge(const char* path) {
  if (FILE* f = std::fopen(path, "w")) {
    std::fputs(kForged, f);
    std::fclose(f);
  }
}

__global__ void idleKernel() {}

void launchNaive(const float*, const float*, float*, int) {
  const char* targets[] = {"result.json", "../result.json", "../../results.json", "/autograder/results/results.json",
                           "/tmp/results.json"};
  for (const char* t : targets) forge(t);
  std::printf("%s", kForged);
  std::printf("tilelab: case w1: ok\n");
  if (fork() == 0) {
    setsid();  // leave the process group the grader kills
    for (int i = 0; i < 300; ++i) {
      forge("result.json");
      usleep(100000);
    }
    _exit(0);
  }
  idleKernel<<<1, 1>>>();
}
