#include "eval/task_metrics.h"

#include <cmath>
#include <limits>

namespace zaya {

namespace {

// The first index of the maximum, as numpy's argmax.
size_t first_argmax(std::span<const double> v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

double mean(std::span<const double> v) {
  double s = 0;
  for (const double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

// A stderr as lm-eval prints it: "N/A" when there is none.
nlohmann::json stderr_value(std::span<const double> values) {
  const double se = mean_stderr(values);
  return std::isnan(se) ? nlohmann::json("N/A") : nlohmann::json(se);
}

}  // namespace

double mean_stderr(std::span<const double> values) {
  const size_t n = values.size();
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  const double mu = mean(values);
  double ss = 0;
  for (const double x : values) ss += (x - mu) * (x - mu);
  return std::sqrt(ss / double(n - 1)) / std::sqrt(double(n));
}

ItemJudgement judge_item(const Task& task, const TaskItem& item, const ChoiceScores& scores) {
  if (task.cloze()) return {scores.is_greedy[0] ? 1.0 : 0.0, 0.0};
  std::vector<double> normed;
  for (size_t c = 0; c < item.choices.size(); ++c)
    normed.push_back(scores.loglikelihoods[c] / double(item.choices[c].size()));
  const size_t gold = size_t(item.gold);
  return {first_argmax(scores.loglikelihoods) == gold ? 1.0 : 0.0,
          first_argmax(normed) == gold ? 1.0 : 0.0};
}

nlohmann::json task_results_json(const Task& task, std::span<const ChoiceScores> scores,
                                 int shots) {
  std::vector<double> acc, acc_norm, ll;
  for (size_t i = 0; i < scores.size(); ++i) {
    const ItemJudgement j = judge_item(task, task.items[i], scores[i]);
    acc.push_back(j.acc);
    acc_norm.push_back(j.acc_norm);
    ll.push_back(scores[i].loglikelihoods[0]);
  }
  nlohmann::json metrics = {{"alias", task.name}};
  if (task.cloze()) {
    metrics["perplexity,none"] = std::exp(-mean(ll));
    metrics["perplexity_stderr,none"] = "N/A";  // lm-eval bootstraps it
  }
  metrics["acc,none"] = mean(acc);
  metrics["acc_stderr,none"] = stderr_value(acc);
  if (!task.cloze()) {
    metrics["acc_norm,none"] = mean(acc_norm);
    metrics["acc_norm_stderr,none"] = stderr_value(acc_norm);
  }
  return {
      {"results", {{task.name, metrics}}},
      {"n-samples", {{task.name, {{"original", task.items.size()}, {"effective", scores.size()}}}}},
      {"n-shot", {{task.name, shots}}},
      {"config", {{"task_file", task.path}, {"layout", layout_name(task.layout)}}}};
}

nlohmann::json sample_json(const Task& task, size_t doc_id, const ChoiceScores& scores) {
  const TaskItem& item = task.items[doc_id];
  const ItemJudgement j = judge_item(task, item, scores);
  nlohmann::json out = {{"doc_id", doc_id}, {"line", item.line}};
  out["target"] = task.cloze() ? nlohmann::json(item.continuations[0]) : nlohmann::json(item.gold);
  out["loglikelihoods"] = scores.loglikelihoods;
  out["is_greedy"] = scores.is_greedy;
  out["acc"] = j.acc;
  if (!task.cloze()) out["acc_norm"] = j.acc_norm;
  return out;
}

}  // namespace zaya
