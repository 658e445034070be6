// zaya eval --tasks: benchmark task files scored by log-likelihood with lm-evaluation-harness's
// rules (eval/task_file.h, eval/context_split.h, eval/task_metrics.h) on the decoder
// (infer/continuation_scorer.h). Every file is read and every prompt tokenized before any scoring,
// so bad input fails fast, naming its file, line and field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zaya::cli {

struct TaskEvalOptions {
  std::string model, tokenizer;
  std::vector<std::string> files;
  std::string format;  // a layout name, or empty: detected per file
  int limit = 0;       // items per task (0: all)
  int shots = 0;
  uint64_t seed = 1234;
  std::string log_samples;      // JSON lines, one per item of every task
  int batch = 32;               // sequences decoded together
  std::string device = "auto";  // --device (backend/device_select.h), in fp32
};

// Prints one JSON line per task (lm-eval's results layout); returns the exit code.
int run_task_eval(const TaskEvalOptions& options);

}  // namespace zaya::cli
