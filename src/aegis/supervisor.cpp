#include "aegis/supervisor.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "aegis/collective_reports.h"
#include "aegis/gpu_health.h"
#include "aegis/recovery.h"
#include "core/error.h"
#include "train/fault_injection.h"

namespace zaya::aegis {

using nlohmann::json;

namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_stop_signal(int) {
  g_interrupted = true;
}

std::string fmt(const char* format, double x) {
  char b[64];
  std::snprintf(b, sizeof b, format, x);
  return b;
}

// Heartbeats and checkpoints are found under --run-dir: a trainer writing elsewhere would look
// hung. Only a visible --out can be compared (a wrapper script may set it itself).
void check_run_dir_matches_out(const std::vector<std::string>& command,
                               const std::string& run_dir) {
  namespace fs = std::filesystem;
  for (size_t i = 0; i < command.size(); ++i) {
    std::string out;
    if (command[i] == "--out" && i + 1 < command.size()) out = command[i + 1];
    if (command[i].rfind("--out=", 0) == 0) out = command[i].substr(6);
    if (out.empty()) continue;
    ZAYA_CHECK(fs::weakly_canonical(out) == fs::weakly_canonical(run_dir),
               "zaya aegis: --run-dir '", run_dir, "' differs from the launch command's --out '",
               out, "'; they must name the same directory");
  }
}

// The job's output passes through to the supervisor's stdout; a line cut by the reader says so.
void echo(const OutputLine& line) {
  std::fwrite(line.text.data(), 1, line.text.size(), stdout);
  if (line.cut)
    std::fprintf(stdout, " [aegis: line cut at %zu bytes, the rest dropped]", kMaxRuleLineBytes);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

// A matched line as the fault's cause quotes it: its beginning only, for a readable event log.
std::string quote(const std::string& line) {
  constexpr size_t kMaxQuote = 500;
  return line.size() <= kMaxQuote ? line : line.substr(0, kMaxQuote) + "...";
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

Supervisor::Supervisor(AegisOptions options)
    : opt_(std::move(options)),
      events_(opt_.run_dir),
      reader_(opt_.run_dir),
      hang_(opt_.hang_factor, opt_.hang_floor_s, opt_.startup_timeout_s),
      stragglers_(opt_.straggler_factor, opt_.straggler_steps) {
  if (!opt_.rules_file.empty()) rules_ = load_log_rules(opt_.rules_file);
  // A bad drill spec would fail every attempt: reject it before the first launch.
  if (const char* faults = std::getenv("ZAYA_FAULTS")) parse_fault_specs(faults);
  check_run_dir_matches_out(opt_.command, opt_.run_dir);
  if (opt_.restart_ranks > 0) with_rank_count(opt_.command, opt_.restart_ranks);  // fails early
  if (!opt_.hostfile.empty()) {  // a bad hostfile or a launcher it cannot steer: at once
    hosts_ = read_hostfile(opt_.hostfile);
    with_rank_count(with_hosts(opt_.command, opt_.hostfile, {}), total_slots(hosts_));
  }
  if (!opt_.node_exporters.empty() || !opt_.gpu_health.empty() || !opt_.health_rules_file.empty()) {
    std::vector<std::unique_ptr<HealthSource>> sources;
    for (const std::string& spec : opt_.node_exporters)
      sources.push_back(node_exporter_from_flag(spec, opt_.health_timeout_s));
    for (const std::string& spec : opt_.gpu_health) sources.push_back(gpu_health_from_flag(spec));
    std::vector<HealthRule> rules;
    if (!opt_.health_rules_file.empty()) rules = load_health_rules(opt_.health_rules_file);
    health_ =
        std::make_unique<HealthWatch>(std::move(sources), std::move(rules), opt_.health_interval_s);
    health_->start(unix_now());  // an unreadable source or an unserved metric: at once
  }
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  hostname_ = host;
  state_.command = opt_.command;
  state_.max_restarts = opt_.max_restarts;
}

bool Supervisor::leave_out_bad_hosts(std::vector<std::string>& command) {
  if (hosts_.empty() || state_.bad_hosts.empty()) return true;
  const std::vector<HostSlots> good = good_hosts(hosts_, state_.bad_hosts);
  const int ranks = total_slots(good);
  if (ranks < opt_.min_ranks) {
    events_.write(
        "relaunch_refused",
        "without the bad hosts the job would run " + std::to_string(ranks) +
            " ranks, fewer than --min-ranks " + std::to_string(opt_.min_ranks),
        {{"bad_hosts", state_.bad_hosts}, {"ranks", ranks}, {"min_ranks", opt_.min_ranks}});
    return false;
  }
  const std::string path = aegis_dir(opt_.run_dir) + "/hostfile";
  write_hostfile(path, good);
  command = with_rank_count(with_hosts(command, path, state_.bad_hosts), ranks);
  std::vector<std::string> names;
  for (const HostSlots& h : good) names.push_back(h.host);
  events_.write("hosts",
                "relaunching on " + join(names, ", ") + " (" + std::to_string(ranks) +
                    " ranks), without " + join(state_.bad_hosts, ", "),
                {{"hosts", names}, {"ranks", ranks}, {"hostfile", path}});
  return true;
}

void Supervisor::save() {
  state_.updated_at = unix_now();
  state_.useful_step_s = 0;
  for (const auto& [step, s] : step_time_s_) state_.useful_step_s += s;
  save_state(opt_.run_dir, state_);
}

int Supervisor::run() {
  g_interrupted = false;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGHUP, on_stop_signal);  // a closed terminal: stop the job rather than orphan it
  state_.started_at = unix_now();
  events_.write("aegis_start", "supervising " + opt_.run_dir + ": " + join(opt_.command, " "),
                {{"run_dir", opt_.run_dir},
                 {"command", opt_.command},
                 {"max_restarts", opt_.max_restarts},
                 {"rules", rules_.size()}});
  std::vector<std::string> command = opt_.command;
  while (true) {
    ++state_.attempts;
    // The previous attempt's heartbeats go to OUT/aegis/heartbeat-attempt-N; stale ones from
    // before this supervision are dropped.
    reader_.clear(state_.attempts == 1
                      ? ""
                      : (std::filesystem::path(aegis_dir(opt_.run_dir)) /
                         ("heartbeat-attempt-" + std::to_string(state_.attempts - 1)))
                            .string());
    latest_.clear();
    stepped_this_attempt_ = false;
    hang_.start_attempt(unix_now());
    collective_reports_.clear();
    std::vector<std::string> env;
    if (!state_.bad_hosts.empty()) env.push_back("ZAYA_BAD_HOSTS=" + join(state_.bad_hosts, ","));
    std::optional<JobProcess> launched;
    try {
      launched.emplace(command, env);
    } catch (const LaunchError& e) {
      // Not found, not executable: every restart would fail the same way.
      std::fprintf(stderr, "aegis: %s\n", e.what());
      events_.write("launch_failed", e.what(),
                    {{"attempt", state_.attempts}, {"command", command}});
      return finish("failed", e.what(), kExitCannotExecute);
    }
    JobProcess& job = *launched;
    events_.write(
        "launch",
        "attempt " + std::to_string(state_.attempts) + ": started pid " + std::to_string(job.pid()),
        {{"attempt", state_.attempts}, {"pid", job.pid()}, {"command", command}});
    save();
    const std::optional<Fault> fault = watch(job);
    if (g_interrupted) {
      // SIGINT first: the trainer finishes its step, saves a checkpoint and exits.
      const std::string how = job.stop(opt_.grace_s, SIGINT, local_ranks());
      for (const OutputLine& line : job.drain()) echo(line);
      return finish("interrupted", "the supervisor was interrupted; job stopped (" + how + ")",
                    kExitInterrupted);
    }
    if (!fault) {
      // A job that exits 0 without a single step behind the run (a wrapper that gave up, a
      // trainer pointed at nothing) did not complete anything; restarting it would do the same.
      if (max_step_seen_ <= 0) {
        const std::string cause =
            "the job exited 0 without completing a training step (no step in " + opt_.run_dir +
            "/heartbeat/; attempt " + std::to_string(state_.attempts) + ")";
        events_.write("no_progress", cause, {{"attempt", state_.attempts}});
        return finish("failed", cause, kExitNoProgress);
      }
      // Resumed at the last step (a crash during the final save): no new step to wait for.
      if (unrecovered_) state_.downtime_s += unix_now() - down_since_;
      return finish("completed", "", 0);
    }
    record_fault(*fault, job);
    if (fault->response == Response::Stop)
      return finish("stopped", fault->cause + "; a stop rule ended the run", kExitStopped);
    if (fault->response == Response::Rollback) roll_back(*fault);
    if (state_.restarts_used >= opt_.max_restarts)
      return finish("failed",
                    "restart budget exhausted (" + std::to_string(state_.restarts_used) + " of " +
                        std::to_string(opt_.max_restarts) +
                        " restarts used); last fault: " + fault->kind + ": " + fault->cause,
                    kExitBudgetExhausted);
    ++state_.restarts_used;
    command = with_resume_auto(command);
    if (opt_.restart_ranks > 0) command = with_rank_count(command, opt_.restart_ranks);
    if (!leave_out_bad_hosts(command))
      return finish("failed",
                    "without the bad hosts (" + join(state_.bad_hosts, ", ") +
                        ") the job would run " +
                        std::to_string(total_slots(good_hosts(hosts_, state_.bad_hosts))) +
                        " ranks, fewer than --min-ranks " + std::to_string(opt_.min_ranks),
                    kExitTooFewRanks);
    const double delay = backoff_delay(opt_.backoff_s, state_.restarts_used, kMaxBackoffS);
    events_.write("restart",
                  "restart " + std::to_string(state_.restarts_used) + " of " +
                      std::to_string(opt_.max_restarts) + " in " + fmt("%.3g", delay) + " s",
                  {{"restart", state_.restarts_used}, {"backoff_s", delay}});
    if (!unrecovered_) down_since_ = fault->fault_time;  // a failed restart extends the downtime
    unrecovered_ = fault;
    unrecovered_->backoff_s = delay;
    save();
    if (!wait_interruptibly(delay))
      return finish("interrupted", "the supervisor was interrupted before a restart",
                    kExitInterrupted);
  }
}

std::optional<Supervisor::Fault> Supervisor::watch(JobProcess& job) {
  while (!g_interrupted) {
    for (const OutputLine& line : job.read_lines(opt_.poll_s))
      if (auto f = on_line(line)) return f;
    double now = unix_now();
    for (const Heartbeat& hb : reader_.read_new())
      if (auto f = on_beat(hb, now)) return f;
    if (auto f = collective_timeout(now, /*job_ended=*/false)) return f;
    if (auto f = on_health(now)) return f;
    if (job.poll_exit()) {
      for (const OutputLine& line : job.drain())
        if (auto f = on_line(line)) return f;
      now = unix_now();
      for (const Heartbeat& hb : reader_.read_new())  // beats written just before the exit
        if (auto f = on_beat(hb, now)) return f;
      if (job.succeeded()) return std::nullopt;
      if (auto f = collective_timeout(now, /*job_ended=*/true)) return f;
      return Fault("crash",
                   "the job ended with " + job.describe_exit() + " after step " +
                       std::to_string(state_.last_step),
                   state_.last_step, now, now);
    }
    if (const auto stall = hang_.check(now)) {
      Fault f("hang",
              stall->startup
                  ? "no step within the start-up timeout of " + fmt("%.3g", stall->timeout_s) + " s"
                  : "rank " + std::to_string(stall->rank) + " made no progress after step " +
                        std::to_string(stall->step) + " for " + fmt("%.3g", stall->stalled_s) +
                        " s (timeout " + fmt("%.3g", stall->timeout_s) + " s)",
              stall->step, now - stall->stalled_s, now);
      f.details = {{"rank", stall->rank},
                   {"stalled_s", stall->stalled_s},
                   {"timeout_s", stall->timeout_s},
                   {"startup", stall->startup}};
      return f;
    }
    if (lost_rank(now)) {
      // A rank that just finished may have written its "done" beat after the read above.
      for (const Heartbeat& hb : reader_.read_new())
        if (auto f = on_beat(hb, now)) return f;
      if (auto f = lost_rank(now)) return f;
    }
  }
  return std::nullopt;
}

bool Supervisor::take_collective_report(const std::string& line) {
  try {
    const auto report = dist::parse_collective_timeout_line(line);
    if (!report) return false;
    if (collective_reports_.empty()) first_report_at_ = unix_now();
    collective_reports_.push_back(*report);
  } catch (const Error& e) {  // the job's output is not ours to fail on: said, then ignored
    std::fprintf(stderr, "aegis: %s\n", e.what());
  }
  return true;
}

std::optional<Supervisor::Fault> Supervisor::collective_timeout(double now, bool job_ended) {
  // The waiting ranks report within a poll of each other (they wait on the same missing rank);
  // a second gathers them, well before their exit (5 s after the report).
  constexpr double kSettleS = 1.0;
  if (collective_reports_.empty() || (!job_ended && now - first_report_at_ < kSettleS))
    return std::nullopt;
  const CollectiveVerdict v = judge_collective_timeouts(collective_reports_);
  collective_reports_.clear();
  std::vector<std::string> missing_hosts;
  for (const int r : v.missing)
    if (latest_.count(r)) missing_hosts.push_back(latest_.at(r).host);
  Fault f("collective_timeout", describe_verdict(v), state_.last_step, v.first.since, now);
  f.details = {{"group", v.first.group},         {"seq", v.first.seq},
               {"collective", v.first.kind},     {"bytes", v.first.bytes},
               {"waiting", v.waiting},           {"missing", v.missing},
               {"missing_hosts", missing_hosts}, {"waited_s", v.first.waited_s},
               {"timeout_s", v.first.timeout_s}, {"since", v.first.since}};
  return f;
}

std::optional<Supervisor::Fault> Supervisor::on_health(double now) {
  if (!health_) return std::nullopt;
  const HealthPoll p = health_->poll(now);
  for (const std::string& what : p.lost)
    events_.write("health_source_lost", "cannot read " + what, {{"source", what}});
  for (const std::string& what : p.back)
    events_.write("health_source_back", "reading " + what + " again", {{"source", what}});
  if (p.findings.empty()) return std::nullopt;
  const HealthFinding& h = p.findings.front();
  const HealthRule& rule = health_->rules()[h.rule];
  Fault f("health",
          "health rule " + std::to_string(h.rule) + " (-> " + rule_action_name(rule.action) +
              "): " + h.what,
          state_.last_step, now, now);
  if (rule.action == RuleAction::Stop) f.response = Response::Stop;
  if (rule.action == RuleAction::MarkHostBad) f.bad_host = h.host;
  f.details = {{"rule", h.rule},           {"series", h.series}, {"value", h.value},
               {"reference", h.reference}, {"source", h.source}, {"source_host", h.host}};
  return f;
}

std::optional<Supervisor::Fault> Supervisor::on_line(const OutputLine& out) {
  echo(out);
  const std::string& line = out.text;
  if (take_collective_report(line)) return std::nullopt;
  const auto m = match_log_rules(rules_, line);
  if (!m) return std::nullopt;
  const double now = unix_now();
  Fault f("rule",
          "log rule " + std::to_string(m->index) + " (/" + rules_[m->index].regex + "/ -> " +
              rule_action_name(m->action) + ") matched: " + quote(line),
          state_.last_step, now, now);
  if (m->action == RuleAction::Stop) f.response = Response::Stop;
  if (m->action == RuleAction::MarkHostBad) f.bad_host = m->host.empty() ? hostname_ : m->host;
  return f;
}

std::optional<Supervisor::Fault> Supervisor::on_beat(const Heartbeat& hb, double now) {
  latest_[hb.rank] = hb;
  // Any phase counts: a job resumed at its last step reports it in "start" and "done" beats.
  max_step_seen_ = std::max(max_step_seen_, hb.step);
  hang_.observe(hb, now);
  for (const StragglerReport& s : stragglers_.observe(hb)) {
    const std::string what = "rank " + std::to_string(s.rank) + " on " + s.host +
                             " is a straggler: step " + std::to_string(s.step) + " took " +
                             fmt("%.3g", s.step_time_s) + " s, the other ranks' median " +
                             fmt("%.3g", s.others_median_s) + " s";
    const json details = {{"rank", s.rank},
                          {"host", s.host},
                          {"step", s.step},
                          {"step_time_s", s.step_time_s},
                          {"others_median_s", s.others_median_s}};
    events_.write("straggler", what, details);
    state_.stragglers.push_back(details);
  }
  if (hb.phase == BeatPhase::kStart) {  // a resumed job redoes the steps after its checkpoint
    step_time_s_.erase(step_time_s_.upper_bound(hb.step), step_time_s_.end());
    return std::nullopt;
  }
  if (hb.phase != BeatPhase::kStep) return std::nullopt;
  double& t = step_time_s_[hb.step];
  t = std::max(t, hb.step_time_s);
  state_.last_step = hb.step;
  if (unrecovered_ && !stepped_this_attempt_) {
    const Fault& f = *unrecovered_;
    const double recovery = hb.time - f.fault_time;
    state_.downtime_s += hb.time - down_since_;
    // recovery_s = detect_s + backoff_s + the restarted job's start-up and first step.
    const json details = {{"fault", f.kind},
                          {"step", hb.step},
                          {"recovery_s", recovery},
                          {"detect_s", f.detected_at - f.fault_time},
                          {"backoff_s", f.backoff_s}};
    events_.write("recovered",
                  "recovered from the " + f.kind + ": step " + std::to_string(hb.step) + " done " +
                      fmt("%.2f", recovery) + " s after the fault",
                  details);
    state_.recoveries.push_back(details);
    unrecovered_.reset();
    save();
  }
  stepped_this_attempt_ = true;
  const LossVerdict v = loss_guards_.try_emplace(hb.rank, opt_.spike_z, opt_.spike_window)
                            .first->second.observe(hb.step, hb.loss);
  if (v.kind == LossVerdict::Kind::Ok) return std::nullopt;
  const bool nan = v.kind == LossVerdict::Kind::NonFinite;
  Fault f(nan ? "nan" : "spike",
          nan ? "rank " + std::to_string(hb.rank) + " reported a non-finite loss at step " +
                    std::to_string(hb.step)
              : "rank " + std::to_string(hb.rank) + " loss " + fmt("%.4g", hb.loss) + " at step " +
                    std::to_string(hb.step) + " is a spike (z " + fmt("%.3g", v.z) + " over mean " +
                    fmt("%.4g", v.mean) + ")",
          hb.step, hb.time, now);
  f.response = Response::Rollback;
  f.details = {{"rank", hb.rank}, {"loss", hb.loss}, {"z", v.z}, {"window_mean", v.mean}};
  f.window = {hb.sample_begin, hb.sample_end, f.kind + " at step " + std::to_string(hb.step)};
  return f;
}

std::optional<Supervisor::Fault> Supervisor::lost_rank(double now) const {
  for (const auto& [rank, hb] : latest_) {
    if (hb.phase == BeatPhase::kDone || hb.host != hostname_)
      continue;  // only local pids can be checked
    if (::kill(pid_t(hb.pid), 0) == 0 || errno != ESRCH) continue;
    return Fault("crash",
                 "rank " + std::to_string(rank) + " (pid " + std::to_string(hb.pid) +
                     ") disappeared after step " + std::to_string(hb.step),
                 hb.step, now, now);
  }
  return std::nullopt;
}

std::vector<pid_t> Supervisor::local_ranks() const {
  std::vector<pid_t> pids;
  for (const auto& [rank, hb] : latest_)
    if (hb.phase != BeatPhase::kDone && hb.host == hostname_) pids.push_back(pid_t(hb.pid));
  return pids;
}

void Supervisor::record_fault(const Fault& f, JobProcess& job) {
  json details = f.details;
  details["step"] = f.step;
  details["fault_time"] = f.fault_time;
  details["detected_at"] = f.detected_at;
  if (!f.bad_host.empty()) details["host"] = f.bad_host;
  events_.write(f.kind, f.cause, details);
  state_.faults.push_back({{"time", f.detected_at},
                           {"kind", f.kind},
                           {"cause", f.cause},
                           {"step", f.step},
                           {"response", f.response == Response::Stop       ? "stop"
                                        : f.response == Response::Rollback ? "rollback"
                                                                           : "restart"}});
  if (!job.exited()) {
    const std::string how = job.stop(opt_.grace_s, SIGTERM, local_ranks());
    events_.write("job_stopped", "stopped the job (" + how + ")", {{"how", how}});
  }
  for (const OutputLine& line : job.drain()) echo(line);
  if (!f.bad_host.empty()) {
    state_.bad_hosts.push_back(f.bad_host);
    events_.write("bad_host", "marked host " + f.bad_host + " bad", {{"host", f.bad_host}});
  }
  save();
}

void Supervisor::roll_back(const Fault& f) {
  const std::vector<std::string> moved = quarantine_checkpoints_from(opt_.run_dir, f.step);
  json window = json::object();
  if (f.window.end > f.window.begin) {
    add_skip_window(opt_.run_dir, f.window);
    window = {{"begin", f.window.begin}, {"end", f.window.end}, {"reason", f.window.reason}};
  }
  events_.write("rollback",
                "rolled back before step " + std::to_string(f.step) + ": " +
                    std::to_string(moved.size()) + " checkpoint(s) quarantined, samples [" +
                    std::to_string(f.window.begin) + ", " + std::to_string(f.window.end) +
                    ") skipped from now on",
                {{"step", f.step}, {"quarantined", moved}, {"skip_window", window}});
}

bool Supervisor::wait_interruptibly(double seconds) const {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (g_interrupted) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !g_interrupted;
}

int Supervisor::finish(const std::string& outcome, const std::string& cause, int exit_code) {
  state_.outcome = outcome;
  state_.cause = cause;
  state_.ended_at = unix_now();
  save();
  const double wall = state_.wall_s(state_.ended_at);
  events_.write(outcome,
                outcome + (cause.empty() ? "" : ": " + cause) + " (" +
                    std::to_string(state_.restarts_used) + " restarts, goodput " +
                    fmt("%.1f", wall > 0 ? 100 * state_.useful_step_s / wall : 0) + " %)",
                {{"exit_code", exit_code},
                 {"cause", cause},
                 {"restarts", state_.restarts_used},
                 {"useful_step_s", state_.useful_step_s},
                 {"downtime_s", state_.downtime_s},
                 {"wall_s", wall}});
  return exit_code;
}

}  // namespace zaya::aegis
