#include "aegis/job_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "core/error.h"

extern char** environ;

namespace zaya::aegis {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Appends what is readable now; false at end of file.
bool read_available(int fd, std::string& buf) {
  char chunk[65536];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buf.append(chunk, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return !(n == 0);  // EAGAIN: open but empty for now
  }
}

std::vector<std::string> split_complete_lines(std::string& buf) {
  std::vector<std::string> lines;
  size_t start = 0, nl;
  while ((nl = buf.find('\n', start)) != std::string::npos) {
    lines.push_back(buf.substr(start, nl - start));
    start = nl + 1;
  }
  buf.erase(0, start);
  return lines;
}

}  // namespace

JobProcess::JobProcess(const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env) {
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

  int fds[2];
  ZAYA_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "aegis: pipe failed: ", std::strerror(errno));
  pid_ = ::fork();
  ZAYA_CHECK(pid_ >= 0, "aegis: fork failed: ", std::strerror(errno));
  if (pid_ == 0) {
    ::setsid();  // own session and process group: the supervisor signals the whole group
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    ::execvpe(args[0], args.data(), envp.data());
    const char msg[] = "aegis: cannot execute the launch command\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(fds[1]);
  out_fd_ = fds[0];
  ::fcntl(out_fd_, F_SETFL, ::fcntl(out_fd_, F_GETFL) | O_NONBLOCK);
}

JobProcess::~JobProcess() {
  if (!exited_) {
    kill_group(SIGKILL);
    ::waitpid(pid_, &wait_status_, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
}

bool JobProcess::pump(double timeout_s) {
  if (out_fd_ < 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s));
    return false;
  }
  pollfd p{out_fd_, POLLIN, 0};
  if (::poll(&p, 1, int(timeout_s * 1000)) <= 0) return false;
  if (!read_available(out_fd_, partial_)) {
    ::close(out_fd_);  // every writer is gone
    out_fd_ = -1;
  }
  return true;
}

std::vector<std::string> JobProcess::read_lines(double timeout_s) {
  pump(timeout_s);
  return split_complete_lines(partial_);
}

std::vector<std::string> JobProcess::drain() {
  // Processes of the group that outlive the leader may hold the pipe open: read for a moment.
  const auto t0 = std::chrono::steady_clock::now();
  while (out_fd_ >= 0 && seconds_since(t0) < 2.0 && pump(0.2)) {
  }
  std::vector<std::string> lines = split_complete_lines(partial_);
  if (!partial_.empty()) lines.push_back(std::move(partial_));
  partial_.clear();
  return lines;
}

bool JobProcess::poll_exit() {
  if (exited_) return true;
  const pid_t r = ::waitpid(pid_, &wait_status_, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    kill_group(SIGKILL);  // ranks or helpers the leader left behind
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

std::string JobProcess::stop(double grace_s, int first_signal) {
  if (poll_exit()) return "already exited";
  kill_group(first_signal);
  const auto t0 = std::chrono::steady_clock::now();
  while (seconds_since(t0) < grace_s) {
    pump(0.05);  // keep reading: a job blocked on a full output pipe could not act on SIGTERM
    if (poll_exit()) return first_signal == SIGINT ? "SIGINT" : "SIGTERM";
  }
  kill_group(SIGKILL);
  ::waitpid(pid_, &wait_status_, 0);
  exited_ = true;
  char what[64];
  std::snprintf(what, sizeof what, "SIGKILL after %.3g s grace", grace_s);
  return what;
}

void JobProcess::kill_group(int sig) const {
  if (pid_ > 0) ::kill(-pid_, sig);  // ESRCH (group already gone) is fine
}

}  // namespace zaya::aegis
