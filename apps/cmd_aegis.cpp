// zaya aegis: the fault-tolerance supervisor (src/aegis/supervisor.h, docs/aegis.md).
#include "cmd_aegis.h"

#include <cstdio>
#include <memory>

#include "aegis/status.h"
#include "aegis/supervisor.h"
#include "core/error.h"

namespace zaya::cli {

namespace {

struct AegisArgs {
  aegis::AegisOptions options;
  std::string status_dir;
};

}  // namespace

Runner add_aegis_commands(CLI::App& app) {
  auto args = std::make_shared<AegisArgs>();
  aegis::AegisOptions& o = args->options;
  auto* cmd = app.add_subcommand(
      "aegis",
      "Run a training job under the fault-tolerance supervisor: zaya aegis --run-dir OUT "
      "[options] -- mpirun -np 2 zaya train --config C --out OUT");
  cmd->add_option("--run-dir", o.run_dir,
                  "the run directory: must equal the trainer's --out (heartbeats, checkpoints, "
                  "OUT/aegis/events.jsonl and state.json live there)")
      ->check(OutputDir());
  cmd->add_option("--max-restarts", o.max_restarts, "restart budget; then stop with exit 3")
      ->capture_default_str()
      ->check(NonNegativeInt());
  cmd->add_option("--backoff", o.backoff_s,
                  "seconds before the first restart, doubling per restart (at most 300 s)")
      ->capture_default_str()
      ->check(NonNegative());
  cmd->add_option("--hang-factor", o.hang_factor,
                  "hang timeout = max(--hang-floor, this x the longest recent step interval)")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--hang-floor", o.hang_floor_s,
                  "seconds; the least hang timeout once steps run (covers evaluations and "
                  "checkpoint saves)")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--startup-timeout", o.startup_timeout_s,
                  "seconds from a launch to the job's first step")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--grace", o.grace_s, "seconds from SIGTERM to SIGKILL when stopping the job")
      ->capture_default_str()
      ->check(NonNegative());
  cmd->add_option("--spike-z", o.spike_z,
                  "a loss more than this many standard deviations above the window's mean is a "
                  "spike (roll back and skip its data)")
      ->capture_default_str()
      ->check(Positive());
  cmd->add_option("--spike-window", o.spike_window, "steps of loss history behind the z-score")
      ->capture_default_str()
      ->check(IntIn(2, 1000000));
  cmd->add_option("--straggler-factor", o.straggler_factor,
                  "report a rank slower than the other ranks' median step time by this factor "
                  "for several steps in a row")
      ->capture_default_str()
      ->check(RealIn(1.0, 1e9));
  cmd->add_option("--rules", o.rules_file,
                  "JSON list of {\"regex\": ..., \"action\": restart|stop|mark_bad_host} "
                  "matched against the job's output lines")
      ->check(ExistingFile());
  cmd->add_option("--restart-ranks", o.restart_ranks,
                  "restarts launch this many ranks (the -np / -n / --ntasks of the command): "
                  "after a lost node the run continues on fewer ranks, resharded from its "
                  "checkpoint; the global batch must divide by the new data-parallel ranks")
      ->check(PositiveInt());
  cmd->add_option("--hostfile", o.hostfile,
                  "the Open MPI hostfile of the job's hosts (HOST [slots=N] per line): a host a "
                  "mark_bad_host rule names is left out of every relaunch (aegis writes the good "
                  "hosts to OUT/aegis/hostfile, points mpirun's --hostfile at it or gives srun "
                  "--exclude, and sets the rank count to their slots)")
      ->check(ExistingFile());
  cmd->add_option("--min-ranks", o.min_ranks,
                  "refuse a relaunch that would run fewer ranks than this (exit 5)")
      ->capture_default_str()
      ->check(PositiveInt());
  cmd->add_option("--node-exporter", o.node_exporters,
                  "HOST=URL: a Prometheus exporter of HOST's hardware (node_exporter's "
                  "http://HOST:9100/metrics), read every --health-interval and judged by "
                  "--health-rules (repeatable; HOST as the hostfile names it)");
  cmd->add_option("--gpu-health", o.gpu_health,
                  "HOST=nvml or HOST=amdsmi (either with :PATH for the library's file): this "
                  "machine's GPUs through NVML or AMD SMI, loaded at run time: ECC errors, "
                  "retired pages and remapped rows, Xid events, throttling, temperature, a lost "
                  "GPU (zaya_gpu_* series, docs/aegis.md), judged by --health-rules; other "
                  "hosts' GPUs through zaya health-exporter and --node-exporter");
  cmd->add_option("--health-rules", o.health_rules_file,
                  "JSON list of {metric, [labels], increase [within_s] | above, action} "
                  "(docs/aegis.md): conditions on the exporters' series, with the log rules' "
                  "actions (restart, stop, mark_bad_host)")
      ->check(ExistingFile());
  cmd->add_option("--health-interval", o.health_interval_s,
                  "seconds between readings of the health sources (default 15)")
      ->check(Positive());
  cmd->add_option("--health-timeout", o.health_timeout_s,
                  "seconds one reading of a health source may take (default 5)")
      ->check(Positive());
  cmd->add_option("--poll", o.poll_s, "seconds between checks of heartbeats and processes")
      ->capture_default_str()
      ->check(RealIn(0.01, 60.0));
  cmd->add_option("command", o.command, "the launch command, after --");

  auto* status = cmd->add_subcommand(
      "status", "Summarise a supervised run: restarts, faults, recovery, downtime, goodput");
  status->add_option("run_dir", args->status_dir, "the run directory")
      ->required()
      ->check(ExistingDir());

  return [=]() -> int {
    if (*status) {
      std::printf("%s", aegis::format_status(args->status_dir).c_str());
      return 0;
    }
    if (!*cmd) return kNotMine;
    const aegis::AegisOptions& o = args->options;  // parsed values (the lambda's copy is not)
    ZAYA_CHECK(!o.run_dir.empty(), "zaya aegis: --run-dir is required (the trainer's --out)");
    ZAYA_CHECK(!o.command.empty(),
               "zaya aegis: no launch command; expected zaya aegis --run-dir OUT -- CMD...");
    return aegis::Supervisor(o).run();
  };
}

}  // namespace zaya::cli
