// lm-evaluation-harness's metrics on the log-likelihoods of a task's items:
//   multiple choice: acc (the argmax of the log-likelihoods is the gold choice) and acc_norm (the
//   argmax of log-likelihood / the choice's length in characters), ties to the first choice;
//   cloze (LAMBADA): acc (the continuation is the greedy one) and perplexity exp(-mean ll);
// each mean with its standard error (sample standard deviation / sqrt(n)); and the output records:
// one JSON object per task in lm-eval's `results` layout, one log-samples line per item.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/task_file.h"

namespace zaya {

struct ChoiceScores {
  std::vector<double> loglikelihoods;  // one per choice
  std::vector<bool> is_greedy;
};

struct ItemJudgement {
  double acc = 0, acc_norm = 0;
};

ItemJudgement judge_item(const Task& task, const TaskItem& item, const ChoiceScores& scores);

// sample standard deviation / sqrt(n); NaN for fewer than two values.
double mean_stderr(std::span<const double> values);

// {"results": {name: {"alias", "acc,none", "acc_stderr,none", ...}}, "n-samples", "n-shot",
// "config"}, over the first scores.size() items.
nlohmann::json task_results_json(const Task& task, std::span<const ChoiceScores> scores, int shots);

// doc_id, target, loglikelihoods, is_greedy, acc, acc_norm.
nlohmann::json sample_json(const Task& task, size_t doc_id, const ChoiceScores& scores);

}  // namespace zaya
