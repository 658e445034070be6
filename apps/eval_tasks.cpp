#include "eval_tasks.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "eval/context_split.h"
#include "eval/task_metrics.h"
#include "eval/task_prompts.h"
#include "infer/continuation_scorer.h"
#include "inference_model.h"

namespace zaya::cli {

namespace {

// A task with the token ids of every choice of its first `items` items, in item order.
struct PreparedTask {
  Task task;
  size_t items = 0;
  std::vector<ContinuationRequest> requests;
};

PreparedTask prepare_task(const std::string& path, const TaskEvalOptions& o,
                          const Tokenizer& tokenizer, int32_t prefix_token) {
  std::optional<TaskLayout> forced;
  if (!o.format.empty()) forced = parse_layout(o.format);
  PreparedTask p;
  p.task = read_task_file(path, forced);
  p.items = o.limit > 0 ? std::min(p.task.items.size(), size_t(o.limit)) : p.task.items.size();
  for (size_t i = 0; i < p.items; ++i) {
    const auto prompts = item_prompts(p.task, i, o.shots, o.seed);
    for (size_t c = 0; c < prompts.size(); ++c) {
      try {
        ContextIds ids = split_context_continuation(tokenizer, prompts[c].first, prompts[c].second,
                                                    prefix_token);
        p.requests.push_back({std::move(ids.context), std::move(ids.continuation)});
      } catch (const Error& e) {
        ZAYA_FAIL(path, ":", p.task.items[i].line, ": choice ", c, ": ", e.what());
      }
    }
  }
  return p;
}

std::vector<ChoiceScores> group_by_item(const PreparedTask& p,
                                        const std::vector<ContinuationScore>& flat) {
  std::vector<ChoiceScores> out(p.items);
  size_t r = 0;
  for (size_t i = 0; i < p.items; ++i)
    for (size_t c = 0; c < p.task.items[i].queries.size(); ++c, ++r) {
      out[i].loglikelihoods.push_back(flat[r].logprob);
      out[i].is_greedy.push_back(flat[r].is_greedy);
    }
  return out;
}

}  // namespace

int run_task_eval(const TaskEvalOptions& o) {
  const InferenceModel m = load_inference_model(o.model, o.tokenizer, o.device);
  const int32_t prefix_token = loglikelihood_prefix_token(*m.tokenizer);
  std::vector<PreparedTask> tasks;
  for (const std::string& path : o.files)
    tasks.push_back(prepare_task(path, o, *m.tokenizer, prefix_token));
  std::ofstream samples;
  if (!o.log_samples.empty()) {
    samples.open(o.log_samples, std::ios::binary | std::ios::trunc);
    ZAYA_CHECK(samples.good(), "--log-samples: cannot write '", o.log_samples, "'");
  }
  for (const PreparedTask& p : tasks) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<ContinuationScore> flat =
        score_continuations(*m.loaded.model, p.requests, o.batch);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<ChoiceScores> scores = group_by_item(p, flat);
    nlohmann::json out = task_results_json(p.task, scores, o.shots);
    out["config"]["model"] = m.loaded.path;
    out["config"]["seed"] = o.seed;
    out["config"]["seconds"] = seconds;
    out["config"]["items_per_second"] = seconds > 0 ? double(p.items) / seconds : 0.0;
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
    for (size_t i = 0; samples.is_open() && i < scores.size(); ++i) {
      nlohmann::json line = sample_json(p.task, i, scores[i]);
      line["task"] = p.task.name;
      samples << line.dump() << "\n";
    }
  }
  return 0;
}

}  // namespace zaya::cli
