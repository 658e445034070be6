// SIGINT (Ctrl-C; what mpirun sends its ranks on Ctrl-C is SIGTERM), SIGTERM (Slurm before a time
// limit or preemption, a scheduler's stop) and SIGUSR1 (`sbatch --signal=USR1@T`) all ask a
// training run to stop cleanly: finish the current step, save a checkpoint, write the outputs,
// exit 0. The ranks agree on it at the end of every step (train/trainer.cpp), so a signal to any
// one rank stops all of them at the same step. A second SIGINT stops at once (the checkpoints
// already written stay valid).
#pragma once

#include <signal.h>

#include <array>
#include <string>

namespace zaya {

// Installs the stop handlers for its lifetime and restores the previous ones.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // A stop was asked of this process since the handlers were installed.
  bool requested() const;
  // The signal's name ("SIGTERM"), or "a signal to another rank" when none came here.
  std::string name() const;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGUSR1};
  std::array<struct sigaction, 3> previous_{};
};

}  // namespace zaya
