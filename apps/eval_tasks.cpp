#include "eval_tasks.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "dist/communicator.h"
#include "eval/context_split.h"
#include "eval/task_metrics.h"
#include "inference_model.h"
#include "io/input_files.h"
#include "io/output_path.h"

namespace zaya::cli {

namespace {

// --log-samples: the samples' rule; the model, its tokenizer and the task files are inputs.
OutputRule samples_rule(const TaskEvalOptions& o) {
  OutputRule r{"--log-samples", o.log_samples, OutputKind::kFile, o.force, o.files};
  r.inputs.push_back(o.model);
  if (!o.tokenizer.empty()) r.inputs.push_back(o.tokenizer);
  return r;
}

}  // namespace

int run_task_eval(const TaskEvalOptions& o) {
  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator();
  const bool lead = comm->rank() == 0;
  // Before the model loads: /dev/zero or a FIFO is refused at once. Every rank checks (a
  // read-only look), so a refusal stops them all before any work.
  for (const std::string& path : o.files) require_regular_file(path, "--tasks");
  if (!o.log_samples.empty()) check_output(samples_rule(o));
  const InferenceModel m = load_inference_model(o.model, o.tokenizer, o.device);
  const int32_t prefix_token = loglikelihood_prefix_token(*m.tokenizer);
  std::vector<PreparedTask> tasks;
  for (const std::string& path : o.files)
    tasks.push_back(prepare_task(path, o, *m.tokenizer, prefix_token));
  // Before anything is scored: every choice within the model's context, and the batch's decoder
  // within this machine's memory (the caches live on the host for host-memory backends).
  const ModelConfig& config = m.loaded.model->config();
  for (const PreparedTask& p : tasks) check_task_fits_context(p, config);
  if (m.loaded.model->backend().host_memory())
    check_scoring_memory(tasks, config, o.batch, host_memory_bytes(), "--batch");
  std::optional<StagedOutput> samples;
  std::string lines;  // written once every task is scored: a failed run leaves no partial file
  if (lead && !o.log_samples.empty()) samples.emplace(samples_rule(o));
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
    for (size_t i = 0; samples && i < scores.size(); ++i) {
      nlohmann::json line = sample_json(p.task, i, scores[i]);
      line["task"] = p.task.name;
      lines += line.dump() + "\n";
    }
  }
  if (samples) {
    write_staged_text(*samples, lines);
    samples->commit();
  }
  return 0;
}

}  // namespace zaya::cli
