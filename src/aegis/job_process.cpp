#include "aegis/job_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "aegis/log_rules.h"
#include "core/clock.h"

extern char** environ;

namespace zaya::aegis {

namespace {

// The processes of a session other than its leader (the job is a session leader).
std::vector<pid_t> session_members(pid_t session) {
  std::vector<pid_t> members;
  DIR* proc = ::opendir("/proc");
  if (!proc) return members;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == long(session)) continue;
    char path[64], stat[512];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t n = ::read(fd, stat, sizeof stat - 1);
    ::close(fd);
    if (n <= 0) continue;
    stat[n] = '\0';
    // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
    const char* after = std::strrchr(stat, ')');
    char state = 0;
    long ppid = 0, pgrp = 0, sid = 0;
    if (after && std::sscanf(after + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &sid) == 4 &&
        sid == long(session))
      members.push_back(pid_t(pid));
  }
  ::closedir(proc);
  return members;
}

// Signals the job's processes: its process group and every other process of its session. A
// launcher's children may sit in process groups of their own (Open MPI's mpirun puts each local
// rank in one): signalling the group alone would reach mpirun but not the ranks, and a rank left
// behind, orphaned, is continued by the kernel (SIGHUP, SIGCONT) and runs on beside the restarted
// job, writing into the same run directory. With `spare_leader`, a leader that has other
// processes (a launcher, a wrapper) is left out: the ranks stop on their own (zaya train finishes
// its step and saves, the ranks agreeing on the step) and the launcher ends with them; signalled
// too, mpirun would kill its ranks before they save.
void signal_session(pid_t session, int sig, bool spare_leader = false) {
  const std::vector<pid_t> members = session_members(session);
  if (!(spare_leader && !members.empty())) ::kill(-session, sig);  // ESRCH is fine
  for (const pid_t p : members) ::kill(p, sig);
}

// At most this much output is read per pump, so that a job printing without pause cannot keep
// the supervisor from its other checks or grow the unreturned lines without bound.
constexpr size_t kMaxReadPerPump = 1 << 20;

// Ignores the signals a terminal or a job scheduler sends to the supervisor's process group: the
// guardian must outlive the supervisor to do its work, and only SIGKILL (from the supervisor
// itself, once the job is gone) ends it otherwise.
void ignore_stop_signals() {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::sigaction(sig, &ignore, nullptr);
}

}  // namespace

JobProcess::JobProcess(const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env)
    : splitter_(kMaxRuleLineBytes) {
  ZAYA_CHECK(!argv.empty(), "aegis: no launch command (expected: zaya aegis [options] -- CMD...)");
  // Everything exec needs is built before fork: the child may only make async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const std::string& kv : extra_env) env_strings.push_back(kv);
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& kv : env_strings) envp.push_back(const_cast<char*>(kv.c_str()));
  envp.push_back(nullptr);

  int fds[2], exec_fds[2];
  ZAYA_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "aegis: pipe failed: ", std::strerror(errno));
  // The exec-error pipe: a successful exec closes the child's end (CLOEXEC), so the parent reads
  // end of file; a failed one writes errno first.
  if (::pipe2(exec_fds, O_CLOEXEC) != 0) {
    const int err = errno;
    for (int fd : fds) ::close(fd);
    ZAYA_FAIL("aegis: pipe failed: ", std::strerror(err));
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    const int err = errno;
    for (int fd : {fds[0], fds[1], exec_fds[0], exec_fds[1]}) ::close(fd);
    ZAYA_FAIL("aegis: fork failed: ", std::strerror(err));
  }
  if (pid_ == 0) {
    // Die with the supervisor. If it died before prctl took effect the signal never comes:
    // getppid() then names the reaper instead.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::setsid();  // own session and process group: the supervisor signals the whole group
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::execvpe(args[0], args.data(), envp.data());
    const int err = errno;
    [[maybe_unused]] const ssize_t n = ::write(exec_fds[1], &err, sizeof err);
    ::_exit(127);
  }
  ::close(fds[1]);
  ::close(exec_fds[1]);
  out_fd_ = fds[0];
  int exec_errno = 0;
  ssize_t n;
  while ((n = ::read(exec_fds[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  ::close(exec_fds[0]);
  if (n == ssize_t(sizeof exec_errno)) {
    ::waitpid(pid_, &wait_status_, 0);
    exited_ = true;
    ::close(out_fd_);  // no destructor runs for a constructor that throws
    throw LaunchError("cannot execute '" + argv[0] + "': " + std::strerror(exec_errno));
  }
  ::fcntl(out_fd_, F_SETFL, ::fcntl(out_fd_, F_GETFL) | O_NONBLOCK);
  try {
    start_guardian();
  } catch (const Error&) {
    // No destructor runs for a constructor that throws: take the unguarded job down here.
    kill_group(SIGKILL);
    ::waitpid(pid_, &wait_status_, 0);
    ::close(out_fd_);
    throw;
  }
}

void JobProcess::start_guardian() {
  int fds[2];
  ZAYA_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "aegis: pipe failed: ", std::strerror(errno));
  const pid_t group = pid_;
  guardian_pid_ = ::fork();
  if (guardian_pid_ < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    ZAYA_FAIL("aegis: fork failed: ", std::strerror(err));
  }
  if (guardian_pid_ == 0) {
    ignore_stop_signals();
    // Hold nothing of the supervisor's open: not the job's output pipe, not the write end it
    // watches, not the supervisor's stdout (a reader waiting for its end of file).
    const int devnull = ::open("/dev/null", O_RDWR);
    for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) ::dup2(devnull, fd);
    ::dup2(fds[0], 3);
    ::close_range(4, ~0U, 0);
    char c;
    ssize_t n;
    while ((n = ::read(3, &c, 1)) != 0 && (n > 0 || errno == EINTR)) {
    }
    signal_session(group, SIGKILL);  // end of file: the supervisor is gone
    ::_exit(0);
  }
  ::close(fds[0]);
  guardian_fd_ = fds[1];
}

void JobProcess::end_guardian() {
  if (guardian_pid_ > 0) {
    ::kill(guardian_pid_, SIGKILL);
    ::waitpid(guardian_pid_, nullptr, 0);
    guardian_pid_ = -1;
  }
  if (guardian_fd_ >= 0) ::close(guardian_fd_);
  guardian_fd_ = -1;
}

JobProcess::~JobProcess() {
  if (!exited_) {
    kill_group(SIGKILL);
    ::waitpid(pid_, &wait_status_, 0);
  }
  end_guardian();
  if (out_fd_ >= 0) ::close(out_fd_);
}

bool JobProcess::pump(double timeout_s) {
  if (out_fd_ < 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s));
    return false;
  }
  pollfd p{out_fd_, POLLIN, 0};
  if (::poll(&p, 1, int(timeout_s * 1000)) <= 0) return false;
  char chunk[65536];
  for (size_t total = 0; total < kMaxReadPerPump;) {
    const ssize_t n = ::read(out_fd_, chunk, sizeof chunk);
    if (n > 0) {
      splitter_.feed(std::string_view(chunk, size_t(n)), lines_);
      total += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {  // every writer is gone
      ::close(out_fd_);
      out_fd_ = -1;
    }
    break;  // EAGAIN: open but empty for now
  }
  return true;
}

std::vector<OutputLine> JobProcess::read_lines(double timeout_s) {
  pump(timeout_s);
  return std::exchange(lines_, {});
}

std::vector<OutputLine> JobProcess::drain() {
  // Processes of the group that outlive the leader may hold the pipe open: read for a moment.
  const auto t0 = std::chrono::steady_clock::now();
  while (out_fd_ >= 0 && seconds_since(t0) < 2.0 && pump(0.2)) {
  }
  splitter_.finish(lines_);
  return std::exchange(lines_, {});
}

bool JobProcess::poll_exit() {
  if (exited_) return true;
  const pid_t r = ::waitpid(pid_, &wait_status_, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    kill_group(SIGKILL);  // ranks or helpers the leader left behind
    end_guardian();
  }
  return exited_;
}

bool JobProcess::succeeded() const {
  return exited_ && WIFEXITED(wait_status_) && WEXITSTATUS(wait_status_) == 0;
}

std::string JobProcess::describe_exit() const {
  if (!exited_) return "still running";
  if (WIFEXITED(wait_status_)) return "exit code " + std::to_string(WEXITSTATUS(wait_status_));
  if (WIFSIGNALED(wait_status_)) {
    const int sig = WTERMSIG(wait_status_);
    return "signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  return "wait status " + std::to_string(wait_status_);
}

std::string JobProcess::stop(double grace_s, int first_signal, const std::vector<pid_t>& ranks) {
  if (poll_exit()) return "already exited";
  std::vector<pid_t> targets;
  if (pid_ > 0)
    for (const pid_t p : session_members(pid_))
      if (std::find(ranks.begin(), ranks.end(), p) != ranks.end()) targets.push_back(p);
  if (!targets.empty())
    for (const pid_t p : targets) ::kill(p, first_signal);
  else if (pid_ > 0)
    signal_session(pid_, first_signal, /*spare_leader=*/true);
  const auto t0 = std::chrono::steady_clock::now();
  while (seconds_since(t0) < grace_s) {
    pump(0.05);  // keep reading: a job blocked on a full output pipe could not act on SIGTERM
    if (poll_exit()) return first_signal == SIGINT ? "SIGINT" : "SIGTERM";
  }
  kill_group(SIGKILL);
  ::waitpid(pid_, &wait_status_, 0);
  exited_ = true;
  end_guardian();
  char what[64];
  std::snprintf(what, sizeof what, "SIGKILL after %.3g s grace", grace_s);
  return what;
}

void JobProcess::kill_group(int sig) const {
  if (pid_ > 0) signal_session(pid_, sig);
}

}  // namespace zaya::aegis
