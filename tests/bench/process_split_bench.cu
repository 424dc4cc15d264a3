// What timing a part from a trusted process would cost, with the launcher in
// a child process of its own: the measurement behind the harness's planned
// split (docs/security.md, "Known limits"). A benchmark, not a test.
//
// The trusted side (this process, which runs no launcher in split mode) owns
// M, N and P, hands them to the child through CUDA IPC memory handles, and
// per call: flushes the L2, synchronizes, starts its clock, tells the child
// to call the launcher (a counter in shared memory, spun on by both sides),
// and stops its clock when the child says the launcher returned and its
// device work is done. The same launcher is also timed in-process the way
// the harness times it today (events around the call, wall clock to a
// device synchronize), so the overhead of the split is the difference.
//
// It also says whether the child can open the IPC handles as another user
// (root only: the child then runs as `nobody`) and whether it can read the
// trusted process's memory through /proc when that process is marked
// non-dumpable.
//
// Build and run on a GPU machine, from the repository root:
//   nvcc -O3 -std=c++17 -arch=sm_90 -Iinclude tests/bench/process_split_bench.cu \
//        solutions/tiled.cu solutions/challenge.cu -o build/process_split_bench
//   build/process_split_bench [--reps 30]
#include <cuda_runtime.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

void launchTiled(const float* M, const float* N, float* P, int Width);
void launchChallenge(const float* M, const float* N, float* P, int j, int k, int l);

namespace {

constexpr int kSize = 4096;
constexpr uint64_t kQuit = ~uint64_t(0);

#define CHECK(call)                                                                            \
  do {                                                                                         \
    cudaError_t e_ = (call);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

struct Shared {
  std::atomic<uint64_t> command;  // the call to make (sequence number), or kQuit
  std::atomic<uint64_t> done;     // the last call finished
  int part = 0;                   // 0: tiled, 1: challenge, -1: an empty kernel (brings the child's context on)
  int open_error = 0;             // cudaIpcOpenMemHandle's result in the child
  int proc_mem_errno = 0;         // errno of the child's open() of the parent's /proc/PID/mem (0: it opened)
  int child_uid = 0;
  double child_wall_ms = 0;       // command seen to launcher done and device idle, in the child
  cudaIpcMemHandle_t handles[3];
};

void call(int part, const float* M, const float* N, float* P) {
  if (part == 0) {
    launchTiled(M, N, P, kSize);
  } else {
    launchChallenge(M, N, P, kSize, kSize, kSize);
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

__global__ void nothing() {}

__global__ void fill(float* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    x[i] = float(h & 0xFFFF) / 65536.0f - 0.5f;
  }
}

int child_main(int shm_fd) {
  auto* s = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0));
  s->child_uid = int(getuid());
  const std::string mem = "/proc/" + std::to_string(getppid()) + "/mem";
  const int fd = open(mem.c_str(), O_RDONLY);
  s->proc_mem_errno = fd >= 0 ? 0 : errno;
  if (fd >= 0) close(fd);
  void* ptr[3] = {};
  for (int i = 0; i < 3; ++i) {
    const cudaError_t e = cudaIpcOpenMemHandle(&ptr[i], s->handles[i], cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) s->open_error = int(e);
  }
  s->done.store(0, std::memory_order_release);  // ready
  uint64_t seen = 0;
  for (;;) {
    uint64_t c;
    while ((c = s->command.load(std::memory_order_acquire)) == seen) {
    }
    if (c == kQuit) break;
    seen = c;
    const auto t0 = std::chrono::steady_clock::now();
    if (s->part < 0) {
      nothing<<<1, 1>>>();
    } else if (s->open_error == 0) {
      call(s->part, static_cast<float*>(ptr[0]), static_cast<float*>(ptr[1]), static_cast<float*>(ptr[2]));
    }
    cudaDeviceSynchronize();
    s->child_wall_ms = ms_since(t0);
    s->done.store(c, std::memory_order_release);
  }
  return 0;
}

struct Figures {
  double event_ms, wall_ms;
};

// Today's way: events around the launcher, wall clock to a device synchronize.
Figures in_process(int part, float* M, float* N, float* P, void* flush, size_t flush_bytes, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<double> ev, wall;
  for (int r = 0; r < reps + 3; ++r) {
    CHECK(cudaMemsetAsync(flush, r & 0xFF, flush_bytes));
    CHECK(cudaDeviceSynchronize());
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaEventRecord(a));
    call(part, M, N, P);
    CHECK(cudaEventRecord(b));
    CHECK(cudaDeviceSynchronize());
    const double w = ms_since(t0);
    float e = 0;
    CHECK(cudaEventElapsedTime(&e, a, b));
    if (r >= 3) {
      ev.push_back(e);
      wall.push_back(w);
    }
  }
  return {median(ev), median(wall)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--child") == 0) return child_main(std::atoi(argv[2]));
  int reps = 30;
  if (argc == 3 && std::strcmp(argv[1], "--reps") == 0) reps = std::atoi(argv[2]);
  prctl(PR_SET_DUMPABLE, 0);  // same-user processes may not read or trace this one

  const size_t count = size_t(kSize) * kSize;
  float *M, *N, *P;
  CHECK(cudaMalloc(&M, count * sizeof(float)));
  CHECK(cudaMalloc(&N, count * sizeof(float)));
  CHECK(cudaMalloc(&P, count * sizeof(float)));
  fill<<<1024, 256>>>(M, count, 1);
  fill<<<1024, 256>>>(N, count, 2);
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const size_t flush_bytes = std::max<size_t>(2 * size_t(prop.l2CacheSize), 8 << 20);
  void* flush;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaDeviceSynchronize());

  const int shm_fd = memfd_create("process-split", 0);
  if (shm_fd < 0 || ftruncate(shm_fd, sizeof(Shared)) != 0) return std::perror("memfd"), 1;
  auto* s = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0));
  new (s) Shared();
  CHECK(cudaIpcGetMemHandle(&s->handles[0], M));
  CHECK(cudaIpcGetMemHandle(&s->handles[1], N));
  CHECK(cudaIpcGetMemHandle(&s->handles[2], P));

  std::printf("%s, %d x %d x %d, median of %d calls, L2 flushed before each\n", prop.name, kSize, kSize, kSize, reps);
  std::printf("%-16s %-14s %10s %10s %12s %10s %10s\n", "part", "child runs as", "event ms", "wall ms", "split ms",
              "vs event", "vs wall");
  const char* names[2] = {"tiled", "challenge"};
  Figures base[2];
  for (int part = 0; part < 2; ++part) base[part] = in_process(part, M, N, P, flush, flush_bytes, reps);

  const passwd* nobody = getuid() == 0 ? getpwnam("nobody") : nullptr;
  for (int other_user = 0; other_user < (nobody ? 2 : 1); ++other_user) {
    s->command.store(0);
    s->done.store(kQuit);
    s->open_error = 0;
    const pid_t pid = fork();
    if (pid == 0) {
      if (other_user) {
        if (setgroups(0, nullptr) != 0 || setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0) _exit(3);
      }
      const std::string fd = std::to_string(shm_fd);
      execl("/proc/self/exe", argv[0], "--child", fd.c_str(), nullptr);
      _exit(4);
    }
    while (s->done.load(std::memory_order_acquire) == kQuit) {
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) return std::fprintf(stderr, "child ended early (%d)\n", status), 1;
    }
    const std::string who = other_user ? "nobody" : "same user";
    if (s->open_error != 0) {
      std::printf("%-10s %-14s cudaIpcOpenMemHandle failed: %s\n", "-", who.c_str(),
                  cudaGetErrorString(cudaError_t(s->open_error)));
    } else {
      uint64_t seq = 0;
      auto order = [&](int part) {
        s->part = part;
        s->command.store(++seq, std::memory_order_release);
        while (s->done.load(std::memory_order_acquire) != seq) {
        }
      };
      for (int variant = 0; variant < 4; ++variant) {
        const int part = variant % 2;
        const bool warm = variant >= 2;  // the child runs an empty kernel before the clock starts
        std::vector<double> split, child_wall;
        for (int r = 0; r < reps + 3; ++r) {
          CHECK(cudaMemsetAsync(flush, r & 0xFF, flush_bytes));
          CHECK(cudaDeviceSynchronize());
          if (warm) order(-1);
          const auto t0 = std::chrono::steady_clock::now();
          order(part);
          const double w = ms_since(t0);
          if (r >= 3) {
            split.push_back(w);
            child_wall.push_back(s->child_wall_ms);
          }
        }
        const double ms = median(split);
        std::printf("%-16s %-14s %10.4f %10.4f %12.4f %+9.2f%% %+9.2f%%   (child's own wall %.4f ms)\n",
                    (std::string(names[part]) + (warm ? "+warm" : "")).c_str(), who.c_str(), base[part].event_ms, base[part].wall_ms, ms, 100 * (ms / base[part].event_ms - 1),
                    100 * (ms / base[part].wall_ms - 1), median(child_wall));
      }
    }
    std::printf("%-10s %-14s child uid %d: open(/proc/<trusted>/mem) %s\n", "-", who.c_str(), s->child_uid,
                s->proc_mem_errno == 0 ? "SUCCEEDED" : std::strerror(s->proc_mem_errno));
    s->command.store(kQuit, std::memory_order_release);
    int status;
    waitpid(pid, &status, 0);
  }
  return 0;
}
