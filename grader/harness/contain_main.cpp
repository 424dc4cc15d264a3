// tilelab-contain: one run of student code, and everything it starts, ends
// with the run. It links no student code and runs outside the sandbox (as
// the grader's user: root where runs switch users), in front of the
// sandbox's own prefix.
//
// Usage:  tilelab-contain [--report-fd N] -- COMMAND [ARG...]
//
// It becomes a child subreaper and runs COMMAND as its child (the leader).
// Whatever the leader starts, however it detaches (setsid, a double fork,
// daemon()), stays its descendant: an orphan is re-parented here, not to
// init. The run is over when the leader ends, or when SIGTERM, SIGINT or
// SIGHUP arrives (the grader's time limit): then every process below it is
// killed and reaped, again and again until none is left (a fork bomb's
// children come back here as their parents die), for at most a few seconds,
// at a real-time priority where it may take one, so that no bomb outruns it.
// A process group or session cannot escape this, and neither can a process
// that closes its pipes: none of them outlives the run.
//
// With --report-fd, one JSON line goes to that descriptor at the end (it is
// closed in the leader, so the run cannot write there):
//   {"others": n, "others_cpu_ms": t, "left": k}
// others: processes reaped here besides the leader (started by the run and
// not waited for by their parents); others_cpu_ms: their CPU time, user and
// system, with what they waited for themselves; left: processes still there
// when the patience ran out (stuck in the kernel; the grader checks again).
//
// Exit status: the leader's (its exit code, or the same signal), 127 when
// COMMAND cannot be started, 2 for a usage error.
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr auto kPatience = std::chrono::seconds(5);  // for processes that take a while to die (a GPU context)

volatile sig_atomic_t g_stop = 0;

void on_stop(int) { g_stop = 1; }

struct Tally {
  long others = 0;
  double others_cpu_ms = 0;
};

double cpu_ms(const rusage& ru) {
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec * 1e-3; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// Every process below this one, read from /proc in one pass (each pid's
// parent, then the tree from here): after the leader ends, every process of
// the run is one of them.
std::vector<pid_t> descendants() {
  std::vector<std::pair<pid_t, pid_t>> parent_of;  // (pid, ppid)
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {};
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    const std::string path = std::string("/proc/") + entry->d_name + "/stat";
    FILE* stat = std::fopen(path.c_str(), "r");
    if (stat == nullptr) continue;
    char buffer[1024];
    const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, stat);
    std::fclose(stat);
    buffer[n] = '\0';
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    const char* close = std::strrchr(buffer, ')');
    char state = 0;
    long ppid = 0;
    if (close != nullptr && std::sscanf(close + 1, " %c %ld", &state, &ppid) == 2) {
      parent_of.emplace_back(static_cast<pid_t>(pid), static_cast<pid_t>(ppid));
    }
  }
  closedir(proc);
  std::vector<pid_t> found{getpid()};
  for (size_t i = 0; i < found.size(); ++i) {  // breadth first: each found pid's children join the end
    for (const auto& [pid, ppid] : parent_of) {
      if (ppid == found[i]) found.push_back(pid);
    }
  }
  found.erase(found.begin());
  return found;
}

// Reaps every child that has ended, counting it; true when no child is left at all.
bool reap(Tally& tally, pid_t leader, int* leader_status) {
  for (;;) {
    int status = 0;
    rusage ru{};
    const pid_t pid = wait4(-1, &status, WNOHANG, &ru);
    if (pid > 0) {
      if (pid == leader) {
        *leader_status = status;
      } else {
        tally.others += 1;
        tally.others_cpu_ms += cpu_ms(ru);
      }
      continue;
    }
    return pid < 0 && errno == ECHILD;
  }
}

// Kills and reaps everything below this process until nothing is left or the patience runs out;
// returns how many were left. Every process of the tree is killed in each pass, not only this one's
// children: a fork bomb refills the places its killed parents leave faster than one layer a pass ends.
// And this process runs first meanwhile (a real-time priority, where it may take one): a fork bomb whose
// processes each start a session of their own otherwise gets a share of the CPUs each, and this one a
// few per cent of them, until the grader's patience ends first and leaves the bomb running.
long end_all(Tally& tally, pid_t leader, int* leader_status) {
  const sched_param first{1};
  sched_setscheduler(0, SCHED_RR, &first);
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  for (;;) {
    if (reap(tally, leader, leader_status)) return 0;
    const std::vector<pid_t> left = descendants();
    for (pid_t pid : left) kill(pid, SIGKILL);
    if (std::chrono::steady_clock::now() >= deadline) {
      reap(tally, leader, leader_status);
      return static_cast<long>(descendants().size());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(left.empty() ? 1 : 5));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int report_fd = -1;
  int first = 1;
  if (argc > 2 && std::strcmp(argv[1], "--report-fd") == 0) {
    report_fd = std::atoi(argv[2]);
    first = 3;
  }
  if (first >= argc || std::strcmp(argv[first], "--") != 0 || first + 1 >= argc) {
    std::fprintf(stderr, "usage: %s [--report-fd N] -- COMMAND [ARG...]\n", argv[0]);
    return 2;
  }
  char** command = argv + first + 1;
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);  // this process is the grader's, and dumps nothing
  if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    std::fprintf(stderr, "tilelab-contain: cannot become a child subreaper: %s\n", std::strerror(errno));
    return 127;
  }
  struct sigaction stop {};
  stop.sa_handler = on_stop;  // no SA_RESTART: the wait below returns at once
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &stop, nullptr);

  const pid_t leader = fork();
  if (leader < 0) {
    std::fprintf(stderr, "tilelab-contain: fork: %s\n", std::strerror(errno));
    return 127;
  }
  if (leader == 0) {
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_DFL);
    if (report_fd >= 0) close(report_fd);
    execvp(command[0], command);
    std::fprintf(stderr, "cannot run %s: %s\n", command[0], std::strerror(errno));
    _exit(127);
  }

  Tally tally;
  int leader_status = -1;
  bool leader_ended = false;
  while (!leader_ended && !g_stop) {
    int status = 0;
    rusage ru{};
    const pid_t pid = wait4(-1, &status, 0, &ru);
    if (pid == leader) {
      leader_status = status;
      leader_ended = true;
    } else if (pid > 0) {
      tally.others += 1;  // an orphan that ended while the leader still ran
      tally.others_cpu_ms += cpu_ms(ru);
    } else if (errno == ECHILD) {
      break;
    }
  }
  if (!leader_ended) kill(leader, SIGKILL);
  const long left = end_all(tally, leader, &leader_status);

  if (report_fd >= 0) {
    const std::string line = "{\"others\": " + std::to_string(tally.others) +
                             ", \"others_cpu_ms\": " + std::to_string(tally.others_cpu_ms) +
                             ", \"left\": " + std::to_string(left) + "}\n";
    ssize_t written = write(report_fd, line.data(), line.size());
    (void)written;  // the grader reads no report as "nothing known": nothing to do here
    close(report_fd);
  }
  if (leader_status >= 0 && WIFSIGNALED(leader_status)) {
    const int sig = WTERMSIG(leader_status);
    signal(sig, SIG_DFL);
    raise(sig);  // end as the leader ended, so the grader reads the same signal
  }
  if (leader_status >= 0 && WIFEXITED(leader_status)) return WEXITSTATUS(leader_status);
  return 128 + SIGKILL;  // stopped from outside: the grader knows why
}
