#include "aegis/status.h"

#include <cstdio>

#include "aegis/event_log.h"
#include "aegis/run_state.h"
#include "train/skip_windows.h"

namespace zaya::aegis {

namespace {

std::string line(const char* label, const std::string& value) {
  char b[32];
  std::snprintf(b, sizeof b, "%-12s", label);
  return b + value + "\n";
}

std::string num(const char* format, double x) {
  char b[64];
  std::snprintf(b, sizeof b, format, x);
  return b;
}

}  // namespace

std::string format_status(const std::string& run_dir) {
  const RunState s = load_state(run_dir);
  const double now = unix_now();
  const double wall = s.wall_s(now);
  std::string out = "aegis status: " + run_dir + "\n";
  out += line("outcome", s.outcome + (s.cause.empty() ? "" : " (" + s.cause + ")"));
  out += line("last step", std::to_string(s.last_step));
  out += line("attempts", std::to_string(s.attempts) + " (" + std::to_string(s.restarts_used) +
                              " restarts of " + std::to_string(s.max_restarts) + " allowed)");
  for (const auto& f : s.faults)
    out += line("fault", "after step " + std::to_string(f.value("step", 0)) + ": " +
                             f.value("kind", "") + " -> " + f.value("response", "") + ": " +
                             f.value("cause", ""));
  for (const auto& r : s.recoveries)
    out += line("recovery", r.value("fault", "") + ": " + num("%.2f", r.value("recovery_s", 0.0)) +
                                " s from the fault to the first new step (detection " +
                                num("%.2f", r.value("detect_s", 0.0)) + " s, back-off " +
                                num("%.2f", r.value("backoff_s", 0.0)) + " s)");
  const SkipWindows skipped = SkipWindows::load(run_dir);
  for (const SkipWindow& w : skipped.windows())
    out += line("skipped", "samples [" + std::to_string(w.begin) + ", " + std::to_string(w.end) +
                               ") (" + w.reason + ")");
  for (const std::string& h : s.bad_hosts) out += line("bad host", h);
  for (const auto& st : s.stragglers)
    out += line("straggler", "rank " + std::to_string(st.value("rank", 0)) + " on " +
                                 st.value("host", "") + " from step " +
                                 std::to_string(st.value("step", 0)));
  out += line("downtime", num("%.2f s", s.downtime_s));
  out += line("wall time", num("%.2f s", wall) + (s.ended_at > 0 ? "" : " (still running)"));
  out += line("useful", num("%.2f s of step time", s.useful_step_s));
  out += line("goodput", num("%.1f %%", wall > 0 ? 100 * s.useful_step_s / wall : 0.0) +
                             " (useful step time / wall time)");
  out += line("events", events_path(run_dir) + " (" +
                            std::to_string(read_events(events_path(run_dir)).size()) + ")");
  return out;
}

}  // namespace zaya::aegis
