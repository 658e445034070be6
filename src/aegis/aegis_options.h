// The supervisor's settings (`zaya aegis --help` documents each; apps/cmd_aegis.cpp).
#pragma once

#include <string>
#include <vector>

namespace zaya::aegis {

struct AegisOptions {
  std::string run_dir;               // the trainer's --out
  std::vector<std::string> command;  // the launch command, e.g. mpirun -np 2 zaya train ...
  int max_restarts = 3;
  double backoff_s = 5;  // wait before restart n: backoff_s * 2^(n-1), capped at kMaxBackoffS
  double hang_factor = 5;
  double hang_floor_s = 120;       // covers evaluations and synchronous checkpoint saves
  double startup_timeout_s = 600;  // launch to the first step of an attempt
  double grace_s = 15;             // SIGTERM to SIGKILL
  double spike_z = 6;
  int spike_window = 32;
  double straggler_factor = 1.5;
  int straggler_steps = 5;  // consecutive slow steps before a rank is reported
  std::string rules_file;   // JSON list of {regex, action}; empty: no rules
  double poll_s = 0.25;
  int restart_ranks = 0;  // > 0: restarts launch this many ranks (with_rank_count)
  std::string hostfile;   // the job's hosts (host_list.h); bad ones are left out of relaunches
  int min_ranks = 1;      // a relaunch on fewer ranks than this is refused
  // Hardware health (aegis/health_watch.h): sources as HOST=URL and this machine's GPUs as
  // HOST=nvml[:PATH] (aegis/gpu_health.h), the rules, how often they are read and how long one
  // reading may take.
  std::vector<std::string> node_exporters;
  std::vector<std::string> gpu_health;
  std::string health_rules_file;
  double health_interval_s = 15;
  double health_timeout_s = 5;
};

constexpr double kMaxBackoffS = 300;

}  // namespace zaya::aegis
