// `zaya train --trace FILE [--trace-steps A:B]` (docs/commands/train.md, "Trace"): every rank
// records spans while the steps A..B run (core/trace.h): the step's parts (data, forward,
// backward, the gradients' wait, the optimizer, checkpoint), each stage's forward and backward,
// and each collective with its bytes (dist/traced_communicator.h). The ranks start their clocks
// at one barrier, so their spans line up. At the end the ranks' events are joined, in rank order,
// into one Chrome Trace Event file (pid = rank), which Perfetto loads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/trace.h"
#include "dist/communicator.h"

namespace zaya {

struct TraceWindow {
  int64_t first = 2, last = 3;  // 1-based steps, both recorded
};
// "A:B" with 1 <= A <= B; nothing otherwise.
std::optional<TraceWindow> parse_trace_steps(const std::string& text);

class RunTrace {
 public:
  // Refuses FILE (and its ranks' part files) when something is there already (the output rule,
  // io/output_path.h), then starts the recorder after a barrier.
  RunTrace(const std::string& path, TraceWindow window, dist::Communicator& comm);
  // Records while `step` (1-based, the step about to run) is inside the window.
  void at_step(int64_t step);
  // Every rank's events into FILE (collective: every rank calls it): each rank writes its part
  // beside FILE, rank 0 joins them and removes the parts. Says where, on rank 0.
  void write();

 private:
  std::string part_path(int rank) const;
  std::string path_;
  TraceWindow window_;
  dist::Communicator& comm_;
  std::unique_ptr<trace::Recorder> recorder_;
};

}  // namespace zaya
