// What the supervisor changes on disk and on the command line to recover a run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zaya::aegis {

// Rollback: moves every checkpoint directory of step >= bad_step (complete or not) from
// OUT/ckpt to OUT/ckpt-quarantine, and the run's final outputs (summary.json, model/), written
// after the bad step, to OUT/ckpt-quarantine/final-outputs; never deletes anything (a name taken
// there gets a ".N" suffix). Returns the quarantined paths.
std::vector<std::string> quarantine_checkpoints_from(const std::string& run_dir, int64_t bad_step);

// The launch command with `--resume auto`: appended when absent, replacing the value of an
// existing --resume (a fixed checkpoint would throw away the progress since it).
std::vector<std::string> with_resume_auto(std::vector<std::string> command);
// The launch command with its rank count set to `ranks`: the value of the launcher's -np / -n /
// --np / --ntasks (or --ntasks=N) option, the first one. A restart after a lost node continues
// on fewer ranks (the trainer reshapes its checkpoint). Throws when the command names no count.
std::vector<std::string> with_rank_count(std::vector<std::string> command, int ranks);

// Seconds to wait before restart n (1-based): backoff_s * 2^(n-1), at most cap_s.
double backoff_delay(double backoff_s, int restart, double cap_s);

}  // namespace zaya::aegis
