// Benchmark tasks during training: the config's "eval" section names task files (the layouts of
// `zaya eval --tasks`, eval/task_file.h) that the run scores every `every` steps and at the end,
// with the data's tokenizer ('train.tokenizer'):
//
//   "eval": {"tasks": ["held_out.jsonl"], "every": 50, "limit": 200}
//
// Optional fields: every (default 'train.eval_every'), limit (items per task, 0: all), shots and
// seed (few-shot examples), batch (sequences decoded together), format (a layout name instead of
// detection). Every file is read and tokenized when the run is planned, so a bad one refuses the
// run before step 1, naming the file and the line. Scoring reads the model only: no random state
// and no data order are touched, so the training losses are the same bits with or without it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/task_eval.h"

namespace zaya {

class Tokenizer;
struct ModelConfig;

struct TrainTasksConfig {
  std::vector<std::string> files;
  int every = 0;  // steps between evaluations; 0: the run's train.eval_every
  TaskSettings settings;
};

// Parses the "eval" section; errors name `where` and the field.
TrainTasksConfig train_tasks_config_from_json(const nlohmann::json& j, const std::string& where);

class TrainTasks {
 public:
  // Reads and tokenizes every file; throws naming `where`, the field, the file and the line.
  TrainTasks(const TrainTasksConfig& config, const std::string& where, const Tokenizer& tokenizer,
             int eval_every);

  // Refuses, naming `where`, tasks a model of `c` cannot score (a choice longer than its context,
  // with the file and line) and an 'eval.batch' whose decoder would not fit in `memory_bytes`.
  void check_fits(const ModelConfig& c, int64_t memory_bytes, const std::string& where) const;

  bool due(int64_t step, bool last) const { return last || step % every_ == 0; }
  // Scores every task (collective over comm's ranks) and keeps the result: per task name,
  // acc, acc_stderr, acc_norm, acc_norm_stderr (multiple choice), chance (the mean of
  // 1 / choices) and items.
  const nlohmann::json& evaluate(ZayaModel& model, dist::Communicator* comm);
  const nlohmann::json& last() const { return last_; }
  // " | NAME acc 31.0%" per task, for the progress line.
  std::string log_text() const;

 private:
  std::vector<PreparedTask> tasks_;
  int every_ = 1, batch_ = 32;
  nlohmann::json last_;
};

// "NAME acc 31.0 % ± 3.3, acc_norm 30.5 % ± 3.3; chance 25.0 %" per task, one line each.
std::string task_results_lines(const nlohmann::json& results);

}  // namespace zaya
