// Heartbeats: how a training rank tells the Aegis supervisor (src/aegis/) that it is alive and
// how its steps go. Each beat replaces OUT/heartbeat/rank-RRRRR.json (written beside and renamed,
// so a reader never sees half a file) and appends the same record as one line to
// OUT/heartbeat/rank-RRRRR.jsonl, which the supervisor tails so that it sees every step (a NaN
// loss at one step must not slip between two polls). Both are a few hundred bytes per step.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace zaya {

// What a heartbeat reports: a run started (step: the resumed step), a finished step, a checkpoint
// being written, or the run done. "start", "step", "checkpoint", "done" in the files.
enum class BeatPhase { kStart, kStep, kCheckpoint, kDone };
const char* beat_phase_name(BeatPhase phase);

struct Heartbeat {
  int rank = 0;
  int64_t step = 0;  // optimizer steps done
  double loss = 0;   // non-finite losses travel as JSON null
  double grad_norm = 0;
  // This rank's own time for the step. With several ranks, leave out time spent waiting for the
  // others in collectives, or every rank shows the slowest one's time and stragglers are hidden.
  double step_time_s = 0;
  // The global sample-index range [sample_begin, sample_end) the step consumed.
  int64_t sample_begin = 0, sample_end = 0;
  BeatPhase phase = BeatPhase::kStep;
  // Filled in by HeartbeatWriter::beat.
  std::string host;
  int64_t pid = 0;
  double time = 0;  // unix seconds
};

nlohmann::json heartbeat_to_json(const Heartbeat& hb);
// `where` names the source (file and line) in error messages.
Heartbeat heartbeat_from_json(const nlohmann::json& j, const std::string& where);

std::string heartbeat_dir(const std::string& out_dir);                     // OUT/heartbeat
std::string heartbeat_history_path(const std::string& out_dir, int rank);  // .../rank-RRRRR.jsonl

class HeartbeatWriter {
 public:
  HeartbeatWriter(const std::string& out_dir, int rank);
  void beat(const Heartbeat& hb);  // hb.rank, host, pid and time are set here
  // Shorthands: a finished step; a phase change (start, checkpoint, done) at `step` steps done
  // and global sample index g.
  void beat_step(int64_t step, double loss, double grad_norm, double step_time_s,
                 int64_t sample_begin, int64_t sample_end);
  void beat_phase(BeatPhase phase, int64_t step, int64_t g);

 private:
  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  int rank_;
  std::string latest_path_, host_;
  std::unique_ptr<std::FILE, CloseFile> history_;
};

}  // namespace zaya
