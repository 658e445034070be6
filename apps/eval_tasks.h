// zaya eval --tasks: benchmark task files scored by log-likelihood with lm-evaluation-harness's
// rules (eval/task_file.h, eval/context_split.h, eval/task_metrics.h) on the decoder
// (infer/continuation_scorer.h, through eval/task_eval.h). Every file is read and every prompt
// tokenized before any scoring, so bad input fails fast, naming its file, line and field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/task_eval.h"

namespace zaya::cli {

struct TaskEvalOptions : TaskSettings {
  std::string model, tokenizer;
  std::vector<std::string> files;
  std::string log_samples;      // JSON lines, one per item of every task
  bool force = false;           // --force: --log-samples may replace an existing file
  std::string device = "auto";  // --device (backend/device_select.h), in fp32
};

// Prints one JSON line per task (lm-eval's results layout); returns the exit code. Under mpirun
// the items are split over the ranks (eval/task_eval.h) and rank 0 prints and writes the samples:
// the same output as one rank's, but for the timings.
int run_task_eval(const TaskEvalOptions& options);

}  // namespace zaya::cli
