// The supervisor's state of a run, OUT/aegis/state.json (rewritten atomically after each event):
// outcome, attempts, restarts, the faults and recoveries, bad hosts, stragglers, and the time
// accounting behind `zaya aegis status`:
//   useful_step_s  sum over the steps of the final model of the slowest rank's step time, each
//                  step counted once however often it was redone after a restart;
//   downtime_s     from each fault to the next step the job completes (a restart that fails
//                  again before its first step extends the same stretch);
//   goodput        useful_step_s / wall time of the supervision.
// The skipped data windows themselves live in OUT/skip_windows.json (train/skip_windows.h),
// where the trainer reads them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zaya::aegis {

struct RunState {
  std::string outcome = "running";  // running, completed, stopped, failed, interrupted
  std::string cause;                // why it stopped or failed
  std::vector<std::string> command;
  int attempts = 0, restarts_used = 0, max_restarts = 0;
  double started_at = 0, updated_at = 0, ended_at = 0;  // unix seconds; ended_at 0 while running
  int64_t last_step = 0;
  double useful_step_s = 0, downtime_s = 0;
  nlohmann::json faults = nlohmann::json::array();      // {time, kind, cause, step, response}
  nlohmann::json recoveries = nlohmann::json::array();  // {fault, recovery_s, detect_s}
  nlohmann::json stragglers = nlohmann::json::array();
  std::vector<std::string> bad_hosts;

  double wall_s(double now) const { return (ended_at > 0 ? ended_at : now) - started_at; }
};

std::string state_path(const std::string& run_dir);  // OUT/aegis/state.json
nlohmann::json state_to_json(const RunState& s, double now);
RunState state_from_json(const nlohmann::json& j, const std::string& where);
void save_state(const std::string& run_dir, const RunState& s);
RunState load_state(const std::string& run_dir);  // errors name the file

}  // namespace zaya::aegis
