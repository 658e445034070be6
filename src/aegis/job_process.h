// The supervised job as a process group: started with setsid (so one signal reaches mpirun and
// every rank it started), its stdout and stderr merged into one pipe that the supervisor reads
// line by line (lines cut at kMaxRuleLineBytes, line_splitter.h), stopped with SIGTERM to the
// group and SIGKILL after a grace period.
// The job never outlives the supervisor, even one killed by SIGKILL: the job's leader dies with
// it (PR_SET_PDEATHSIG), and a guardian process kills the whole group (ranks, helpers) once the
// supervisor's end of a pipe closes, which the kernel does however the supervisor dies.
#pragma once

#include <sys/types.h>

#include <csignal>

#include <optional>
#include <string>
#include <vector>

#include "aegis/line_splitter.h"
#include "core/error.h"

namespace zaya::aegis {

// The launch command could not be executed at all (not found, not executable): retrying cannot
// help. what(): "cannot execute 'CMD': REASON".
class LaunchError : public Error {
 public:
  using Error::Error;
};

class JobProcess {
 public:
  // Starts argv[0] (looked up in PATH) with the current environment plus `extra_env` (NAME=VALUE).
  // Throws LaunchError when exec fails.
  JobProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env);
  ~JobProcess();  // kills the group if it still runs
  JobProcess(const JobProcess&) = delete;
  JobProcess& operator=(const JobProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Complete output lines that arrive within timeout_s (returns early when some do).
  std::vector<OutputLine> read_lines(double timeout_s);
  // The rest of the output once the job has exited (a trailing partial line included).
  std::vector<OutputLine> drain();
  // True once the job's leader process has exited (reaps it; see exit_status()).
  bool poll_exit();
  bool exited() const { return exited_; }
  bool succeeded() const;
  std::string describe_exit() const;  // "exit code 1", "signal 9 (SIGKILL)"
  // first_signal (SIGTERM, or SIGINT for the trainer's save-and-exit) to the ranks; SIGKILL to
  // the whole job after grace_s. `ranks`: the job's training processes on this host (their
  // heartbeats' pids), which alone get the first signal: the others learn of the stop when the
  // ranks agree on it at the step's end, while a launcher's daemons and agents (orted, ssh) live
  // on until the ranks have saved (signalled, they end the job at once). Pids that are not the
  // job's are ignored; with none, every process of the job but a launcher leader gets it.
  // Returns what it took, e.g. "SIGTERM" or "SIGKILL after 15 s grace".
  std::string stop(double grace_s, int first_signal = SIGTERM,
                   const std::vector<pid_t>& ranks = {});

 private:
  void kill_group(int sig) const;
  void start_guardian();
  void end_guardian();  // once the group is dead: its id may be reused from then on
  // Reads what arrives within timeout_s (a bounded amount) into lines_; false when nothing came.
  bool pump(double timeout_s);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  pid_t guardian_pid_ = -1;
  int guardian_fd_ = -1;  // the write end the guardian watches; only this process holds it
  bool exited_ = false;
  int wait_status_ = 0;
  LineSplitter splitter_;
  std::vector<OutputLine> lines_;  // split but not yet returned
};

}  // namespace zaya::aegis
