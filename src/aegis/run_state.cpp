#include "aegis/run_state.h"

#include <filesystem>

#include "aegis/event_log.h"
#include "core/error.h"
#include "io/text_file.h"

namespace zaya::aegis {

namespace fs = std::filesystem;
using nlohmann::json;

std::string state_path(const std::string& run_dir) {
  return (fs::path(aegis_dir(run_dir)) / "state.json").string();
}

json state_to_json(const RunState& s, double now) {
  const double wall = s.wall_s(now);
  return {{"outcome", s.outcome},
          {"cause", s.cause},
          {"command", s.command},
          {"attempts", s.attempts},
          {"restarts_used", s.restarts_used},
          {"max_restarts", s.max_restarts},
          {"started_at", s.started_at},
          {"updated_at", s.updated_at},
          {"ended_at", s.ended_at},
          {"last_step", s.last_step},
          {"useful_step_s", s.useful_step_s},
          {"downtime_s", s.downtime_s},
          {"wall_s", wall},
          {"goodput", wall > 0 ? s.useful_step_s / wall : 0.0},
          {"faults", s.faults},
          {"recoveries", s.recoveries},
          {"stragglers", s.stragglers},
          {"bad_hosts", s.bad_hosts}};
}

RunState state_from_json(const json& j, const std::string& where) {
  RunState s;
  try {
    s.outcome = j.at("outcome").get<std::string>();
    s.cause = j.at("cause").get<std::string>();
    s.command = j.at("command").get<std::vector<std::string>>();
    s.attempts = j.at("attempts").get<int>();
    s.restarts_used = j.at("restarts_used").get<int>();
    s.max_restarts = j.at("max_restarts").get<int>();
    s.started_at = j.at("started_at").get<double>();
    s.updated_at = j.at("updated_at").get<double>();
    s.ended_at = j.at("ended_at").get<double>();
    s.last_step = j.at("last_step").get<int64_t>();
    s.useful_step_s = j.at("useful_step_s").get<double>();
    s.downtime_s = j.at("downtime_s").get<double>();
    s.faults = j.at("faults");
    s.recoveries = j.at("recoveries");
    s.stragglers = j.at("stragglers");
    s.bad_hosts = j.at("bad_hosts").get<std::vector<std::string>>();
  } catch (const json::exception& e) {
    ZAYA_FAIL(where, ": not an Aegis state file: ", e.what());
  }
  return s;
}

void save_state(const std::string& run_dir, const RunState& s) {
  fs::create_directories(aegis_dir(run_dir));
  write_file_atomically(state_path(run_dir), state_to_json(s, unix_now()).dump(1) + "\n");
}

RunState load_state(const std::string& run_dir) {
  const std::string path = state_path(run_dir);
  ZAYA_CHECK(fs::exists(path), path, " does not exist: is '", run_dir,
             "' a run directory that `zaya aegis --run-dir` supervised?");
  const json j = json::parse(read_text_file(path), nullptr, /*allow_exceptions=*/false);
  ZAYA_CHECK(!j.is_discarded(), path, ": not valid JSON");
  return state_from_json(j, path);
}

}  // namespace zaya::aegis
