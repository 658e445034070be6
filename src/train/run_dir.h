// The rules that keep one run's directory safe from another invocation of zaya train:
//   - a new run (no --resume) starts only in a directory that holds no run: a metrics file, a
//     summary, a model or checkpoints there are another run's, and nothing of it is overwritten;
//   - --resume auto on a finished run does nothing and says so;
//   - --resume auto finds no usable checkpoint: step 0 only when no checkpoint was ever committed
//     there; if committed ones exist but all are damaged it stops, deleting nothing;
//   - a resume keeps what defines the run (model, data, seed, global batch, batch ramp) and may
//     change the optimizer settings and micro-batch only with --allow-changes (the resumed run is
//     then no longer the uninterrupted one's continuation bit for bit); cadence fields (logging,
//     evaluation, checkpoints, retention, samples, max_steps) may change freely.
// docs/run-directories.md states the same for users.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace zaya {

// Throws, naming what it found, when `out_dir` already holds a run.
void refuse_existing_run(const std::string& out_dir);

// The step count of a finished run (summary.json present, not interrupted), or nothing.
std::optional<int64_t> finished_run_steps(const std::string& out_dir);

// True when `ckpt_root` holds at least one committed checkpoint directory (step-N, not a
// step-N.tmp left by an unfinished save), whether or not it is intact.
bool has_committed_checkpoints(const std::string& ckpt_root);

// Compares the config saved in a checkpoint with the config of the resuming run. Throws for a
// change the rules refuse; reports allowed changes through `note`.
void check_resume_config(const nlohmann::json& saved, const nlohmann::json& now,
                         const std::string& checkpoint, bool allow_changes,
                         const std::function<void(const std::string&)>& note);

}  // namespace zaya
