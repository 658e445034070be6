// Aegis: runs a training job, watches it, and keeps it alive.
//   detect   the job exiting non-zero or a rank's process vanishing (crash), no step progress past
//            the derived timeout (hang, hang_watch.h), log rules over the job's output
//            (log_rules.h), NaN/Inf or spiking losses (loss_guard.h); stragglers are reported
//            (straggler_watch.h) but not acted on
//   respond  stop the job's process group (SIGTERM, SIGKILL after the grace period) and restart it
//            with --resume auto, after a back-off, within a restart budget; on a NaN/spike first
//            roll back: quarantine the checkpoints from the bad step on and skip the step's data
//            window (OUT/skip_windows.json); a "stop" rule ends the run; a "mark_bad_host" rule
//            records the host (state.json, and ZAYA_BAD_HOSTS for the relaunched command) and
//            restarts, without the host when --hostfile lists the job's hosts (host_list.h)
//   record   every event in OUT/aegis/events.jsonl, the totals in OUT/aegis/state.json
// run() returns the exit code: 0 completed, 2 stopped by a rule, 3 restart budget exhausted,
// 4 the job exited 0 without any training step, 5 a relaunch without the bad hosts would run fewer
// than --min-ranks, 127 the launch command cannot be executed (not
// retried), 130 interrupted (SIGINT/SIGTERM/SIGHUP to the supervisor, which stops the job first).
// The job never outlives the supervisor, even a SIGKILLed one (job_process.h).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aegis/aegis_options.h"
#include "aegis/event_log.h"
#include "aegis/hang_watch.h"
#include "aegis/health_watch.h"
#include "aegis/heartbeat_reader.h"
#include "aegis/host_list.h"
#include "aegis/job_process.h"
#include "aegis/log_rules.h"
#include "aegis/loss_guard.h"
#include "aegis/run_state.h"
#include "aegis/straggler_watch.h"
#include "dist/collective_watchdog.h"
#include "train/skip_windows.h"

namespace zaya::aegis {

constexpr int kExitStopped = 2, kExitBudgetExhausted = 3, kExitNoProgress = 4, kExitTooFewRanks = 5,
              kExitCannotExecute = 127, kExitInterrupted = 130;

class Supervisor {
 public:
  explicit Supervisor(AegisOptions options);
  int run();

 private:
  enum class Response { Restart, Rollback, Stop };
  struct Fault {
    Fault(std::string kind_, std::string cause_, int64_t step_, double fault_time_,
          double detected_at_)
        : kind(std::move(kind_)),
          cause(std::move(cause_)),
          fault_time(fault_time_),
          detected_at(detected_at_),
          step(step_) {}
    std::string kind;   // crash, hang, rule, nan, spike
    std::string cause;  // one sentence
    Response response = Response::Restart;
    double fault_time = 0, detected_at = 0;
    double backoff_s = 0;  // the wait before the restart that follows it
    int64_t step = 0;      // last step reported (crash, hang) or the bad step (nan, spike)
    SkipWindow window;     // rollback: the bad step's samples
    std::string bad_host;  // mark_bad_host rules
    nlohmann::json details = nlohmann::json::object();  // extra fields of its event
  };

  // Watches one attempt; nullopt when the job completed (or the supervisor was interrupted).
  std::optional<Fault> watch(JobProcess& job);
  std::optional<Fault> on_line(const OutputLine& line);
  std::optional<Fault> on_beat(const Heartbeat& hb, double now);
  std::optional<Fault> lost_rank(double now) const;
  // A rank's collective-timeout line (dist/collective_watchdog.h): kept; true when it was one.
  bool take_collective_report(const std::string& line);
  // Once the reports have settled (or the job ended): the fault naming the missing ranks.
  std::optional<Fault> collective_timeout(double now, bool job_ended);
  // The health sources' readings against the health rules: events for sources lost and back,
  // the fault of the first rule that fired.
  std::optional<Fault> on_health(double now);
  // The pids of this attempt's ranks on this host, from their heartbeats (JobProcess::stop).
  std::vector<pid_t> local_ranks() const;
  void record_fault(const Fault& f, JobProcess& job);
  void roll_back(const Fault& f);
  // With --hostfile and bad hosts: `command` relaunches on the good hosts' slots; false (the
  // event recorded) when they are fewer than --min-ranks.
  bool leave_out_bad_hosts(std::vector<std::string>& command);
  bool wait_interruptibly(double seconds) const;
  int finish(const std::string& outcome, const std::string& cause, int exit_code);
  void save();

  AegisOptions opt_;
  std::vector<LogRule> rules_;
  EventLog events_;
  HeartbeatReader reader_;
  HangWatch hang_;
  StragglerWatch stragglers_;
  std::map<int, LossGuard> loss_guards_;
  std::map<int, Heartbeat> latest_;        // each rank's newest beat in this attempt
  std::map<int64_t, double> step_time_s_;  // step -> slowest rank's time, latest run of the step
  std::string hostname_;
  std::vector<HostSlots> hosts_;  // --hostfile
  RunState state_;
  std::optional<Fault> unrecovered_;  // the last fault, until the restarted job's first step
  double down_since_ = 0;             // the first fault since the job last made a step
  bool stepped_this_attempt_ = false;
  int64_t max_step_seen_ = 0;            // the highest step any beat of this supervision reported
  std::unique_ptr<HealthWatch> health_;  // none without --node-exporter
  std::vector<dist::CollectiveWait> collective_reports_;  // this attempt's
  double first_report_at_ = 0;
};

}  // namespace zaya::aegis
