#include "support.h"

#include <cuda_runtime.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "json_io.h"

namespace tilelab::test {

bool gpu_available() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "tilelab-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s) {
  TempDir io;
  const std::string out_path = (io.path() / "stdout").string();
  const std::string err_path = (io.path() / "stderr").string();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    setpgid(0, 0);  // own process group, so a timeout kills everything it started
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  ProcessResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!r.timed_out) {
    if (WIFEXITED(status)) {
      r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.signaled = true;
      r.signal = WTERMSIG(status);
    }
  }
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

HarnessService::HarnessService() : socket_(dir_.path() / "s") {
  int in[2];
  if (pipe(in) != 0) throw std::runtime_error("pipe failed");
  const std::string tool = (build_dir() / "bin" / "tilelab-harness").string();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in[0], STDIN_FILENO);
    close(in[0]);
    close(in[1]);
    execl(tool.c_str(), tool.c_str(), "--serve-jobs", socket_.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  pid_ = pid;
  stdin_ = in[1];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!std::filesystem::exists(socket_)) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_ || std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("tilelab-harness --serve-jobs did not start");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int HarnessService::stop() {
  if (pid_ < 0) return -1;
  close(stdin_);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

HarnessService::~HarnessService() {
  stop();
}

std::thread put_in_place_after(std::filesystem::path from, std::filesystem::path to, std::chrono::milliseconds delay) {
  return std::thread([=] {
    std::this_thread::sleep_for(delay);
    const auto partial = to.string() + ".partial";
    std::filesystem::copy_file(from, partial);
    std::filesystem::rename(partial, to);
  });
}

CaseFile write_case_file(CaseFile cases, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  cases.result = dir / "result.json";
  for (CaseSpec& c : cases.cases) {
    if (c.output.empty() && !c.timing) c.output = dir / (c.name + ".P.f32");
  }
  cases.path = dir / "cases.json";
  write_json_file(cases.path, case_file_to_json(cases));
  return cases;
}

HarnessRun run_harness(const std::filesystem::path& harness, CaseFile cases, const std::filesystem::path& dir,
                       double timeout_s, bool trusted, const HarnessService* service,
                       const std::vector<std::string>& harness_args) {
  cases = write_case_file(std::move(cases), dir);
  HarnessRun run;
  // Only trusted runs need the build tree: the part tests run without TILELAB_BUILD_DIR.
  auto tool = [] { return (build_dir() / "bin" / "tilelab-harness").string(); };
  std::vector<std::string> launcher{harness.string()};
  launcher.insert(launcher.end(), harness_args.begin(), harness_args.end());
  std::vector<std::string> command;
  if (service != nullptr) {
    command = {tool(), "--via", service->socket().string(), cases.path.string(), "--"};
  } else if (trusted) {
    command = {tool(), cases.path.string(), "--"};
  }
  command.insert(command.end(), launcher.begin(), launcher.end());
  if (service == nullptr && !trusted) command.push_back(cases.path.string());
  run.process = run_process(command, timeout_s);
  if (std::filesystem::exists(cases.result)) {
    try {
      run.result = read_json_file(cases.result);
    } catch (const IoError&) {
      // left empty: the test reports the missing result
    }
  }
  run.cases = std::move(cases);
  return run;
}

CaseSpec make_case(const std::string& name, int j, int k, int l, uint64_t seed, Distribution dist) {
  CaseSpec c;
  c.name = name;
  c.j = j;
  c.k = k;
  c.l = l;
  c.inputs.seed = seed;
  c.inputs.distribution = dist;
  return c;
}

CaseSpec timed_case(const std::string& name, int width, uint64_t seed, uint64_t timing_seed) {
  CaseSpec c = make_case(name, width, width, width, seed);
  c.timing = TimingSpec{};
  c.timing->seed = timing_seed;
  return c;
}

CaseFile one_case(const std::string& part, CaseSpec c) {
  CaseFile f;
  f.part = part;
  f.cases.push_back(std::move(c));
  return f;
}

std::filesystem::path build_dir() {
  const char* dir = std::getenv("TILELAB_BUILD_DIR");
  if (dir == nullptr) throw std::runtime_error("TILELAB_BUILD_DIR is not set (run the tests through ctest)");
  return dir;
}

std::filesystem::path reference(const std::string& part) {
  return build_dir() / "reference" / part;
}

std::filesystem::path probe(const std::string& name) {
  return build_dir() / ("probe_" + name) / "naive";
}

CaseFile two_cases(const std::string& part) {
  CaseFile f;
  f.part = part;
  f.cases.push_back(make_case("first", 17, 17, 17, 1));
  f.cases.push_back(make_case("second", 33, 33, 33, 2));
  return f;
}

}  // namespace tilelab::test
