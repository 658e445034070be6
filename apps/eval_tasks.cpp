#include "eval_tasks.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "eval/context_split.h"
#include "eval/task_metrics.h"
#include "inference_model.h"
#include "io/input_files.h"

namespace zaya::cli {

int run_task_eval(const TaskEvalOptions& o) {
  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator();
  const bool lead = comm->rank() == 0;
  // Before the model loads: /dev/zero or a FIFO is refused at once.
  for (const std::string& path : o.files) require_regular_file(path, "--tasks");
  const InferenceModel m = load_inference_model(o.model, o.tokenizer, o.device);
  const int32_t prefix_token = loglikelihood_prefix_token(*m.tokenizer);
  std::vector<PreparedTask> tasks;
  for (const std::string& path : o.files)
    tasks.push_back(prepare_task(path, o, *m.tokenizer, prefix_token));
  std::ofstream samples;
  if (lead && !o.log_samples.empty()) {
    samples.open(o.log_samples, std::ios::binary | std::ios::trunc);
    ZAYA_CHECK(samples.good(), "--log-samples: cannot write '", o.log_samples, "'");
  }
  for (const PreparedTask& p : tasks) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<ChoiceScores> scores = score_task(*m.loaded.model, p, o.batch, comm.get());
    const double seconds = seconds_since(t0);
    if (!lead) continue;
    nlohmann::json out = task_results_json(p.task, scores, o.shots);
    out["config"]["model"] = m.loaded.path;
    out["config"]["seed"] = o.seed;
    out["config"]["seconds"] = seconds;
    out["config"]["items_per_second"] = seconds > 0 ? double(p.items) / seconds : 0.0;
    out["config"]["ranks"] = comm->world_size();
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
