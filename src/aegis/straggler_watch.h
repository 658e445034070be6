// Straggler reports. Once every rank has reported a step, each rank's step time is compared with
// the median of the other ranks' times for that step; a rank slower by more than `factor` for
// `persist_steps` steps in a row is reported once (again only after it has caught up in between).
// The comparison is with the *other* ranks so that with two ranks the slow one is measured against
// the healthy one rather than against an average that it drags up itself.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "train/heartbeat.h"

namespace zaya::aegis {

struct StragglerReport {
  int rank = 0;
  std::string host;
  int64_t step = 0;
  double step_time_s = 0, others_median_s = 0;
};

class StragglerWatch {
 public:
  StragglerWatch(double factor, int persist_steps) : factor_(factor), persist_(persist_steps) {}
  // "start" beats register ranks; "step" beats are collected until the step is complete.
  std::vector<StragglerReport> observe(const Heartbeat& hb);

 private:
  std::vector<StragglerReport> judge(int64_t step, const std::map<int, double>& times);

  double factor_;
  int persist_;
  std::map<int, std::string> hosts_;                  // every rank seen
  std::map<int64_t, std::map<int, double>> pending_;  // step -> rank -> step time
  std::map<int, int> streak_;
  std::set<int> reported_;
};

}  // namespace zaya::aegis
