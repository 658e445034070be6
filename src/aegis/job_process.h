// The supervised job as a process group: started with setsid (so one signal reaches mpirun and
// every rank it started), its stdout and stderr merged into one pipe that the supervisor reads
// line by line, stopped with SIGTERM to the group and SIGKILL after a grace period.
#pragma once

#include <sys/types.h>

#include <csignal>

#include <optional>
#include <string>
#include <vector>

namespace zaya::aegis {

class JobProcess {
 public:
  // Starts argv[0] (looked up in PATH) with the current environment plus `extra_env` (NAME=VALUE).
  JobProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env);
  ~JobProcess();  // kills the group if it still runs
  JobProcess(const JobProcess&) = delete;
  JobProcess& operator=(const JobProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Complete output lines that arrive within timeout_s (returns early when some do).
  std::vector<std::string> read_lines(double timeout_s);
  // The rest of the output once the job has exited (a trailing partial line included).
  std::vector<std::string> drain();
  // True once the job's leader process has exited (reaps it; see exit_status()).
  bool poll_exit();
  bool exited() const { return exited_; }
  bool succeeded() const;
  std::string describe_exit() const;  // "exit code 1", "signal 9 (SIGKILL)"
  // first_signal (SIGTERM, or SIGINT for the trainer's save-and-exit) to the group; SIGKILL
  // after grace_s. Returns what it took, e.g. "SIGTERM" or "SIGKILL after 15 s grace".
  std::string stop(double grace_s, int first_signal = SIGTERM);

 private:
  void kill_group(int sig) const;
  // Reads what arrives within timeout_s into partial_; false when nothing came.
  bool pump(double timeout_s);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool exited_ = false;
  int wait_status_ = 0;
  std::string partial_;  // output after the last newline
};

}  // namespace zaya::aegis
