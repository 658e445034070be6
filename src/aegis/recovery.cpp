#include "aegis/recovery.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace zaya::aegis {

namespace fs = std::filesystem;

namespace {

// The step of "step-NNNNNNNN" and of its ".tmp"/".old" siblings; -1 for other names.
int64_t checkpoint_step(const std::string& name) {
  if (name.size() < 13 || name.rfind("step-", 0) != 0) return -1;
  const std::string digits = name.substr(5, 8);
  if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

}  // namespace

std::vector<std::string> quarantine_checkpoints_from(const std::string& run_dir, int64_t bad_step) {
  std::vector<std::string> moved;
  const fs::path root = fs::path(run_dir) / "ckpt";
  const fs::path quarantine = fs::path(run_dir) / "ckpt-quarantine";
  std::vector<fs::path> doomed;
  if (fs::is_directory(root))
    for (const auto& entry : fs::directory_iterator(root))
      if (entry.is_directory() && checkpoint_step(entry.path().filename().string()) >= bad_step)
        doomed.push_back(entry.path());
  std::sort(doomed.begin(), doomed.end());
  // A job fast enough to finish its schedule before the stop leaves final outputs trained past the
  // bad step; they go too, or the restarted run would find "already finished" (train/run_dir.h).
  const fs::path summary = fs::path(run_dir) / "summary.json", model = fs::path(run_dir) / "model";
  if (fs::exists(summary) || fs::exists(model)) {
    fs::path target = quarantine / "final-outputs";
    for (int n = 1; fs::exists(target); ++n)
      target = quarantine / ("final-outputs." + std::to_string(n));
    fs::create_directories(target);
    if (fs::exists(summary)) fs::rename(summary, target / "summary.json");
    if (fs::exists(model)) fs::rename(model, target / "model");
    moved.push_back(target.string());
  }
  for (const fs::path& dir : doomed) {
    fs::create_directories(quarantine);
    fs::path target = quarantine / dir.filename();
    for (int n = 1; fs::exists(target); ++n)
      target = quarantine / (dir.filename().string() + "." + std::to_string(n));
    fs::rename(dir, target);
    moved.push_back(target.string());
  }
  return moved;
}

std::vector<std::string> with_resume_auto(std::vector<std::string> command) {
  for (size_t i = 0; i < command.size(); ++i) {
    if (command[i] == "--resume" && i + 1 < command.size()) {
      command[i + 1] = "auto";
      return command;
    }
    if (command[i].rfind("--resume=", 0) == 0) {
      command[i] = "--resume=auto";
      return command;
    }
  }
  command.push_back("--resume");
  command.push_back("auto");
  return command;
}

std::vector<std::string> with_rank_count(std::vector<std::string> command, int ranks) {
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string& a = command[i];
    if ((a == "-np" || a == "-n" || a == "--np" || a == "--ntasks") && i + 1 < command.size()) {
      command[i + 1] = std::to_string(ranks);
      return command;
    }
    for (const char* prefix : {"--ntasks=", "--np="})
      if (a.rfind(prefix, 0) == 0) {
        command[i] = prefix + std::to_string(ranks);
        return command;
      }
  }
  ZAYA_FAIL("--restart-ranks ", ranks,
            ": the launch command names no rank count to change (mpirun -np N, srun -n N or "
            "--ntasks=N)");
}

double backoff_delay(double backoff_s, int restart, double cap_s) {
  return std::min(cap_s, backoff_s * std::pow(2.0, std::max(0, restart - 1)));
}

}  // namespace zaya::aegis
