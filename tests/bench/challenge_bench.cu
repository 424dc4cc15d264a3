// challenge_bench.cu: correctness sweep and timing of the challenge part's
// reference, the rungs of its ladder and tuning variants, against cuBLAS
// SGEMM (true FP32) in the same process. Built and run by
// scripts/bench-challenge.
//
//   challenge_bench [--only a,b,...] [--no-tune] [--rounds R] [--reps N]
//                   [--skip-sweep] [--skip-time]
//       the sweep over every edge shape, then timing at 4096^3 and
//       2048 x 4096 x 8192; the table comes last. With $OUT set, full
//       numbers go to $OUT/challenge_times.csv and $OUT/challenge_sweep.csv.
//   challenge_bench --case J K L [--only a,b,...]
//       one shape, checked, no cuBLAS (for compute-sanitizer); exit 1 when
//       a variant is wrong.
//
// Correctness: fresh uniform inputs in [-1, 1) for every shape, the output
// poisoned with NaN before every call, every element checked against a
// float64 reference: |P - ref| <= sqrt(k) * 16 * 2^-24 * (|M| |N|)_ij, NaN
// never passes. The reference is computed on the CPU for the sweep shapes;
// for the two timing shapes on the GPU in float64, itself checked on the CPU
// at sampled rows.
// Timing: CUDA events around each call, L2 flushed (a 256 MB memset) before
// each, warm-up first; every variant is timed in R rounds of N calls,
// interleaved with the others, and reported as the median of its R * N.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "challenge_variants.h"

void launchLadder01(const float*, const float*, float*, int, int, int);
void launchLadder02(const float*, const float*, float*, int, int, int);
void launchLadder03(const float*, const float*, float*, int, int, int);
void launchLadder04(const float*, const float*, float*, int, int, int);
void launchLadder05(const float*, const float*, float*, int, int, int);
void launchLadder06(const float*, const float*, float*, int, int, int);
void launchReference(const float*, const float*, float*, int, int, int);
#ifdef CHALLENGE_ALT_NAME  // scripts/bench-challenge --alt: the reference with one source edit
void launchReferenceAlt(const float*, const float*, float*, int, int, int);
#endif

namespace {

#define CUDA_OK(call)                                                                                   \
  do {                                                                                                  \
    const cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #call); \
      std::exit(2);                                                                                     \
    }                                                                                                   \
  } while (0)
#define CUBLAS_OK(call)                                                                      \
  do {                                                                                       \
    const cublasStatus_t s_ = (call);                                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                       \
      std::fprintf(stderr, "cuBLAS error %d at %s:%d: %s\n", int(s_), __FILE__, __LINE__, #call); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

cublasHandle_t gDefault = nullptr, gPedantic = nullptr;

// Row-major P = M N is column-major P^T = N^T M^T: cuBLAS's A is our N.
void cublasRun(cublasHandle_t h, const float* M, const float* N, float* P, int j, int k, int l) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, l, j, k, &one, N, l, M, k, &zero, P, l));
}
void launchCublas(const float* M, const float* N, float* P, int j, int k, int l) { cublasRun(gDefault, M, N, P, j, k, l); }
void launchCublasPedantic(const float* M, const float* N, float* P, int j, int k, int l) {
  cublasRun(gPedantic, M, N, P, j, k, l);
}

struct Shape {
  int j, k, l;
};
std::string shapeName(const Shape& s) {
  return std::to_string(s.j) + "x" + std::to_string(s.k) + "x" + std::to_string(s.l);
}

// ---- inputs and references ----------------------------------------------

__global__ void benchFillUniform(float* p, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned long long x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 32;
    p[i] = static_cast<float>(static_cast<double>(x >> 40) / double(1ull << 24) * 2.0 - 1.0);  // [-1, 1)
  }
}

// float64 reference of P and of |M| |N| on the GPU (timing shapes only).
constexpr int kRefTile = 16;
__global__ void benchReference64(const float* M, const float* N, double* ref, double* absRef, int j, int k, int l) {
  __shared__ double Ms[kRefTile][kRefTile + 1], Ns[kRefTile][kRefTile + 1];
  const int row = blockIdx.y * kRefTile + threadIdx.y, col = blockIdx.x * kRefTile + threadIdx.x;
  double s = 0.0, a = 0.0;
  for (int t0 = 0; t0 < k; t0 += kRefTile) {
    const int mc = t0 + threadIdx.x, nr = t0 + threadIdx.y;
    Ms[threadIdx.y][threadIdx.x] = (row < j && mc < k) ? M[size_t(row) * k + mc] : 0.0;
    Ns[threadIdx.y][threadIdx.x] = (nr < k && col < l) ? N[size_t(nr) * l + col] : 0.0;
    __syncthreads();
    for (int t = 0; t < kRefTile; ++t) {
      const double x = Ms[threadIdx.y][t], y = Ns[t][threadIdx.x];
      s = fma(x, y, s);
      a = fma(fabs(x), fabs(y), a);
    }
    __syncthreads();
  }
  if (row < j && col < l) {
    ref[size_t(row) * l + col] = s;
    absRef[size_t(row) * l + col] = a;
  }
}

struct CheckCounters {
  unsigned long long bad;
  unsigned long long nan;
  unsigned int maxRatioBits;  // float bits of max |P - ref| / tol (non-negative: order as ints)
  long long firstBad;
};

__global__ void benchCompare(const float* P, const double* ref, const double* absRef, size_t n, double tolScale,
                              CheckCounters* out) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const double p = P[i];
    const double tol = tolScale * absRef[i];
    const double err = fabs(p - ref[i]);
    if (!(err <= tol)) {  // NaN fails too
      atomicAdd(&out->bad, 1ull);
      if (isnan(p)) atomicAdd(&out->nan, 1ull);
      atomicMin(reinterpret_cast<unsigned long long*>(&out->firstBad), static_cast<unsigned long long>(i));
    }
    const float ratio = tol > 0 ? static_cast<float>(err / tol) : (err == 0 ? 0.f : INFINITY);
    if (!isnan(ratio)) atomicMax(&out->maxRatioBits, __float_as_uint(ratio));
  }
}

void cpuReference(const std::vector<float>& M, const std::vector<float>& N, std::vector<double>& ref,
                  std::vector<double>& absRef, int j, int k, int l, int rowBegin = 0, int rowEnd = -1) {
  if (rowEnd < 0) rowEnd = j;
  const int workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      std::vector<double> s(l), a(l);
      for (int r = rowBegin + w; r < rowEnd; r += workers) {
        std::fill(s.begin(), s.end(), 0.0);
        std::fill(a.begin(), a.end(), 0.0);
        for (int t = 0; t < k; ++t) {
          const double x = M[size_t(r) * k + t], ax = std::fabs(x);
          const float* nrow = &N[size_t(t) * l];
          for (int c = 0; c < l; ++c) {
            s[c] += x * nrow[c];
            a[c] += ax * std::fabs(double(nrow[c]));
          }
        }
        std::copy(s.begin(), s.end(), ref.begin() + size_t(r - rowBegin) * l);
        std::copy(a.begin(), a.end(), absRef.begin() + size_t(r - rowBegin) * l);
      }
    });
  }
  for (auto& t : pool) t.join();
}

// Device buffers for one shape: inputs, output, references.
struct Problem {
  Shape s;
  float *M = nullptr, *N = nullptr, *P = nullptr;
  double *ref = nullptr, *absRef = nullptr;
  CheckCounters* counters = nullptr;
  size_t outN() const { return size_t(s.j) * s.l; }
  void alloc(const Shape& shape) {
    s = shape;
    CUDA_OK(cudaMalloc(&M, size_t(s.j) * s.k * sizeof(float)));
    CUDA_OK(cudaMalloc(&N, size_t(s.k) * s.l * sizeof(float)));
    CUDA_OK(cudaMalloc(&P, outN() * sizeof(float)));
    CUDA_OK(cudaMalloc(&ref, outN() * sizeof(double)));
    CUDA_OK(cudaMalloc(&absRef, outN() * sizeof(double)));
    CUDA_OK(cudaMalloc(&counters, sizeof(CheckCounters)));
  }
  void release() {
    cudaFree(M), cudaFree(N), cudaFree(P), cudaFree(ref), cudaFree(absRef), cudaFree(counters);
  }
};

unsigned long long gSeed = 0;

// Fresh inputs and their float64 reference. CPU reference unless onGpu.
void prepare(Problem& pr, bool onGpu) {
  const Shape s = pr.s;
  if (!onGpu) {
    std::mt19937_64 rng(++gSeed * 7919 + 17);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> M(size_t(s.j) * s.k), N(size_t(s.k) * s.l);
    for (auto& x : M) x = u(rng);
    for (auto& x : N) x = u(rng);
    std::vector<double> ref(pr.outN()), absRef(pr.outN());
    cpuReference(M, N, ref, absRef, s.j, s.k, s.l);
    CUDA_OK(cudaMemcpy(pr.M, M.data(), M.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(pr.N, N.data(), N.size() * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(pr.ref, ref.data(), ref.size() * sizeof(double), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(pr.absRef, absRef.data(), absRef.size() * sizeof(double), cudaMemcpyHostToDevice));
    return;
  }
  benchFillUniform<<<1024, 256>>>(pr.M, size_t(s.j) * s.k, ++gSeed * 0x1234567ull);
  benchFillUniform<<<1024, 256>>>(pr.N, size_t(s.k) * s.l, ++gSeed * 0x7654321ull);
  const dim3 grid((s.l + kRefTile - 1) / kRefTile, (s.j + kRefTile - 1) / kRefTile);
  benchReference64<<<grid, dim3(kRefTile, kRefTile)>>>(pr.M, pr.N, pr.ref, pr.absRef, s.j, s.k, s.l);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  // The GPU reference itself, against the CPU at a few rows.
  std::vector<float> M(size_t(s.j) * s.k), N(size_t(s.k) * s.l);
  CUDA_OK(cudaMemcpy(M.data(), pr.M, M.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(N.data(), pr.N, N.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int r : {0, s.j / 3, s.j - 1}) {
    std::vector<double> cref(s.l), cabs(s.l), gref(s.l);
    cpuReference(M, N, cref, cabs, s.j, s.k, s.l, r, r + 1);
    CUDA_OK(cudaMemcpy(gref.data(), pr.ref + size_t(r) * s.l, s.l * sizeof(double), cudaMemcpyDeviceToHost));
    for (int c = 0; c < s.l; ++c)
      if (std::fabs(gref[c] - cref[c]) > 1e-9 * (cabs[c] + 1.0)) {
        std::fprintf(stderr, "GPU float64 reference disagrees with the CPU at (%d, %d): %.17g vs %.17g\n", r, c,
                     gref[c], cref[c]);
        std::exit(3);
      }
  }
}

struct CheckResult {
  bool launched = true;
  unsigned long long bad = 0, nan = 0;
  long long firstBad = -1;
  float maxRatio = 0;
  std::string error;
  bool ok() const { return launched && bad == 0; }
};

CheckResult check(const Variant& v, Problem& pr) {
  CheckResult r;
  const Shape s = pr.s;
  CUDA_OK(cudaMemset(pr.P, 0xFF, pr.outN() * sizeof(float)));  // all-ones bits: NaN
  v.launch(pr.M, pr.N, pr.P, s.j, s.k, s.l);
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    r.launched = false;
    r.error = cudaGetErrorName(e);
    std::fprintf(stderr, "%s %s: %s\n", v.name, shapeName(s).c_str(), r.error.c_str());
    std::exit(4);  // the context may be unusable
  }
  CheckCounters c0{0, 0, 0, 0x7FFFFFFFFFFFFFFFll};
  CUDA_OK(cudaMemcpy(pr.counters, &c0, sizeof(c0), cudaMemcpyHostToDevice));
  const double tolScale = std::sqrt(double(s.k)) * 16.0 * std::ldexp(1.0, -24);
  benchCompare<<<1024, 256>>>(pr.P, pr.ref, pr.absRef, pr.outN(), tolScale, pr.counters);
  CUDA_OK(cudaGetLastError());
  CheckCounters c;
  CUDA_OK(cudaMemcpy(&c, pr.counters, sizeof(c), cudaMemcpyDeviceToHost));
  r.bad = c.bad;
  r.nan = c.nan;
  r.firstBad = c.bad ? c.firstBad : -1;
  std::memcpy(&r.maxRatio, &c.maxRatioBits, sizeof(float));
  if (c.bad) {
    std::printf("  FAIL %-24s %-16s %llu wrong (%llu NaN), first at (%lld, %lld)\n", v.name, shapeName(s).c_str(),
                c.bad, c.nan, c.firstBad / s.l, c.firstBad % s.l);
  }
  return r;
}

// ---- timing ----------------------------------------------------------------

struct Timing {
  std::vector<float> ms;
  float median() const {
    std::vector<float> v = ms;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
  }
};

void* gFlush = nullptr;
constexpr size_t kFlushBytes = size_t(256) << 20;

float timeOnce(const Variant& v, Problem& pr, cudaEvent_t a, cudaEvent_t b, int salt) {
  CUDA_OK(cudaMemsetAsync(gFlush, salt & 0x7F, kFlushBytes));
  CUDA_OK(cudaEventRecord(a));
  v.launch(pr.M, pr.N, pr.P, pr.s.j, pr.s.k, pr.s.l);
  CUDA_OK(cudaEventRecord(b));
  CUDA_OK(cudaEventSynchronize(b));
  CUDA_OK(cudaGetLastError());
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = s.find(',', p);
    const std::string item = s.substr(p, q == std::string::npos ? std::string::npos : q - p);
    if (!item.empty()) out.push_back(item);
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string only;
  bool tune = true, sweep = true, timing = true;
  int rounds = 3, reps = 5;
  Shape oneCase{0, 0, 0};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--no-tune") tune = false;
    else if (a == "--skip-sweep") sweep = false;
    else if (a == "--skip-time") timing = false;
    else if (a == "--rounds" && i + 1 < argc) rounds = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--case" && i + 3 < argc) {
      oneCase = {std::atoi(argv[i + 1]), std::atoi(argv[i + 2]), std::atoi(argv[i + 3])};
      i += 3;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }

  std::vector<Variant> variants = {
      {"01_block_tiling", launchLadder01}, {"02_register_tiling", launchLadder02},
      {"03_vectorized", launchLadder03},   {"04_transposed", launchLadder04},
      {"05_double_buffered", launchLadder05}, {"06_warp_tiling", launchLadder06},
      {"reference", launchReference},
  };
#ifdef CHALLENGE_ALT_NAME
  variants.push_back({CHALLENGE_ALT_NAME, launchReferenceAlt});
#endif
  if (tune)
    for (int i = 0; i < kTuneVariantCount; ++i) variants.push_back(kTuneVariants[i]);
  if (!only.empty()) {
    const auto names = splitList(only);
    std::vector<Variant> kept;
    for (const auto& v : variants)
      if (std::find(names.begin(), names.end(), v.name) != names.end()) kept.push_back(v);
    variants = kept;
  }

  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));

  // One shape under compute-sanitizer: no cuBLAS, no timing.
  if (oneCase.j > 0) {
    Problem pr;
    pr.alloc(oneCase);
    prepare(pr, false);
    int failed = 0;
    for (const auto& v : variants) {
      const CheckResult r = check(v, pr);
      std::printf("%-24s %-12s %s (max err/tol %.3f)\n", v.name, shapeName(oneCase).c_str(), r.ok() ? "ok" : "WRONG",
                  r.maxRatio);
      failed += !r.ok();
    }
    pr.release();
    return failed ? 1 : 0;
  }

  CUBLAS_OK(cublasCreate(&gDefault));
  CUBLAS_OK(cublasSetMathMode(gDefault, CUBLAS_DEFAULT_MATH));
  CUBLAS_OK(cublasCreate(&gPedantic));
  CUBLAS_OK(cublasSetMathMode(gPedantic, CUBLAS_PEDANTIC_MATH));
  int cublasVersion = 0;
  CUBLAS_OK(cublasGetVersion(gDefault, &cublasVersion));
  std::printf("device: %s, %d SMs, L2 %d MB, cuBLAS %d\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20,
              cublasVersion);
  std::vector<Variant> all = {{"cublas_sgemm", launchCublas}, {"cublas_pedantic", launchCublasPedantic}};
  all.insert(all.end(), variants.begin(), variants.end());

  const char* outDir = std::getenv("OUT");
  // name -> shape -> result, for the table.
  struct Row {
    std::string variant, shape;
    float medianMs = 0, minMs = 0, maxMs = 0;
    double gflops = 0;
    bool correct = true;
    int sweepFailures = 0;
    std::vector<float> ms;
  };
  std::vector<int> sweepFailures(all.size(), 0);
  std::vector<float> sweepMaxRatio(all.size(), 0.f);

  if (sweep) {
    std::vector<Shape> shapes = {{1, 1, 1},       {1, 17, 1000},    {17, 33, 65},     {15, 32, 63},    {15, 63, 32},
                                 {32, 15, 63},    {32, 63, 15},     {63, 15, 32},     {63, 32, 15},    {16, 1, 16},
                                 {47, 31, 1},     {300, 1, 2},      {1, 100, 1},      {2, 300, 3},     {257, 129, 65},
                                 {500, 7, 300},   {128, 96, 160},   {129, 257, 33},   {64, 64, 64},    {1000, 1, 17},
                                 {17, 33, 9},     {516, 132, 260},  {1000, 1000, 1000}, {1023, 1025, 1027},
                                 {777, 2049, 1283}, {2050, 515, 1030}, {1, 4096, 4096}, {4096, 4096, 1}};
    FILE* csv = nullptr;
    if (outDir) csv = std::fopen((std::string(outDir) + "/challenge_sweep.csv").c_str(), "w");
    if (csv) std::fprintf(csv, "variant,j,k,l,ok,wrong,nan,max_err_over_tol\n");
    std::printf("correctness sweep: %zu shapes x %zu variants\n", shapes.size(), all.size());
    for (const Shape& s : shapes) {
      Problem pr;
      pr.alloc(s);
      prepare(pr, false);
      for (size_t v = 0; v < all.size(); ++v) {
        const CheckResult r = check(all[v], pr);
        sweepFailures[v] += !r.ok();
        sweepMaxRatio[v] = std::max(sweepMaxRatio[v], r.maxRatio);
        if (csv)
          std::fprintf(csv, "%s,%d,%d,%d,%d,%llu,%llu,%.4f\n", all[v].name, s.j, s.k, s.l, int(r.ok()), r.bad, r.nan,
                       r.maxRatio);
      }
      pr.release();
    }
    if (csv) std::fclose(csv);
    for (size_t v = 0; v < all.size(); ++v)
      std::printf("  %-26s %s (max err/tol %.3f)\n", all[v].name,
                  sweepFailures[v] ? (std::to_string(sweepFailures[v]) + " shapes WRONG").c_str() : "all shapes ok",
                  sweepMaxRatio[v]);
  }

  std::vector<Row> rows;
  if (timing) {
    CUDA_OK(cudaMalloc(&gFlush, kFlushBytes));
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    for (const Shape s : {Shape{4096, 4096, 4096}, Shape{2048, 4096, 8192}}) {
      Problem pr;
      pr.alloc(s);
      prepare(pr, true);
      std::vector<Row> shapeRows(all.size());
      for (size_t v = 0; v < all.size(); ++v) {
        shapeRows[v].variant = all[v].name;
        shapeRows[v].shape = shapeName(s);
        shapeRows[v].correct = check(all[v], pr).ok();
        shapeRows[v].sweepFailures = sweepFailures[v];
        for (int w = 0; w < 2; ++w) timeOnce(all[v], pr, a, b, w);  // warm-up
      }
      // Rounds interleave the variants, so that a drift of the clock or
      // temperature spreads over all of them.
      for (int r = 0; r < rounds; ++r)
        for (size_t v = 0; v < all.size(); ++v)
          for (int i = 0; i < reps; ++i) shapeRows[v].ms.push_back(timeOnce(all[v], pr, a, b, r * reps + i));
      const double flop = 2.0 * s.j * double(s.k) * s.l;
      for (auto& row : shapeRows) {
        Timing t{row.ms};
        row.medianMs = t.median();
        row.minMs = *std::min_element(row.ms.begin(), row.ms.end());
        row.maxMs = *std::max_element(row.ms.begin(), row.ms.end());
        row.gflops = flop / (row.medianMs * 1e-3) / 1e9;
        rows.push_back(row);
      }
      pr.release();
    }
    if (outDir) {
      FILE* csv = std::fopen((std::string(outDir) + "/challenge_times.csv").c_str(), "w");
      if (csv) {
        std::fprintf(csv, "variant,shape,median_ms,min_ms,max_ms,gflops,correct,times_ms\n");
        for (const auto& r : rows) {
          std::fprintf(csv, "%s,%s,%.4f,%.4f,%.4f,%.1f,%d,", r.variant.c_str(), r.shape.c_str(), r.medianMs, r.minMs,
                       r.maxMs, r.gflops, int(r.correct));
          for (size_t i = 0; i < r.ms.size(); ++i) std::fprintf(csv, "%s%.4f", i ? " " : "", r.ms[i]);
          std::fprintf(csv, "\n");
        }
        std::fclose(csv);
      }
    }
    std::printf("\n%-26s %-16s %10s %10s %9s %8s  %s\n", "variant", "shape (jxkxl)", "median ms", "GFLOP/s", "% cuBLAS",
                "spread", "correct");
    for (const auto& r : rows) {
      double base = 0;
      for (const auto& q : rows)
        if (q.variant == "cublas_sgemm" && q.shape == r.shape) base = q.gflops;
      const bool ok = r.correct && r.sweepFailures == 0;
      std::printf("%-26s %-16s %10.3f %10.0f %8.1f%% %7.1f%%  %s\n", r.variant.c_str(), r.shape.c_str(), r.medianMs,
                  r.gflops, 100.0 * r.gflops / base, 100.0 * (r.maxMs - r.minMs) / r.medianMs,
                  ok ? (sweep ? "ok (sweep + this shape)" : "ok (this shape)") : "WRONG");
    }
  }
  cublasDestroy(gDefault);
  cublasDestroy(gPedantic);
  for (size_t v = 0; v < all.size(); ++v)
    if (sweepFailures[v]) return 1;
  for (const auto& r : rows)
    if (!r.correct) return 1;
  return 0;
}
