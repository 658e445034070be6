// Fault injection for Aegis tests and drills, configured by the environment variable ZAYA_FAULTS:
// a comma-separated list of items KIND[@STEP][:rank=R][:factor=F], for example
//   ZAYA_FAULTS="kill@7:rank=1,hang@6:rank=0,nan@9,slow:rank=1:factor=3,ckpt_die@10"
//   kill@S      SIGKILL this rank at the start of step S (1-based: after S-1 steps are done)
//   hang@S      sleep forever at the start of step S
//   stop@S      SIGSTOP this rank at the start of step S (the whole process stops, as under a
//               debugger or a frozen host; the other ranks wait in the step's first collective)
//   nan@S       make step S's loss and gradients NaN
//   ckpt_die@S  _exit while writing the checkpoint of step S (rank files written, not yet renamed)
//   slow[@S]    from step S (default 1) on, stretch every step to `factor` times its length (a
//               process's first step is not stretched: there is no previous step to measure)
// rank=R limits an item to one rank (default: every rank). Each item except slow fires at most
// once per run directory: a marker OUT/faults/ITEM.rank-RRRRR is written before it fires, so the
// restarted job gets past it. slow models a degraded host and stays in force. Without ZAYA_FAULTS
// the injector does nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

enum class FaultKind { Kill, Hang, Stop, Nan, CkptDie, Slow };

struct FaultSpec {
  FaultKind kind = FaultKind::Kill;
  int64_t step = 1;
  int rank = -1;  // -1: every rank
  double factor = 1;
  std::string text;  // the item as written, for markers and messages
};

// Strict parser: an error names the offending item and what was expected.
std::vector<FaultSpec> parse_fault_specs(const std::string& text);

class FaultInjector {
 public:
  FaultInjector() = default;  // no faults
  FaultInjector(std::vector<FaultSpec> faults, std::string out_dir, int rank);
  // From ZAYA_FAULTS; no faults when it is unset or empty.
  static FaultInjector from_env(const std::string& out_dir, int rank);

  bool active() const { return !faults_.empty(); }
  void at_step_start(int64_t step);        // kill, hang, slow
  bool loss_fault(int64_t step);           // nan: the caller poisons this step
  void in_checkpoint_write(int64_t step);  // ckpt_die

 private:
  // True when `kind` is due at `step` on this rank and has not fired in this run directory yet;
  // writes its marker first.
  const FaultSpec* claim(FaultKind kind, int64_t step);
  void announce(const FaultSpec& f, const char* what) const;

  std::vector<FaultSpec> faults_;
  std::string out_dir_;
  int rank_ = 0;
  // slow: the previous step's own duration (its start to this start, minus the added sleep).
  std::chrono::steady_clock::time_point last_start_{};
  double last_sleep_s_ = 0;
  int64_t last_step_ = -1;
};

}  // namespace zaya
