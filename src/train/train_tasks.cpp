#include "train/train_tasks.h"

#include <cstdio>

#include "core/error.h"
#include "core/json_number.h"
#include "eval/context_split.h"
#include "tokenizer/tokenizer.h"

namespace zaya {

using nlohmann::json;

TrainTasksConfig train_tasks_config_from_json(const json& j, const std::string& where) {
  ZAYA_CHECK(j.is_object(), where, ": 'eval' must be a JSON object");
  TrainTasksConfig c;
  for (const auto& item : j.items()) {
    const std::string key = item.key();
    const json& v = item.value();
    const std::string field = where + ": field 'eval." + key + "'";
    if (key == "tasks") {
      ZAYA_CHECK(v.is_array() && !v.empty(), field, " must be a non-empty list of task files");
      for (const json& f : v) {
        ZAYA_CHECK(f.is_string(), field, " must be a list of task files (strings)");
        c.files.push_back(f.get<std::string>());
      }
    } else if (key == "every") {
      c.every = json_integer_as<int>(v, 1, field);
    } else if (key == "limit") {
      c.settings.limit = json_integer_as<int>(v, 0, field);
    } else if (key == "shots") {
      c.settings.shots = json_integer_as<int>(v, 0, field);
    } else if (key == "seed") {
      c.settings.seed = json_integer_as<uint64_t>(v, 0, field);
    } else if (key == "batch") {
      c.settings.batch = json_integer_as<int>(v, 1, field);
    } else if (key == "format") {
      ZAYA_CHECK(v.is_string(), field, " must be a layout name");
      c.settings.format = v.get<std::string>();
    } else {
      ZAYA_FAIL(where, ": unknown field 'eval.", key,
                "' (known: tasks, every, limit, shots, seed, batch, format)");
    }
  }
  ZAYA_CHECK(!c.files.empty(), where, ": 'eval' needs 'tasks', a list of task files");
  return c;
}

TrainTasks::TrainTasks(const TrainTasksConfig& config, const std::string& where,
                       const Tokenizer& tokenizer, int eval_every)
    : every_(config.every > 0 ? config.every : eval_every), batch_(config.settings.batch) {
  const int32_t prefix = loglikelihood_prefix_token(tokenizer);
  for (size_t i = 0; i < config.files.size(); ++i) {
    try {
      tasks_.push_back(prepare_task(config.files[i], config.settings, tokenizer, prefix));
    } catch (const Error& e) {
      ZAYA_FAIL(where, ": 'eval.tasks'[", i, "]: ", e.what());
    }
    ZAYA_CHECK(tasks_.back().items > 0, where, ": 'eval.tasks'[", i, "]: ", config.files[i],
               " has no items");
  }
}

void TrainTasks::check_fits(const ModelConfig& c, int64_t memory_bytes,
                            const std::string& where) const {
  try {
    for (const PreparedTask& p : tasks_) check_task_fits_context(p, c);
    check_scoring_memory(tasks_, c, batch_, memory_bytes, "'eval.batch'");
  } catch (const Error& e) {
    ZAYA_FAIL(where, ": ", e.what());
  }
}

const json& TrainTasks::evaluate(ZayaModel& model, dist::Communicator* comm) {
  last_ = json::object();
  for (const PreparedTask& p : tasks_) {
    const std::vector<ChoiceScores> scores = score_task(model, p, batch_, comm);
    const json r = task_results_json(p.task, scores, 0)["results"][p.task.name];
    json out = {{"items", p.items}};
    for (const char* k : {"acc", "acc_stderr", "acc_norm", "acc_norm_stderr", "perplexity"})
      if (r.contains(std::string(k) + ",none")) out[k] = r[std::string(k) + ",none"];
    if (!p.task.cloze()) {
      double chance = 0;
      for (size_t i = 0; i < p.items; ++i) chance += 1.0 / double(p.task.items[i].choices.size());
      out["chance"] = chance / double(p.items);
    }
    last_[p.task.name] = out;
  }
  return last_;
}

std::string TrainTasks::log_text() const {
  std::string s;
  char b[160];
  for (const auto& [name, r] : last_.items()) {
    std::snprintf(b, sizeof(b), " | %s acc %.1f%%", name.c_str(), 100 * r["acc"].get<double>());
    s += b;
  }
  return s;
}

std::string task_results_lines(const json& results) {
  std::string s;
  auto pct = [](const json& v) { return v.is_number() ? 100 * v.get<double>() : 0.0; };
  for (const auto& [name, r] : results.items()) {
    char b[256];
    int n = std::snprintf(b, sizeof(b), "%s (%lld items): acc %.1f %% ± %.1f", name.c_str(),
                          (long long)r.value("items", int64_t(0)), pct(r["acc"]),
                          pct(r.value("acc_stderr", json())));
    if (r.contains("acc_norm") && n > 0 && size_t(n) < sizeof(b))
      n += std::snprintf(b + n, sizeof(b) - size_t(n), ", acc_norm %.1f %% ± %.1f",
                         pct(r["acc_norm"]), pct(r.value("acc_norm_stderr", json())));
    if (r.contains("chance") && n > 0 && size_t(n) < sizeof(b))
      std::snprintf(b + n, sizeof(b) - size_t(n), "; chance %.1f %%", pct(r["chance"]));
    s += std::string(b) + "\n";
  }
  return s;
}

}  // namespace zaya
